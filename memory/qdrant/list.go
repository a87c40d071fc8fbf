package qdrant

import (
	"context"
	"slices"

	"github.com/qdrant/go-client/qdrant"

	"github.com/vera-proxy/vera/memory"
)

// Listing in time order. Qdrant orders a scroll by the ts payload
// (microseconds), but gives the points of one ts in no defined order and
// takes no offset with order_by: paging is start_from (inclusive) plus
// leaving out what was already listed. So a page is found from the ids and
// times of its points alone: read in Qdrant's order from the cursor's ts
// on, less the points at or before the cursor's place, with the whole of
// the last ts a read may have cut short; sorted by exact time and id; and
// only then are the page's memories read.

// listPage bounds the points of one read of the points of a single ts.
const listPage = 1024

// placed is a point's place in a list: its id (as Qdrant gave it) and the
// memory's exact time and id.
type placed struct {
	id    *qdrant.PointId
	place memory.Memory
}

// List implements memory.Store.
func (s *Store) List(ctx context.Context, f memory.Filter, o memory.Order, cursor string, limit int) ([]memory.Memory, string, error) {
	var after *memory.Memory // the place the page comes after; nil: the start
	if cursor != "" {
		at, err := o.Place(cursor)
		if err != nil {
			return nil, "", err
		}
		after = &at
	}
	ok, err := s.exists(ctx)
	if err != nil || !ok {
		return nil, "", err
	}
	if limit <= 0 {
		limit = 100
	}
	ps, err := s.places(ctx, f, o, after, limit+1)
	if err != nil {
		return nil, "", err
	}
	next := ""
	if len(ps) > limit {
		ps = ps[:limit]
		next = o.Cursor(ps[limit-1].place)
	}
	out, err := s.memoriesAt(ctx, f, ps)
	return out, next, err
}

// places returns at least want places after the place after (every one
// when there are fewer), in o's order.
func (s *Store) places(ctx context.Context, f memory.Filter, o memory.Order, after *memory.Memory, want int) ([]placed, error) {
	dir, beyond := qdrant.Direction_Desc, int64(-1)
	if o == memory.OldestFirst {
		dir, beyond = qdrant.Direction_Asc, 1
	}
	ob := &qdrant.OrderBy{Key: fieldTS, Direction: dir.Enum()}
	if after != nil {
		ob.StartFrom = qdrant.NewStartFromInt(after.Time.UnixMicro())
	}
	var out []placed
	keep := func(ps []placed) {
		for _, p := range ps {
			if after == nil || o.Compare(*after, p.place) < 0 {
				out = append(out, p)
			}
		}
	}
	for len(out) < want {
		// Two more than wanted: the cursor's own point, and the first of
		// a ts the read cuts short, are usually left out.
		n := want - len(out) + 2
		cctx, cancel := withTimeout(ctx)
		got, err := s.client.Scroll(cctx, &qdrant.ScrollPoints{CollectionName: s.collection, Filter: filter(f),
			Limit: ptr(uint32(n)), OrderBy: ob, WithPayload: qdrant.NewWithPayloadInclude(fieldTimestamp)})
		cancel()
		if err != nil {
			return nil, s.wrap("list", err)
		}
		ps, err := placesOf(got)
		if err != nil {
			return nil, err
		}
		if len(ps) < n {
			keep(ps) // the end: nothing was cut short
			break
		}
		// The last ts read may hold more points than the read gave: those
		// it gave go, and all of them are read.
		last := ps[len(ps)-1].place.Time.UnixMicro()
		ps = slices.DeleteFunc(ps, func(p placed) bool { return p.place.Time.UnixMicro() == last })
		all, err := s.placesAt(ctx, f, last)
		if err != nil {
			return nil, err
		}
		keep(append(ps, all...))
		ob.StartFrom = qdrant.NewStartFromInt(last + beyond)
	}
	slices.SortFunc(out, func(a, b placed) int { return o.Compare(a.place, b.place) })
	return out, nil
}

// placesAt returns the places of every point matching f whose ts is us.
func (s *Store) placesAt(ctx context.Context, f memory.Filter, us int64) ([]placed, error) {
	qf := filter(f)
	qf.Must = append(qf.Must, qdrant.NewRange(fieldTS, &qdrant.Range{Gte: ptr(float64(us)), Lte: ptr(float64(us))}))
	var out []placed
	var offset *qdrant.PointId
	for {
		cctx, cancel := withTimeout(ctx)
		got, next, err := s.client.ScrollAndOffset(cctx, &qdrant.ScrollPoints{CollectionName: s.collection, Filter: qf,
			Limit: ptr(uint32(listPage)), Offset: offset, WithPayload: qdrant.NewWithPayloadInclude(fieldTimestamp)})
		cancel()
		if err != nil {
			return nil, s.wrap("list", err)
		}
		ps, err := placesOf(got)
		if err != nil {
			return nil, err
		}
		out = append(out, ps...)
		if next == nil {
			return out, nil
		}
		offset = next
	}
}

func placesOf(got []*qdrant.RetrievedPoint) ([]placed, error) {
	out := make([]placed, len(got))
	for i, p := range got {
		m, err := memoryOf(p.GetId(), p.GetPayload(), nil)
		if err != nil {
			return nil, err
		}
		out[i] = placed{id: p.GetId(), place: memory.Memory{ID: m.ID, Time: m.Time}}
	}
	return out, nil
}

// memoriesAt reads the memories at places ps, in their order. One deleted
// since its place was read is left out, and so is one changed so that it
// no longer matches f or has moved: it is listed at its new place.
func (s *Store) memoriesAt(ctx context.Context, f memory.Filter, ps []placed) ([]memory.Memory, error) {
	byID := make(map[string]memory.Memory, len(ps))
	for chunk := range slices.Chunk(ps, batchSize) {
		ids := make([]*qdrant.PointId, len(chunk))
		for i, p := range chunk {
			ids[i] = p.id
		}
		cctx, cancel := withTimeout(ctx)
		got, err := s.client.Get(cctx, &qdrant.GetPoints{CollectionName: s.collection, Ids: ids, WithPayload: qdrant.NewWithPayload(true)})
		cancel()
		if err != nil {
			return nil, s.wrap("list", err)
		}
		for _, p := range got {
			m, err := memoryOf(p.GetId(), p.GetPayload(), nil)
			if err != nil {
				return nil, err
			}
			byID[m.ID] = m
		}
	}
	out := make([]memory.Memory, 0, len(ps))
	for _, p := range ps {
		m, ok := byID[p.place.ID]
		if ok && m.Namespace == f.Namespace && m.Time.Equal(p.place.Time) && (len(f.Types) == 0 || slices.Contains(f.Types, m.Type)) {
			out = append(out, m)
		}
	}
	return out, nil
}
