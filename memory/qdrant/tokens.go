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
	"github.com/vera-proxy/vera/text"
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
	return s.textsWhereNot(ctx, "zero tokens", countKnown(), cursor, limit)
}

// textsWhereNot pages, in point id order over every namespace, through
// the points that do not match cond, with their ids, namespaces, types and
// texts; the cursor is the first id of the next page (Qdrant's
// next_page_offset).
func (s *Store) textsWhereNot(ctx context.Context, what string, cond *qdrant.Condition, cursor string, limit int) ([]memory.Memory, string, error) {
	ok, err := s.exists(ctx)
	if err != nil || !ok {
		return nil, "", err
	}
	if limit <= 0 {
		limit = 100
	}
	req := &qdrant.ScrollPoints{CollectionName: s.collection, Limit: ptr(uint32(limit)),
		Filter:      &qdrant.Filter{MustNot: []*qdrant.Condition{cond}},
		WithPayload: qdrant.NewWithPayloadInclude(fieldNamespace, fieldType, fieldText)}
	if cursor != "" {
		id := pointID(cursor)
		if id == nil {
			return nil, "", fmt.Errorf("qdrant %s: %s: bad cursor %q", s.addr, what, cursor)
		}
		req.Offset = id
	}
	cctx, cancel := withTimeout(ctx)
	defer cancel()
	got, next, err := s.client.ScrollAndOffset(cctx, req)
	if err != nil {
		return nil, "", s.wrap(what, err)
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

// setWhereNot sets payload on each point pid, by a filter (the id, and not
// cond) rather than by id: a point deleted meanwhile is skipped instead of
// failing the batch, and one that came to match cond meanwhile is left as
// it is. The operations go in batches.
func (s *Store) setWhereNot(ctx context.Context, what string, cond *qdrant.Condition, pids []*qdrant.PointId, payload func(i int) map[string]any) error {
	ops := make([]*qdrant.PointsUpdateOperation, len(pids))
	for i, pid := range pids {
		ops[i] = qdrant.NewPointsUpdateSetPayload(&qdrant.PointsUpdateOperation_SetPayload{
			Payload: qdrant.NewValueMap(payload(i)),
			PointsSelector: qdrant.NewPointsSelectorFilter(&qdrant.Filter{
				Must: []*qdrant.Condition{qdrant.NewHasID(pid)}, MustNot: []*qdrant.Condition{cond},
			}),
		})
	}
	for chunk := range slices.Chunk(ops, batchSize) {
		cctx, cancel := withTimeout(ctx)
		_, err := s.client.UpdateBatch(cctx, &qdrant.UpdateBatchPoints{CollectionName: s.collection, Wait: ptr(true), Operations: chunk})
		cancel()
		if err != nil {
			return s.wrap(what, err)
		}
	}
	return nil
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
	var pids []*qdrant.PointId
	var ns []int
	for _, id := range slices.Sorted(maps.Keys(counts)) {
		n, pid := counts[id], pointID(id)
		if n <= 0 || pid == nil {
			continue // no count to set, or an id no point can have
		}
		pids, ns = append(pids, pid), append(ns, n)
	}
	return s.setWhereNot(ctx, "set tokens", countKnown(), pids, func(i int) map[string]any { return map[string]any{fieldTokens: ns[i]} })
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
// vector was built by another version of text.Terms (or before versions
// were recorded), their ids and texts, in point id order.
func (s *Store) StaleTerms(ctx context.Context, cursor string, limit int) ([]memory.Memory, string, error) {
	return s.textsWhereNot(ctx, "stale terms", currentTerms(), cursor, limit)
}

// currentTerms matches the points whose sparse vector this version of
// text.Terms built.
func currentTerms() *qdrant.Condition {
	v := float64(text.TermsVersion)
	return qdrant.NewRange(fieldTermsV, &qdrant.Range{Gte: &v, Lte: &v})
}

// Reindex implements memory.TermsIndexer: each point's sparse vector is
// built again from its text, and its terms_v set, and nothing else is
// written: a memory hidden, superseded or deleted meanwhile stays so (a
// deleted one is skipped).
func (s *Store) Reindex(ctx context.Context, ms ...memory.Memory) error {
	var pids []*qdrant.PointId
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
		pids = append(pids, pid)
	}
	return s.setWhereNot(ctx, "reindex", currentTerms(), pids, func(int) map[string]any { return map[string]any{fieldTermsV: text.TermsVersion} })
}
