// Package qdranttest is an in-process Qdrant for tests: a gRPC server built on
// the go-client's generated server interfaces that implements only what
// vera calls, in memory. It is not a search engine (every search is an
// exact scan), but it enforces the rules of Qdrant that vera depends on, so
// that a misuse fails in CI the way it would fail against a real server.
// Each rule is marked RULE with a link to Qdrant's documentation.
//
// Tests run against a real Qdrant instead when VERA_TEST_QDRANT_URL is set.
package qdranttest

import (
	"cmp"
	"context"
	"fmt"
	"hash/crc32"
	"math"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/qdrant/go-client/qdrant"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Server is a running stand-in.
type Server struct {
	qdrant.UnimplementedQdrantServer

	mu          sync.Mutex
	collections map[string]*collection
	grpc        *grpc.Server
	ln          net.Listener
	addr        string
	strict      bool
}

// Strict makes the collections created from now on refuse a filter on a
// payload field with no index, as a Qdrant in strict mode does
// (strict_mode_config.unindexed_filtering_retrieve = false).
// https://qdrant.tech/documentation/guides/administration/#strict-mode
func (s *Server) Strict() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.strict = true
}

type collection struct {
	name     string
	dense    map[string]*qdrant.VectorParams
	sparse   map[string]*qdrant.SparseVectorParams
	metadata map[string]*qdrant.Value
	indexes  map[string]qdrant.FieldType
	ranges   map[string]bool // integer indexes with range on (or float/datetime)
	points   map[string]*point
	strict   bool // filters need an index (Server.Strict)
}

type point struct {
	id      *qdrant.PointId
	dense   map[string][]float32
	sparse  map[string]*qdrant.SparseVector
	payload map[string]*qdrant.Value
}

// Start listens on addr ("127.0.0.1:0" for any free port) and serves.
func Start(addr string) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	s := &Server{collections: map[string]*collection{}}
	s.serve(ln)
	return s, nil
}

func (s *Server) serve(ln net.Listener) {
	s.ln, s.addr = ln, ln.Addr().String()
	s.grpc = grpc.NewServer()
	qdrant.RegisterQdrantServer(s.grpc, s)
	qdrant.RegisterCollectionsServer(s.grpc, collectionsService{s: s})
	qdrant.RegisterPointsServer(s.grpc, pointsService{s: s})
	go func() { _ = s.grpc.Serve(ln) }()
}

// Addr is the gRPC address.
func (s *Server) Addr() string { return s.addr }

// URL is the address as vera's configuration takes it.
func (s *Server) URL() string { return "http://" + s.addr }

// Stop stops serving, as a Qdrant going down; the data stays for Restart.
func (s *Server) Stop() { s.grpc.Stop() }

// Restart serves again on the same address, with the same data.
func (s *Server) Restart() error {
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		return err
	}
	s.serve(ln)
	return nil
}

// Points returns the number of points in a collection.
func (s *Server) Points(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.collections[name]; c != nil {
		return len(c.points)
	}
	return 0
}

func bad(format string, args ...any) error {
	return status.Errorf(codes.InvalidArgument, "Wrong input: "+format, args...)
}

// get returns a collection; the caller holds s.mu.
func (s *Server) get(name string) (*collection, error) {
	c := s.collections[name]
	if c == nil {
		return nil, status.Errorf(codes.NotFound, "Not found: Collection `%s` doesn't exist!", name)
	}
	return c, nil
}

// HealthCheck implements qdrant.QdrantServer.
func (s *Server) HealthCheck(context.Context, *qdrant.HealthCheckRequest) (*qdrant.HealthCheckReply, error) {
	return &qdrant.HealthCheckReply{Title: "qdrant stand-in", Version: "1.17.0"}, nil
}

// collectionsService serves the collections API.
type collectionsService struct {
	qdrant.UnimplementedCollectionsServer
	s *Server
}

// pointsService serves the points API.
type pointsService struct {
	qdrant.UnimplementedPointsServer
	s *Server
}

// Create implements qdrant.CollectionsServer.
func (cs collectionsService) Create(_ context.Context, r *qdrant.CreateCollection) (*qdrant.CollectionOperationResponse, error) {
	s := cs.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.collections[r.GetCollectionName()] != nil {
		// RULE: a name is taken once.
		// https://qdrant.tech/documentation/concepts/collections/#create-a-collection
		return nil, bad("Collection `%s` already exists!", r.GetCollectionName())
	}
	c := &collection{
		name: r.GetCollectionName(), dense: map[string]*qdrant.VectorParams{}, sparse: map[string]*qdrant.SparseVectorParams{},
		metadata: r.GetMetadata(), indexes: map[string]qdrant.FieldType{}, ranges: map[string]bool{}, points: map[string]*point{},
		strict: s.strict,
	}
	if p := r.GetVectorsConfig().GetParams(); p != nil {
		c.dense[""] = p
	}
	for name, p := range r.GetVectorsConfig().GetParamsMap().GetMap() {
		if p.GetSize() == 0 {
			return nil, bad("vector size must be positive")
		}
		c.dense[name] = p
	}
	for name, p := range r.GetSparseVectorsConfig().GetMap() {
		c.sparse[name] = p
	}
	s.collections[c.name] = c
	return &qdrant.CollectionOperationResponse{Result: true}, nil
}

// Delete implements qdrant.CollectionsServer.
func (cs collectionsService) Delete(_ context.Context, r *qdrant.DeleteCollection) (*qdrant.CollectionOperationResponse, error) {
	s := cs.s
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.collections[r.GetCollectionName()]
	delete(s.collections, r.GetCollectionName())
	return &qdrant.CollectionOperationResponse{Result: ok}, nil
}

// CollectionExists implements qdrant.CollectionsServer.
func (cs collectionsService) CollectionExists(_ context.Context, r *qdrant.CollectionExistsRequest) (*qdrant.CollectionExistsResponse, error) {
	s := cs.s
	s.mu.Lock()
	defer s.mu.Unlock()
	return &qdrant.CollectionExistsResponse{Result: &qdrant.CollectionExists{Exists: s.collections[r.GetCollectionName()] != nil}}, nil
}

// Get implements qdrant.CollectionsServer.
func (cs collectionsService) Get(_ context.Context, r *qdrant.GetCollectionInfoRequest) (*qdrant.GetCollectionInfoResponse, error) {
	s := cs.s
	s.mu.Lock()
	defer s.mu.Unlock()
	c, err := s.get(r.GetCollectionName())
	if err != nil {
		return nil, err
	}
	params := &qdrant.CollectionParams{ShardNumber: 1, SparseVectorsConfig: &qdrant.SparseVectorConfig{Map: c.sparse}}
	if p, ok := c.dense[""]; ok {
		params.VectorsConfig = qdrant.NewVectorsConfig(p)
	} else {
		params.VectorsConfig = qdrant.NewVectorsConfigMap(c.dense)
	}
	schema := map[string]*qdrant.PayloadSchemaInfo{}
	for field, t := range c.indexes {
		schema[field] = &qdrant.PayloadSchemaInfo{DataType: qdrant.PayloadSchemaType(t + 1)}
	}
	n := uint64(len(c.points))
	return &qdrant.GetCollectionInfoResponse{Result: &qdrant.CollectionInfo{
		Status: qdrant.CollectionStatus_Green, Config: &qdrant.CollectionConfig{Params: params, Metadata: c.metadata},
		PayloadSchema: schema, PointsCount: &n,
	}}, nil
}

// CreateFieldIndex implements qdrant.PointsServer.
func (ps pointsService) CreateFieldIndex(_ context.Context, r *qdrant.CreateFieldIndexCollection) (*qdrant.PointsOperationResponse, error) {
	s := ps.s
	s.mu.Lock()
	defer s.mu.Unlock()
	c, err := s.get(r.GetCollectionName())
	if err != nil {
		return nil, err
	}
	t := r.GetFieldType()
	c.indexes[r.GetFieldName()] = t
	// RULE: only a range-capable index lets order_by use a key: integer
	// with range enabled (the default), float or datetime.
	// https://qdrant.tech/documentation/concepts/indexing/#parameterized-index
	switch t {
	case qdrant.FieldType_FieldTypeInteger:
		ip := r.GetFieldIndexParams().GetIntegerIndexParams()
		c.ranges[r.GetFieldName()] = ip == nil || ip.Range == nil || ip.GetRange()
	case qdrant.FieldType_FieldTypeFloat, qdrant.FieldType_FieldTypeDatetime:
		c.ranges[r.GetFieldName()] = true
	}
	return done(), nil
}

func done() *qdrant.PointsOperationResponse {
	return &qdrant.PointsOperationResponse{Result: &qdrant.UpdateResult{Status: qdrant.UpdateStatus_Completed}}
}

// key normalises a point id. RULE: an id is an unsigned integer or a UUID;
// anything else is refused, and UUIDs compare in their canonical form.
// https://qdrant.tech/documentation/concepts/points/#point-ids
func key(id *qdrant.PointId) (string, *qdrant.PointId, error) {
	switch v := id.GetPointIdOptions().(type) {
	case *qdrant.PointId_Num:
		return fmt.Sprintf("n%020d", v.Num), id, nil
	case *qdrant.PointId_Uuid:
		u, err := uuid.Parse(v.Uuid)
		if err != nil {
			return "", nil, bad("Unable to parse UUID: %s", v.Uuid)
		}
		return "u" + u.String(), qdrant.NewID(u.String()), nil
	}
	return "", nil, bad("point id missing")
}

// checkVectors validates a point's vectors against the collection.
func (c *collection) checkVectors(dense map[string][]float32, sparse map[string]*qdrant.SparseVector) error {
	for name, v := range dense {
		p, ok := c.dense[name]
		if !ok {
			// RULE: only configured vector names exist.
			// https://qdrant.tech/documentation/concepts/vectors/#named-vectors
			return bad("Not existing vector name error: %s", name)
		}
		if uint64(len(v)) != p.GetSize() {
			// RULE: a vector has the collection's size.
			// https://qdrant.tech/documentation/concepts/collections/#create-a-collection
			return bad("Vector dimension error: expected dim: %d, got %d", p.GetSize(), len(v))
		}
	}
	for name, v := range sparse {
		if _, ok := c.sparse[name]; !ok {
			return bad("Not existing vector name error: %s", name)
		}
		// RULE: a sparse vector has as many values as indices, each index
		// once. https://qdrant.tech/documentation/concepts/vectors/#sparse-vectors
		if len(v.GetIndices()) != len(v.GetValues()) {
			return bad("Sparse vector indices and values must have the same length")
		}
		seen := map[uint32]bool{}
		for _, i := range v.GetIndices() {
			if seen[i] {
				return bad("Sparse vector must have unique indices")
			}
			seen[i] = true
		}
	}
	return nil
}

// vectorsOf splits a point's input vectors into dense and sparse ones.
// RULE: with the Cosine distance, Qdrant stores vectors normalised, and
// returns them so. https://qdrant.tech/documentation/concepts/search/#metrics
func (c *collection) vectorsOf(vs *qdrant.Vectors) (map[string][]float32, map[string]*qdrant.SparseVector) {
	dense, sparse := map[string][]float32{}, map[string]*qdrant.SparseVector{}
	put := func(name string, v *qdrant.Vector) {
		switch {
		case v.GetSparse() != nil:
			sparse[name] = v.GetSparse()
		case v.GetDense() != nil:
			dense[name] = v.GetDense().GetData()
		case len(v.GetData()) > 0 && v.GetIndices() != nil:
			sparse[name] = &qdrant.SparseVector{Indices: v.GetIndices().GetData(), Values: v.GetData()}
		case len(v.GetData()) > 0:
			dense[name] = v.GetData()
		}
	}
	if v := vs.GetVector(); v != nil {
		put("", v)
	}
	for name, v := range vs.GetVectors().GetVectors() {
		put(name, v)
	}
	return dense, sparse
}

func (c *collection) normalise(dense map[string][]float32) {
	for name, v := range dense {
		if c.dense[name].GetDistance() == qdrant.Distance_Cosine {
			dense[name] = unit(v)
		}
	}
}

func unit(v []float32) []float32 {
	var ss float64
	for _, x := range v {
		ss += float64(x) * float64(x)
	}
	out := slices.Clone(v)
	if ss == 0 {
		return out
	}
	inv := 1 / math.Sqrt(ss)
	for i := range out {
		out[i] = float32(float64(out[i]) * inv)
	}
	return out
}

// Upsert implements qdrant.PointsServer.
func (ps pointsService) Upsert(_ context.Context, r *qdrant.UpsertPoints) (*qdrant.PointsOperationResponse, error) {
	s := ps.s
	s.mu.Lock()
	defer s.mu.Unlock()
	c, err := s.get(r.GetCollectionName())
	if err != nil {
		return nil, err
	}
	// The whole batch is checked before anything is written.
	type write struct {
		k string
		p *point
	}
	var writes []write
	for _, p := range r.GetPoints() {
		k, id, err := key(p.GetId())
		if err != nil {
			return nil, err
		}
		dense, sparse := c.vectorsOf(p.GetVectors())
		if err := c.checkVectors(dense, sparse); err != nil {
			return nil, err
		}
		c.normalise(dense)
		writes = append(writes, write{k, &point{id: id, dense: dense, sparse: sparse, payload: p.GetPayload()}})
	}
	for _, w := range writes {
		c.points[w.k] = w.p
	}
	return done(), nil
}

// UpdateVectors implements qdrant.PointsServer.
func (ps pointsService) UpdateVectors(_ context.Context, r *qdrant.UpdatePointVectors) (*qdrant.PointsOperationResponse, error) {
	s := ps.s
	s.mu.Lock()
	defer s.mu.Unlock()
	c, err := s.get(r.GetCollectionName())
	if err != nil {
		return nil, err
	}
	for _, pv := range r.GetPoints() {
		k, _, err := key(pv.GetId())
		if err != nil {
			return nil, err
		}
		p := c.points[k]
		if p == nil {
			// RULE: updating the vectors of a missing point is an error.
			// https://qdrant.tech/documentation/concepts/points/#update-vectors
			return nil, status.Errorf(codes.NotFound, "Not found: No point with id %s found", k[1:])
		}
		dense, sparse := c.vectorsOf(pv.GetVectors())
		if err := c.checkVectors(dense, sparse); err != nil {
			return nil, err
		}
		c.normalise(dense)
		for n, v := range dense {
			p.dense[n] = v
		}
		for n, v := range sparse {
			p.sparse[n] = v
		}
	}
	return done(), nil
}

// deletePoints deletes by ids or by filter.
func (s *Server) deletePoints(r *qdrant.DeletePoints) error {
	c, err := s.get(r.GetCollectionName())
	if err != nil {
		return err
	}
	if f := r.GetPoints().GetFilter(); f != nil {
		for k, p := range c.points {
			if ok, err := c.matches(p, f); err != nil {
				return err
			} else if ok {
				delete(c.points, k)
			}
		}
		return nil
	}
	for _, id := range r.GetPoints().GetPoints().GetIds() {
		k, _, err := key(id)
		if err != nil {
			return err
		}
		delete(c.points, k)
	}
	return nil
}

// getPoints returns the points asked for that exist.
func (s *Server) getPoints(r *qdrant.GetPoints) ([]*qdrant.RetrievedPoint, error) {
	c, err := s.get(r.GetCollectionName())
	if err != nil {
		return nil, err
	}
	var out []*qdrant.RetrievedPoint
	for _, id := range r.GetIds() {
		k, _, err := key(id)
		if err != nil {
			return nil, err
		}
		if p := c.points[k]; p != nil {
			out = append(out, p.retrieved(r.GetWithPayload(), r.GetWithVectors()))
		}
	}
	return out, nil
}

// retrieved renders a point with the selected payload and vectors.
func (p *point) retrieved(wp *qdrant.WithPayloadSelector, wv *qdrant.WithVectorsSelector) *qdrant.RetrievedPoint {
	return &qdrant.RetrievedPoint{Id: p.id, Payload: p.selectPayload(wp), Vectors: p.selectVectors(wv)}
}

func (p *point) selectPayload(wp *qdrant.WithPayloadSelector) map[string]*qdrant.Value {
	switch {
	case wp == nil:
		return nil
	case wp.GetInclude() != nil:
		out := map[string]*qdrant.Value{}
		for _, f := range wp.GetInclude().GetFields() {
			if v, ok := p.payload[f]; ok {
				out[f] = v
			}
		}
		return out
	case wp.GetExclude() != nil:
		out := map[string]*qdrant.Value{}
		for k, v := range p.payload {
			if !slices.Contains(wp.GetExclude().GetFields(), k) {
				out[k] = v
			}
		}
		return out
	case wp.GetEnable():
		return p.payload
	}
	return nil
}

func (p *point) selectVectors(wv *qdrant.WithVectorsSelector) *qdrant.VectorsOutput {
	if wv == nil || !wv.GetEnable() && wv.GetInclude() == nil {
		return nil
	}
	named := map[string]*qdrant.VectorOutput{}
	want := func(n string) bool { return wv.GetEnable() || slices.Contains(wv.GetInclude().GetNames(), n) }
	for n, v := range p.dense {
		if want(n) {
			named[n] = &qdrant.VectorOutput{Vector: &qdrant.VectorOutput_Dense{Dense: &qdrant.DenseVector{Data: v}}}
		}
	}
	for n, v := range p.sparse {
		if want(n) {
			named[n] = &qdrant.VectorOutput{Vector: &qdrant.VectorOutput_Sparse{Sparse: v}}
		}
	}
	return &qdrant.VectorsOutput{VectorsOptions: &qdrant.VectorsOutput_Vectors{Vectors: &qdrant.NamedVectorsOutput{Vectors: named}}}
}

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
	var matched []*point
	if ob := r.GetOrderBy(); ob != nil {
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
			return nil, status.Errorf(codes.Unimplemented, "stand-in: start_from %T not implemented", v)
		}
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

// strs returns a payload value's strings (a string, or a list's strings).
func strs(v *qdrant.Value) []string {
	if l := v.GetListValue(); l != nil {
		var out []string
		for _, x := range l.GetValues() {
			out = append(out, strs(x)...)
		}
		return out
	}
	if s, ok := v.GetKind().(*qdrant.Value_StringValue); ok {
		return []string{s.StringValue}
	}
	return nil
}

// numbers returns a payload value's numbers.
func numbers(v *qdrant.Value) []float64 {
	switch k := v.GetKind().(type) {
	case *qdrant.Value_IntegerValue:
		return []float64{float64(k.IntegerValue)}
	case *qdrant.Value_DoubleValue:
		return []float64{k.DoubleValue}
	case *qdrant.Value_ListValue:
		var out []float64
		for _, x := range k.ListValue.GetValues() {
			out = append(out, numbers(x)...)
		}
		return out
	}
	return nil
}

// matches applies a filter. RULE: must = all, should = at least one (when
// present), must_not = none; a keyword match is exact and matches any
// element of an array; keywords (match any) matches if any value is among
// them; a range compares numbers; has_vector needs the named vector.
// https://qdrant.tech/documentation/concepts/filtering/
func (c *collection) matches(p *point, f *qdrant.Filter) (bool, error) {
	if f == nil {
		return true, nil
	}
	for _, cond := range f.GetMust() {
		ok, err := c.condition(p, cond)
		if err != nil || !ok {
			return false, err
		}
	}
	for _, cond := range f.GetMustNot() {
		ok, err := c.condition(p, cond)
		if err != nil || ok {
			return false, err
		}
	}
	if len(f.GetShould()) > 0 {
		for _, cond := range f.GetShould() {
			ok, err := c.condition(p, cond)
			if err != nil {
				return false, err
			}
			if ok {
				return true, nil
			}
		}
		return false, nil
	}
	return true, nil
}

func (c *collection) condition(p *point, cond *qdrant.Condition) (bool, error) {
	switch k := cond.GetConditionOneOf().(type) {
	case *qdrant.Condition_Filter:
		return c.matches(p, k.Filter)
	case *qdrant.Condition_HasVector:
		name := k.HasVector.GetHasVector()
		if _, ok := c.dense[name]; !ok {
			if _, ok := c.sparse[name]; !ok {
				return false, bad("Not existing vector name error: %s", name)
			}
		}
		_, d := p.dense[name]
		_, s := p.sparse[name]
		return d || s, nil
	case *qdrant.Condition_HasId:
		for _, id := range k.HasId.GetHasId() {
			if pk, _, err := key(id); err == nil {
				if qk, _, _ := key(p.id); pk == qk {
					return true, nil
				}
			}
		}
		return false, nil
	case *qdrant.Condition_Field:
		if _, ok := c.indexes[k.Field.GetKey()]; c.strict && !ok {
			// RULE: in strict mode, a filter needs its field indexed.
			return false, bad("Index required but not found for \"%s\" of one of the following types: [integer]. Help: Create an index for this key or use a different filter.", k.Field.GetKey())
		}
		return fieldMatches(p.payload[k.Field.GetKey()], k.Field)
	}
	return false, status.Errorf(codes.Unimplemented, "stand-in: condition %T not implemented", cond.GetConditionOneOf())
}

func fieldMatches(v *qdrant.Value, fc *qdrant.FieldCondition) (bool, error) {
	if m := fc.GetMatch(); m != nil {
		values := strs(v)
		switch mv := m.GetMatchValue().(type) {
		case *qdrant.Match_Keyword:
			return slices.Contains(values, mv.Keyword), nil
		case *qdrant.Match_Keywords:
			for _, want := range mv.Keywords.GetStrings() {
				if slices.Contains(values, want) {
					return true, nil
				}
			}
			return false, nil
		case *qdrant.Match_ExceptKeywords:
			for _, not := range mv.ExceptKeywords.GetStrings() {
				if slices.Contains(values, not) {
					return false, nil
				}
			}
			return true, nil
		}
		return false, status.Errorf(codes.Unimplemented, "stand-in: match %T not implemented", m.GetMatchValue())
	}
	if r := fc.GetRange(); r != nil {
		for _, x := range numbers(v) {
			if (r.Gt == nil || x > r.GetGt()) && (r.Gte == nil || x >= r.GetGte()) &&
				(r.Lt == nil || x < r.GetLt()) && (r.Lte == nil || x <= r.GetLte()) {
				return true, nil
			}
		}
		return false, nil
	}
	return false, status.Errorf(codes.Unimplemented, "stand-in: field condition on %q not implemented", fc.GetKey())
}

// URL returns the Qdrant a test uses: real (VERA_TEST_QDRANT_URL, read by
// the caller) when set, else a stand-in started for the test and stopped
// after it.
func URL(t testing.TB, real string) string {
	t.Helper()
	if real != "" {
		return real
	}
	s, err := Start("127.0.0.1:0")
	if err != nil {
		t.Fatalf("starting the Qdrant stand-in: %v", err)
	}
	t.Cleanup(s.Stop)
	return s.URL()
}
