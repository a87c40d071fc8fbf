package qdranttest

import (
	"cmp"
	"context"
	"maps"
	"math"
	"slices"

	"github.com/qdrant/go-client/qdrant"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Delete implements qdrant.PointsServer.
func (ps pointsService) Delete(_ context.Context, r *qdrant.DeletePoints) (*qdrant.PointsOperationResponse, error) {
	ps.s.mu.Lock()
	defer ps.s.mu.Unlock()
	if err := ps.s.deletePoints(r); err != nil {
		return nil, err
	}
	return done(), nil
}

// Get implements qdrant.PointsServer.
func (ps pointsService) Get(_ context.Context, r *qdrant.GetPoints) (*qdrant.GetResponse, error) {
	ps.s.mu.Lock()
	defer ps.s.mu.Unlock()
	got, err := ps.s.getPoints(r)
	if err != nil {
		return nil, err
	}
	return &qdrant.GetResponse{Result: got}, nil
}

// Scroll implements qdrant.PointsServer.
func (ps pointsService) Scroll(_ context.Context, r *qdrant.ScrollPoints) (*qdrant.ScrollResponse, error) {
	ps.s.mu.Lock()
	defer ps.s.mu.Unlock()
	return ps.s.scroll(r)
}

// Count implements qdrant.PointsServer.
func (ps pointsService) Count(_ context.Context, r *qdrant.CountPoints) (*qdrant.CountResponse, error) {
	ps.s.mu.Lock()
	defer ps.s.mu.Unlock()
	n, err := ps.s.count(r)
	if err != nil {
		return nil, err
	}
	return &qdrant.CountResponse{Result: &qdrant.CountResult{Count: n}}, nil
}

// Facet implements qdrant.PointsServer.
func (ps pointsService) Facet(_ context.Context, r *qdrant.FacetCounts) (*qdrant.FacetResponse, error) {
	ps.s.mu.Lock()
	defer ps.s.mu.Unlock()
	hits, err := ps.s.facet(r)
	if err != nil {
		return nil, err
	}
	return &qdrant.FacetResponse{Hits: hits}, nil
}

// Query implements qdrant.PointsServer.
func (ps pointsService) Query(_ context.Context, r *qdrant.QueryPoints) (*qdrant.QueryResponse, error) {
	ps.s.mu.Lock()
	defer ps.s.mu.Unlock()
	res, err := ps.s.query(r)
	if err != nil {
		return nil, err
	}
	return &qdrant.QueryResponse{Result: res}, nil
}

// QueryBatch implements qdrant.PointsServer.
func (ps pointsService) QueryBatch(_ context.Context, r *qdrant.QueryBatchPoints) (*qdrant.QueryBatchResponse, error) {
	ps.s.mu.Lock()
	defer ps.s.mu.Unlock()
	out := &qdrant.QueryBatchResponse{}
	for _, q := range r.GetQueryPoints() {
		if q.GetCollectionName() == "" {
			q.CollectionName = r.GetCollectionName()
		}
		res, err := ps.s.query(q)
		if err != nil {
			return nil, err
		}
		out.Result = append(out.Result, &qdrant.BatchResult{Result: res})
	}
	return out, nil
}

// scored is a point with its score for one query.
type scored struct {
	key   string
	p     *point
	score float64
}

func (s *Server) query(r *qdrant.QueryPoints) ([]*qdrant.ScoredPoint, error) {
	c, err := s.get(r.GetCollectionName())
	if err != nil {
		return nil, err
	}
	got, err := c.run(r.GetPrefetch(), r.GetQuery(), r.GetUsing(), r.GetFilter(), r.ScoreThreshold, r.Limit)
	if err != nil {
		return nil, err
	}
	out := make([]*qdrant.ScoredPoint, len(got))
	for i, g := range got {
		rp := g.p.retrieved(r.GetWithPayload(), r.GetWithVectors())
		out[i] = &qdrant.ScoredPoint{Id: rp.Id, Payload: rp.Payload, Vectors: rp.Vectors, Score: float32(g.score)}
	}
	return out, nil
}

// run evaluates one query (or prefetch) level.
func (c *collection) run(prefetch []*qdrant.PrefetchQuery, q *qdrant.Query, using string, f *qdrant.Filter, threshold *float32, limitp *uint64) ([]scored, error) {
	// RULE: a query or prefetch without a limit returns 10 points.
	// https://qdrant.tech/documentation/concepts/hybrid-queries/
	limit := 10
	if limitp != nil {
		limit = int(*limitp)
	}
	var candidates map[string]*point // nil: every point
	var lists [][]scored
	if len(prefetch) > 0 {
		candidates = map[string]*point{}
		for _, p := range prefetch {
			got, err := c.run(p.GetPrefetch(), p.GetQuery(), p.GetUsing(), p.GetFilter(), p.ScoreThreshold, p.Limit)
			if err != nil {
				return nil, err
			}
			lists = append(lists, got)
			for _, g := range got {
				candidates[g.key] = g.p
			}
		}
	}
	var out []scored
	var err error
	switch v := q.GetVariant().(type) {
	case *qdrant.Query_Fusion, *qdrant.Query_Rrf:
		if len(prefetch) == 0 {
			return nil, bad("Fusion queries need at least one prefetch")
		}
		out, err = c.fuse(q, lists, f)
	case *qdrant.Query_Nearest:
		out, err = c.nearest(using, v.Nearest, candidates, f, threshold)
	default:
		return nil, status.Errorf(codes.Unimplemented, "stand-in: query %T not implemented", q.GetVariant())
	}
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b scored) int {
		if c := cmp.Compare(b.score, a.score); c != 0 {
			return c
		}
		return cmp.Compare(a.key, b.key)
	})
	return out[:min(limit, len(out))], nil
}

// fuse fuses the prefetches' lists by a fusion query, keeping the points
// that pass f.
func (c *collection) fuse(q *qdrant.Query, lists [][]scored, f *qdrant.Filter) ([]scored, error) {
	if fu, ok := q.GetVariant().(*qdrant.Query_Fusion); ok && fu.Fusion != qdrant.Fusion_RRF {
		return nil, status.Errorf(codes.Unimplemented, "stand-in: fusion %v not implemented", fu.Fusion)
	}
	// RULE: reciprocal rank fusion scores each point 1/(k + rank) per
	// list it appears in, ranks counted from 0, k = 2 unless given.
	// https://qdrant.tech/documentation/concepts/hybrid-queries/#reciprocal-rank-fusion-rrf
	k := 2.0
	if rrf, ok := q.GetVariant().(*qdrant.Query_Rrf); ok && rrf.Rrf.K != nil {
		k = float64(rrf.Rrf.GetK())
	}
	sum := map[string]*scored{}
	for _, list := range lists {
		for rank, g := range list {
			if sum[g.key] == nil {
				sum[g.key] = &scored{key: g.key, p: g.p}
			}
			sum[g.key].score += 1 / (k + float64(rank))
		}
	}
	var out []scored
	for _, g := range sum {
		ok, err := c.matches(g.p, f)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, *g)
		}
	}
	return out, nil
}

// nearest scores the points (of candidates, when not nil) that pass f
// against the query vector in, keeping those at or above threshold.
func (c *collection) nearest(using string, in *qdrant.VectorInput, candidates map[string]*point, f *qdrant.Filter, threshold *float32) ([]scored, error) {
	scorer, err := c.scorer(using, in)
	if err != nil {
		return nil, err
	}
	var out []scored
	for k, p := range c.points {
		if candidates != nil && candidates[k] == nil {
			continue
		}
		ok, err := c.matches(p, f)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		score, has := scorer(p)
		if !has {
			continue
		}
		// RULE: score_threshold drops points scoring below it.
		// https://qdrant.tech/documentation/concepts/search/#search-api
		if threshold != nil && score < float64(*threshold) {
			continue
		}
		out = append(out, scored{key: k, p: p, score: score})
	}
	return out, nil
}

// scorer returns how a nearest query scores a point, and whether the point
// has the vector at all.
func (c *collection) scorer(using string, in *qdrant.VectorInput) (func(*point) (float64, bool), error) {
	switch in.GetVariant().(type) {
	case *qdrant.VectorInput_Dense:
		return c.denseScorer(using, in.GetDense().GetData())
	case *qdrant.VectorInput_Sparse:
		return c.sparseScorer(using, in.GetSparse())
	}
	return nil, status.Errorf(codes.Unimplemented, "stand-in: query vector %T not implemented", in.GetVariant())
}

// denseScorer scores a point by cosine against q.
func (c *collection) denseScorer(using string, q []float32) (func(*point) (float64, bool), error) {
	params, ok := c.dense[using]
	if !ok {
		// RULE: the query names an existing dense vector.
		return nil, bad("Not existing vector name error: %s", using)
	}
	if uint64(len(q)) != params.GetSize() {
		return nil, bad("Vector dimension error: expected dim: %d, got %d", params.GetSize(), len(q))
	}
	if params.GetDistance() != qdrant.Distance_Cosine {
		return nil, status.Errorf(codes.Unimplemented, "stand-in: distance %v not implemented", params.GetDistance())
	}
	q = unit(q)
	return func(p *point) (float64, bool) {
		v, ok := p.dense[using]
		if !ok {
			return 0, false
		}
		var dot float64
		for i := range q {
			dot += float64(q[i]) * float64(v[i])
		}
		return dot, true
	}, nil
}

// sparseScorer scores a point by the dot product of its sparse vector
// with q, weighed by IDF when the vector has that modifier.
func (c *collection) sparseScorer(using string, q *qdrant.SparseVector) (func(*point) (float64, bool), error) {
	params, ok := c.sparse[using]
	if !ok {
		return nil, bad("Not existing vector name error: %s", using)
	}
	if err := c.checkVectors(nil, map[string]*qdrant.SparseVector{using: q}); err != nil {
		return nil, err
	}
	weights := make(map[uint32]float64, len(q.GetIndices()))
	for i, idx := range q.GetIndices() {
		weights[idx] = float64(q.GetValues()[i])
	}
	if params.GetModifier() == qdrant.Modifier_Idf {
		c.idf(using, weights)
	}
	return func(p *point) (float64, bool) {
		sv, ok := p.sparse[using]
		if !ok {
			return 0, false
		}
		score, hit := 0.0, false
		for i, idx := range sv.GetIndices() {
			if w, ok := weights[idx]; ok {
				score += w * float64(sv.GetValues()[i])
				hit = true
			}
		}
		// Sparse search returns only points sharing an index.
		return score, hit
	}, nil
}

// idf weighs each index of weights by its inverse document frequency.
// RULE: with the IDF modifier Qdrant weighs each index by
// ln(1 + (N - n + 0.5)/(n + 0.5)) over the collection's points with that
// sparse vector.
// https://qdrant.tech/documentation/concepts/indexing/#idf-modifier
func (c *collection) idf(using string, weights map[uint32]float64) {
	n := map[uint32]float64{}
	total := 0.0
	for _, p := range c.points {
		sv, ok := p.sparse[using]
		if !ok {
			continue
		}
		total++
		for _, idx := range sv.GetIndices() {
			if _, asked := weights[idx]; asked {
				n[idx]++
			}
		}
	}
	for idx := range weights {
		weights[idx] *= math.Log(1 + (total-n[idx]+0.5)/(n[idx]+0.5))
	}
}

// SetPayload implements qdrant.PointsServer.
func (ps pointsService) SetPayload(_ context.Context, r *qdrant.SetPayloadPoints) (*qdrant.PointsOperationResponse, error) {
	ps.s.mu.Lock()
	defer ps.s.mu.Unlock()
	c, err := ps.s.get(r.GetCollectionName())
	if err != nil {
		return nil, err
	}
	if err := c.setPayload(r.GetPayload(), r.GetPointsSelector(), r.Key); err != nil {
		return nil, err
	}
	return done(), nil
}

// UpdateBatch implements qdrant.PointsServer, for the operations vera
// batches (set payload).
func (ps pointsService) UpdateBatch(_ context.Context, r *qdrant.UpdateBatchPoints) (*qdrant.UpdateBatchResponse, error) {
	ps.s.mu.Lock()
	defer ps.s.mu.Unlock()
	c, err := ps.s.get(r.GetCollectionName())
	if err != nil {
		return nil, err
	}
	// RULE: a batch executes its operations in order, each as its own
	// request would, with one result per operation. A failing operation
	// fails the request; there is no rollback, so the ones before it stay.
	// https://qdrant.tech/documentation/concepts/points/#batch-update
	out := &qdrant.UpdateBatchResponse{}
	for _, op := range r.GetOperations() {
		switch v := op.GetOperation().(type) {
		case *qdrant.PointsUpdateOperation_SetPayload_:
			sp := v.SetPayload
			if err := c.setPayload(sp.GetPayload(), sp.GetPointsSelector(), sp.Key); err != nil {
				return nil, err
			}
		default:
			return nil, status.Errorf(codes.Unimplemented, "stand-in: batch operation %T not implemented", op.GetOperation())
		}
		out.Result = append(out.Result, &qdrant.UpdateResult{Status: qdrant.UpdateStatus_Completed})
	}
	return out, nil
}

// setPayload sets payload keys on the selected points; the caller holds
// s.mu.
// RULE: set payload writes only the keys given, leaving the point's other
// keys and its vectors as they are. Points selected by a filter are those
// that match, possibly none; points selected by id must exist: the ones
// that do are updated, then a missing one is a not-found error.
// https://qdrant.tech/documentation/concepts/payload/#set-payload
func (c *collection) setPayload(payload map[string]*qdrant.Value, sel *qdrant.PointsSelector, path *string) error {
	if path != nil {
		return status.Errorf(codes.Unimplemented, "stand-in: set payload by key not implemented")
	}
	set := func(p *point) {
		// A new map: a response being sent may still hold the old one.
		np := maps.Clone(p.payload)
		if np == nil {
			np = map[string]*qdrant.Value{}
		}
		maps.Copy(np, payload)
		p.payload = np
	}
	if f := sel.GetFilter(); f != nil {
		for _, k := range c.sortedKeys() {
			p := c.points[k]
			ok, err := c.matches(p, f)
			if err != nil {
				return err
			}
			if ok {
				set(p)
			}
		}
		return nil
	}
	if sel.GetPoints() == nil {
		return bad("points selector missing")
	}
	var missing string
	for _, id := range sel.GetPoints().GetIds() {
		k, _, err := key(id)
		if err != nil {
			return err
		}
		if p := c.points[k]; p != nil {
			set(p)
		} else if missing == "" {
			missing = k[1:]
		}
	}
	if missing != "" {
		return status.Errorf(codes.NotFound, "Not found: No point with id %s found", missing)
	}
	return nil
}
