package qdrant

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/google/uuid"
	"github.com/qdrant/go-client/qdrant"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/vera-proxy/vera/memory"
)

var _ memory.TokenCounter = (*Store)(nil)

// countKnown matches the points whose token count is known; as a
// must_not it selects those whose count is unknown: tokens 0, or no tokens
// field at all (a range never matches a missing field).
func countKnown() *qdrant.Condition {
	return qdrant.NewRange(fieldTokens, &qdrant.Range{Gte: ptr(1.0)})
}

// ZeroTokens implements memory.TokenCounter: pages in point id order over
// every namespace, the cursor being the first id of the next page
// (Qdrant's next_page_offset).
func (s *Store) ZeroTokens(ctx context.Context, cursor string, limit int) ([]memory.Memory, string, error) {
	ok, err := s.exists(ctx)
	if err != nil || !ok {
		return nil, "", err
	}
	if limit <= 0 {
		limit = 100
	}
	req := &qdrant.ScrollPoints{CollectionName: s.collection, Limit: ptr(uint32(limit)),
		Filter:      &qdrant.Filter{MustNot: []*qdrant.Condition{countKnown()}},
		WithPayload: qdrant.NewWithPayloadInclude(fieldNamespace, fieldType, fieldText)}
	if cursor != "" {
		id := pointID(cursor)
		if id == nil {
			return nil, "", fmt.Errorf("qdrant %s: zero tokens: bad cursor %q", s.addr, cursor)
		}
		req.Offset = id
	}
	cctx, cancel := withTimeout(ctx)
	defer cancel()
	got, next, err := s.client.ScrollAndOffset(cctx, req)
	if err != nil {
		return nil, "", s.wrap("zero tokens", err)
	}
	out := make([]memory.Memory, 0, len(got))
	for _, p := range got {
		pl := p.GetPayload()
		out = append(out, memory.Memory{ID: idString(p.GetId()), Namespace: pl[fieldNamespace].GetStringValue(),
			Type: memory.Type(pl[fieldType].GetStringValue()), Text: pl[fieldText].GetStringValue()})
	}
	nextID := ""
	if next != nil {
		nextID = idString(next)
	}
	return out, nextID, nil
}

// SetTokens implements memory.TokenCounter with set-payload operations,
// batched: only the tokens field of each point is written, never its
// vectors or the rest of its payload. Each operation selects its point by
// a filter (the id, and a count still unknown) rather than by id, so a
// point deleted meanwhile is skipped instead of failing the batch, and a
// count written meanwhile is kept.
func (s *Store) SetTokens(ctx context.Context, counts map[string]int) error {
	ok, err := s.exists(ctx)
	if err != nil || !ok {
		return err
	}
	var ops []*qdrant.PointsUpdateOperation
	for _, id := range slices.Sorted(maps.Keys(counts)) {
		n, pid := counts[id], pointID(id)
		if n <= 0 || pid == nil {
			continue // no count to set, or an id no point can have
		}
		ops = append(ops, qdrant.NewPointsUpdateSetPayload(&qdrant.PointsUpdateOperation_SetPayload{
			Payload: qdrant.NewValueMap(map[string]any{fieldTokens: n}),
			PointsSelector: qdrant.NewPointsSelectorFilter(&qdrant.Filter{
				Must: []*qdrant.Condition{qdrant.NewHasID(pid)}, MustNot: []*qdrant.Condition{countKnown()},
			}),
		}))
	}
	for chunk := range slices.Chunk(ops, batchSize) {
		cctx, cancel := withTimeout(ctx)
		_, err := s.client.UpdateBatch(cctx, &qdrant.UpdateBatchPoints{CollectionName: s.collection, Wait: ptr(true), Operations: chunk})
		cancel()
		if err != nil {
			return s.wrap("set tokens", err)
		}
	}
	return nil
}

// pointID is the point id of a memory id: a UUID, or (for points not
// made by vera) an unsigned integer; nil for anything else.
func pointID(id string) *qdrant.PointId {
	if n, err := strconv.ParseUint(id, 10, 64); err == nil {
		return qdrant.NewIDNum(n)
	}
	if _, err := uuid.Parse(id); err != nil {
		return nil
	}
	return qdrant.NewID(id)
}

// idString is the memory id of a point id (as memoryOf reads it).
func idString(id *qdrant.PointId) string {
	if u := id.GetUuid(); u != "" {
		return u
	}
	return strconv.FormatUint(id.GetNum(), 10)
}

var _ memory.TermsIndexer = (*Store)(nil)

// StaleTerms implements memory.TermsIndexer: the points whose sparse
// vector was built by another version of memory.Terms (or before versions
// were recorded), their ids and texts, in point id order.
func (s *Store) StaleTerms(ctx context.Context, cursor string, limit int) ([]memory.Memory, string, error) {
	ok, err := s.exists(ctx)
	if err != nil || !ok {
		return nil, "", err
	}
	if limit <= 0 {
		limit = 100
	}
	v := float64(memory.TermsVersion)
	req := &qdrant.ScrollPoints{CollectionName: s.collection, Limit: ptr(uint32(limit)),
		Filter:      &qdrant.Filter{MustNot: []*qdrant.Condition{qdrant.NewRange(fieldTermsV, &qdrant.Range{Gte: &v, Lte: &v})}},
		WithPayload: qdrant.NewWithPayloadInclude(fieldNamespace, fieldType, fieldText, fieldTimestamp)}
	if cursor != "" {
		id := pointID(cursor)
		if id == nil {
			return nil, "", fmt.Errorf("qdrant %s: stale terms: bad cursor %q", s.addr, cursor)
		}
		req.Offset = id
	}
	cctx, cancel := withTimeout(ctx)
	defer cancel()
	got, next, err := s.client.ScrollAndOffset(cctx, req)
	if err != nil {
		return nil, "", s.wrap("stale terms", err)
	}
	out := make([]memory.Memory, 0, len(got))
	for _, p := range got {
		pl := p.GetPayload()
		out = append(out, memory.Memory{ID: idString(p.GetId()), Namespace: pl[fieldNamespace].GetStringValue(),
			Type: memory.Type(pl[fieldType].GetStringValue()), Text: pl[fieldText].GetStringValue()})
	}
	nextID := ""
	if next != nil {
		nextID = idString(next)
	}
	return out, nextID, nil
}

// Reindex implements memory.TermsIndexer: each point's sparse vector is
// built again from its text, and its terms_v set, and nothing else is
// written: a memory hidden, superseded or deleted meanwhile stays so (a
// deleted one is skipped).
func (s *Store) Reindex(ctx context.Context, ms ...memory.Memory) error {
	var ops []*qdrant.PointsUpdateOperation
	for _, m := range ms {
		pid := pointID(m.ID)
		if pid == nil {
			continue
		}
		if idx, vals := SparseDoc(m.Text); len(idx) > 0 {
			cctx, cancel := withTimeout(ctx)
			_, err := s.client.UpdateVectors(cctx, &qdrant.UpdatePointVectors{CollectionName: s.collection, Wait: ptr(true),
				Points: []*qdrant.PointVectors{{Id: pid, Vectors: qdrant.NewVectorsMap(map[string]*qdrant.Vector{sparseVector: qdrant.NewVectorSparse(idx, vals)})}}})
			cancel()
			if status.Code(err) == codes.NotFound {
				continue // deleted since it was read
			}
			if err != nil {
				return s.wrap("reindex", err)
			}
		}
		v := float64(memory.TermsVersion)
		ops = append(ops, qdrant.NewPointsUpdateSetPayload(&qdrant.PointsUpdateOperation_SetPayload{
			Payload: qdrant.NewValueMap(map[string]any{fieldTermsV: memory.TermsVersion}),
			PointsSelector: qdrant.NewPointsSelectorFilter(&qdrant.Filter{
				Must: []*qdrant.Condition{qdrant.NewHasID(pid)}, MustNot: []*qdrant.Condition{qdrant.NewRange(fieldTermsV, &qdrant.Range{Gte: &v, Lte: &v})},
			}),
		}))
	}
	for chunk := range slices.Chunk(ops, batchSize) {
		cctx, cancel := withTimeout(ctx)
		_, err := s.client.UpdateBatch(cctx, &qdrant.UpdateBatchPoints{CollectionName: s.collection, Wait: ptr(true), Operations: chunk})
		cancel()
		if err != nil {
			return s.wrap("reindex", err)
		}
	}
	return nil
}
