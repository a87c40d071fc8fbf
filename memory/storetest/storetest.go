// Package storetest is the contract every memory.Store backend must meet,
// written once and run by each backend's tests.
package storetest

import (
	"context"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/vera-proxy/vera/memory"
)

// Open returns a fresh, empty store for one test; the suite closes it.
// Vectors in the suite have Dim dimensions (a store that must be told the
// size up front, as Qdrant must, is told that).
type Open func(t *testing.T) memory.Store

// Dim is the size of every vector the suite writes.
const Dim = 16

var t0 = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

func mem(ns string, typ memory.Type, i int, text string) memory.Memory {
	return memory.Memory{
		ID: memory.NewID(), Namespace: ns, Type: typ, Text: text,
		Time: t0.Add(time.Duration(i) * time.Minute), Model: "llama3.1:8b",
	}
}

// vec returns a unit vector pointing mostly along axis a, a bit along b.
func vec(dim, a, b int, w float32) []float32 {
	v := make([]float32, dim)
	v[a] = 1
	v[b] += w
	return v
}

func ids(ms []memory.Memory) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.ID
	}
	return out
}

func hitIDs(hs []memory.Hit) []string {
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = h.ID
	}
	return out
}

// Run runs the whole contract against stores made by open.
func Run(t *testing.T, open Open) {
	ctx := context.Background()
	fresh := func(t *testing.T) memory.Store {
		s := open(t)
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	for _, c := range contract() {
		t.Run(c.name, func(t *testing.T) { c.run(ctx, t, fresh) })
	}
}

// storeCase is one case of the contract: fresh gives it an empty store.
type storeCase struct {
	name string
	run  func(ctx context.Context, t *testing.T, fresh func(*testing.T) memory.Store)
}

// contract is every case, in the order Run runs them.
func contract() []storeCase {
	return []storeCase{
		{"UpsertGetRoundTrip", testUpsertGetRoundTrip},
		{"UpsertReplacesByID", testUpsertReplacesByID},
		{"SetVectorsOnlyOnUnchangedText", testSetVectorsOnlyOnUnchangedText},
		{"InvalidMemoriesRefused", testInvalidMemoriesRefused},
		{"GetUnknown", testGetUnknown},
		{"LexicalSearchWithoutVectors", testLexicalSearchWithoutVectors},
		{"LexicalRanksRareTermsHigher", testLexicalRanksRareTermsHigher},
		{"VectorSearchThresholdAndOrder", testVectorSearchThresholdAndOrder},
		{"HybridFusesBothSides", testHybridFusesBothSides},
		{"VectorSearchAtScale", testVectorSearchAtScale},
		{"LatestNewestFirst", testLatestNewestFirst},
		{"ScrollPagesEverythingOnce", testScrollPagesEverythingOnce},
		{"ListNewestFirstAndBack", testListNewestFirstAndBack},
		{"ListTiesByID", testListTiesByID},
		{"ListWhileWriting", testListWhileWriting},
		{"ListFilters", testListFilters},
		{"ListBadCursor", testListBadCursor},
		{"ScrollFilters", testScrollFilters},
		{"Namespaces", testNamespaces},
		{"Delete", testDelete},
		{"HideAndRestore", testHideAndRestore},
		{"WriterReplacesTurns", testWriterReplacesTurns},
		{"WriterForgets", testWriterForgets},
		{"ConcurrentWritesAndSearches", testConcurrentWritesAndSearches},
		{"Plans", testPlans},
	}
}
func cosine(a, b []float32) float64 {
	var ab, aa, bb float64
	for i := range a {
		ab += float64(a[i]) * float64(b[i])
		aa += float64(a[i]) * float64(a[i])
		bb += float64(b[i]) * float64(b[i])
	}
	return ab / math.Sqrt(aa*bb)
}

// sliceQueue is a memory.Queue in memory, for the writer's tests.
type sliceQueue struct {
	mu sync.Mutex
	ms []memory.Memory
}

func (q *sliceQueue) Enqueue(_ context.Context, ms ...memory.Memory) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.ms = append(q.ms, ms...)
	return nil
}

func (q *sliceQueue) Pending(_ context.Context, limit int) ([]memory.Memory, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]memory.Memory(nil), q.ms[:min(limit, len(q.ms))]...), nil
}

func (q *sliceQueue) Done(_ context.Context, ids ...string) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	gone := map[string]bool{}
	for _, id := range ids {
		gone[id] = true
	}
	q.ms = slices.DeleteFunc(q.ms, func(m memory.Memory) bool { return gone[m.ID] })
	return nil
}

func (q *sliceQueue) Len(context.Context) (int, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.ms), nil
}
