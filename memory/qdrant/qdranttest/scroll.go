package qdranttest

import (
	"cmp"
	"hash/crc32"
	"math"
	"slices"
	"strings"

	"github.com/qdrant/go-client/qdrant"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Reading points in order: scroll, count and facet.

// sortedKeys returns the point keys in id order: numbers, then UUIDs.
// RULE: scroll without order_by pages in id order.
// https://qdrant.tech/documentation/concepts/points/#scroll-points
func (c *collection) sortedKeys() []string {
	keys := make([]string, 0, len(c.points))
	for k := range c.points {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// scroll implements Scroll.
func (s *Server) scroll(r *qdrant.ScrollPoints) (*qdrant.ScrollResponse, error) {
	c, err := s.get(r.GetCollectionName())
	if err != nil {
		return nil, err
	}
	limit := int(r.GetLimit())
	if r.Limit == nil {
		limit = 10
	}
	if ob := r.GetOrderBy(); ob != nil {
		return c.scrollOrdered(r, ob, limit)
	}
	start := ""
	if r.GetOffset() != nil {
		if start, _, err = key(r.GetOffset()); err != nil {
			return nil, err
		}
	}
	res := &qdrant.ScrollResponse{}
	for _, k := range c.sortedKeys() {
		if k < start {
			continue
		}
		p := c.points[k]
		ok, err := c.matches(p, r.GetFilter())
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		if len(res.Result) == limit {
			res.NextPageOffset = p.id
			break
		}
		res.Result = append(res.Result, p.retrieved(r.GetWithPayload(), r.GetWithVectors()))
	}
	return res, nil
}

// scrollOrdered is scroll by a payload key (order_by).
func (c *collection) scrollOrdered(r *qdrant.ScrollPoints, ob *qdrant.OrderBy, limit int) (*qdrant.ScrollResponse, error) {
	// RULE: order_by needs a range index on its key, and cannot be
	// combined with an offset id.
	// https://qdrant.tech/documentation/concepts/points/#order-points-by-payload-key
	if !c.ranges[ob.GetKey()] {
		return nil, bad("No range index for `order_by` key: `%s`. Please create one to use `order_by`. Check https://qdrant.tech/documentation/concepts/indexing/#payload-index to see which payload schemas support Range conditions", ob.GetKey())
	}
	if r.GetOffset() != nil {
		return nil, bad("Cannot use an `offset` when using `order_by`. The alternative for paging is to use `order_by.start_from` and a filter to exclude the IDs that you've already seen for the `order_by.start_from` value")
	}
	desc := ob.GetDirection() == qdrant.Direction_Desc
	from, err := startFrom(ob, desc)
	if err != nil {
		return nil, err
	}
	var matched []*point
	for _, k := range c.sortedKeys() {
		p := c.points[k]
		ok, err := c.matches(p, r.GetFilter())
		if err != nil {
			return nil, err
		}
		if !ok || len(numbers(p.payload[ob.GetKey()])) == 0 {
			continue
		}
		if x := numbers(p.payload[ob.GetKey()])[0]; desc && x > from || !desc && x < from {
			continue
		}
		matched = append(matched, p)
	}
	// RULE: the order of points of equal value is not defined (that
	// is why there is no next_page_offset): the stand-in gives them
	// in an order of its own, neither by id nor as written, so that
	// code relying on one fails here as it would, some day, there.
	// https://qdrant.tech/documentation/concepts/points/#order-points-by-payload-key
	slices.SortFunc(matched, func(a, b *point) int {
		x, y := numbers(a.payload[ob.GetKey()])[0], numbers(b.payload[ob.GetKey()])[0]
		if desc {
			x, y = y, x
		}
		if c := cmp.Compare(x, y); c != 0 {
			return c
		}
		return cmp.Compare(scrambled(a.id), scrambled(b.id))
	})
	res := &qdrant.ScrollResponse{}
	for _, p := range matched[:min(limit, len(matched))] {
		res.Result = append(res.Result, p.retrieved(r.GetWithPayload(), r.GetWithVectors()))
	}
	return res, nil
}

// startFrom is where an order_by starts.
func startFrom(ob *qdrant.OrderBy, desc bool) (float64, error) {
	// RULE: start_from is where the order starts, inclusive: values at
	// or above it ascending, at or below it descending (Qdrant turns
	// it into a gte or lte range on the key).
	// https://qdrant.tech/documentation/concepts/points/#order-points-by-payload-key
	from := math.Inf(-1)
	if desc {
		from = math.Inf(1)
	}
	switch v := ob.GetStartFrom().GetValue().(type) {
	case nil:
	case *qdrant.StartFrom_Integer:
		from = float64(v.Integer)
	case *qdrant.StartFrom_Float:
		from = v.Float
	default:
		return 0, status.Errorf(codes.Unimplemented, "stand-in: start_from %T not implemented", v)
	}
	return from, nil
}

// scrambled is a point's rank among points of equal order_by value: a
// hash of its id.
func scrambled(id *qdrant.PointId) uint32 {
	k, _, _ := key(id)
	return crc32.ChecksumIEEE([]byte(k))
}

// count implements Count.
func (s *Server) count(r *qdrant.CountPoints) (uint64, error) {
	c, err := s.get(r.GetCollectionName())
	if err != nil {
		return 0, err
	}
	n := uint64(0)
	for _, p := range c.points {
		ok, err := c.matches(p, r.GetFilter())
		if err != nil {
			return 0, err
		}
		if ok {
			n++
		}
	}
	return n, nil
}

// facet implements Facet.
func (s *Server) facet(r *qdrant.FacetCounts) ([]*qdrant.FacetHit, error) {
	c, err := s.get(r.GetCollectionName())
	if err != nil {
		return nil, err
	}
	// RULE: facets need an index on the key (keyword, integer or bool).
	// https://qdrant.tech/documentation/concepts/payload/#facet-counts
	switch t, ok := c.indexes[r.GetKey()]; {
	case ok && (t == qdrant.FieldType_FieldTypeKeyword || t == qdrant.FieldType_FieldTypeInteger || t == qdrant.FieldType_FieldTypeBool):
	default:
		return nil, bad("Index required but not found for \"%s\" of one of the following types: [keyword, integer, boolean]", r.GetKey())
	}
	counts := map[string]uint64{}
	for _, p := range c.points {
		ok, err := c.matches(p, r.GetFilter())
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		for _, v := range strs(p.payload[r.GetKey()]) {
			counts[v]++
		}
	}
	var hits []*qdrant.FacetHit
	for v, n := range counts {
		hits = append(hits, &qdrant.FacetHit{Value: qdrant.NewFacetValue(v), Count: n})
	}
	slices.SortFunc(hits, func(a, b *qdrant.FacetHit) int {
		if c := cmp.Compare(b.GetCount(), a.GetCount()); c != 0 {
			return c
		}
		return strings.Compare(a.GetValue().GetStringValue(), b.GetValue().GetStringValue())
	})
	limit := 10
	if r.Limit != nil {
		limit = int(r.GetLimit())
	}
	return hits[:min(limit, len(hits))], nil
}
