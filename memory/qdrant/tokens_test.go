package qdrant

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/qdrant/go-client/qdrant"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/memory"
	"github.com/vera-proxy/vera/memory/qdrant/qdranttest"
)

func TestZeroTokensAndSetTokens(t *testing.T) {
	ctx := context.Background()
	s := openFresh(t, server(t))

	// Before the collection exists: nothing to do, no error.
	page, next, err := s.ZeroTokens(ctx, "", 10)
	require.NoError(t, err)
	assert.Empty(t, page)
	assert.Empty(t, next)
	require.NoError(t, s.SetTokens(ctx, map[string]int{memory.NewID(): 3}))

	_, err = s.VectorSpace(ctx, "m", 3)
	require.NoError(t, err)
	now := time.Now().UTC()
	var zero []memory.Memory
	for i := range 5 {
		zero = append(zero, memory.Memory{ID: memory.NewID(), Namespace: fmt.Sprintf("ns%d", i%2), Type: memory.Raw,
			Text: fmt.Sprintf("User: my heron number %d is called Ada\nAssistant: lovely", i), Time: now.Add(time.Duration(i) * time.Second),
			Model: "llama3.2", Metadata: map[string]any{"k": "v"}, Vector: []float32{1, float32(i), 0}})
	}
	counted := memory.Memory{ID: memory.NewID(), Namespace: "ns0", Type: memory.Curated, Text: "The heron is Ada", Time: now, Tokens: 6}
	require.NoError(t, s.Upsert(ctx, append(zero, counted)...))
	// A point written without a tokens field at all (an older vera).
	absent := memory.Memory{ID: memory.NewID(), Namespace: "ns1", Type: memory.Raw, Text: "User: absent\nAssistant: field", Time: now}
	p, err := point(absent)
	require.NoError(t, err)
	delete(p.Payload, fieldTokens)
	_, err = s.client.Upsert(ctx, &qdrant.UpsertPoints{CollectionName: s.collection, Wait: ptr(true), Points: []*qdrant.PointStruct{p}})
	require.NoError(t, err)
	want := append(zero, absent)

	before := map[string]memory.Memory{}
	for _, m := range want {
		got, err := s.Get(ctx, m.ID)
		require.NoError(t, err)
		before[m.ID] = got
	}
	search := func() []memory.Hit {
		hits, err := s.Search(ctx, memory.Query{Filter: memory.Filter{Namespace: "ns0"}, Text: "heron Ada", Vector: []float32{1, 1, 0}, Limit: 10})
		require.NoError(t, err)
		return hits
	}
	hitsBefore := search()

	// Pages of 2 over the 6 without a count, counted page by page.
	seen := map[string]bool{}
	cursor, pages := "", 0
	for {
		page, next, err := s.ZeroTokens(ctx, cursor, 2)
		require.NoError(t, err)
		pages++
		assert.LessOrEqual(t, len(page), 2)
		counts := map[string]int{}
		for _, m := range page {
			assert.False(t, seen[m.ID], "%s seen twice", m.ID)
			seen[m.ID] = true
			assert.Equal(t, before[m.ID].Text, m.Text)
			counts[m.ID] = 10 + len(seen)
		}
		require.NoError(t, s.SetTokens(ctx, counts))
		if next == "" {
			break
		}
		require.NotEqual(t, cursor, next)
		cursor = next
	}
	assert.Equal(t, 3, pages)
	assert.Len(t, seen, len(want))
	assert.False(t, seen[counted.ID])

	for _, m := range want {
		got, err := s.Get(ctx, m.ID)
		require.NoError(t, err)
		assert.GreaterOrEqual(t, got.Tokens, 11)
		exp := before[m.ID]
		exp.Tokens = got.Tokens
		assert.Equal(t, exp, got, "only the count changed, vector included")
	}
	// The sparse vector is untouched too: the same hits, scored the same.
	hitsAfter := search()
	require.Len(t, hitsAfter, len(hitsBefore))
	for i := range hitsAfter {
		assert.Equal(t, hitsBefore[i].ID, hitsAfter[i].ID)
		assert.InDelta(t, hitsBefore[i].Lexical, hitsAfter[i].Lexical, 1e-9)
		assert.InDelta(t, hitsBefore[i].Cosine, hitsAfter[i].Cosine, 1e-9)
		assert.Positive(t, hitsAfter[i].Tokens)
	}

	// Unknown and malformed ids are ignored; a known count is kept.
	require.NoError(t, s.SetTokens(ctx, map[string]int{memory.NewID(): 3, "not-an-id": 3, counted.ID: 99, zero[0].ID: 0}))
	got, err := s.Get(ctx, counted.ID)
	require.NoError(t, err)
	assert.Equal(t, 6, got.Tokens)
	page, _, err = s.ZeroTokens(ctx, "", 10)
	require.NoError(t, err)
	assert.Empty(t, page)
}

func TestBackfillTokensQdrant(t *testing.T) {
	ctx := context.Background()
	s := openFresh(t, server(t))
	_, err := s.VectorSpace(ctx, "m", 3)
	require.NoError(t, err)
	var ms []memory.Memory
	for i := range 300 { // two pages
		ms = append(ms, memory.Memory{ID: memory.NewID(), Namespace: fmt.Sprintf("ns%d", i%3), Type: memory.Raw,
			Text: fmt.Sprintf("User: fact %d\nAssistant: ok", i), Time: time.Now().UTC(), Vector: []float32{1, 2, float32(i)}})
	}
	empty := memory.Memory{ID: memory.NewID(), Namespace: "ns0", Type: memory.Raw, Time: time.Now().UTC()}
	require.NoError(t, s.Upsert(ctx, append(ms, empty)...))

	n, err := memory.BackfillTokens(ctx, s, func(s string) int { return len(s) })
	require.NoError(t, err)
	assert.Equal(t, 301, n)
	for _, m := range []memory.Memory{ms[0], ms[299]} {
		got, err := s.Get(ctx, m.ID)
		require.NoError(t, err)
		assert.Equal(t, len(m.Text), got.Tokens)
		assert.Len(t, got.Vector, 3)
	}
	got, err := s.Get(ctx, empty.ID)
	require.NoError(t, err)
	assert.Equal(t, 1, got.Tokens)
	n, err = memory.BackfillTokens(ctx, s, func(s string) int { return len(s) })
	require.NoError(t, err)
	assert.Zero(t, n)
}

// The backfills filter on fields they have indexed: a Qdrant in strict
// mode refuses a filter on an unindexed field, and the backfills must
// work there.
func TestBackfillsOnAStrictQdrant(t *testing.T) {
	if os.Getenv("VERA_TEST_QDRANT_URL") != "" {
		t.Skip("strict mode is the stand-in's")
	}
	ctx := context.Background()
	srv, err := qdranttest.Start("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(srv.Stop)
	srv.Strict()
	s := openFresh(t, srv.URL())
	_, err = s.VectorSpace(ctx, "m", 3)
	require.NoError(t, err)
	m := memory.Memory{ID: memory.NewID(), Namespace: "a", Type: memory.Raw, Text: "User: my heron is Ada\nAssistant: lovely", Time: time.Now().UTC()}
	require.NoError(t, s.Upsert(ctx, m))

	page, _, err := s.ZeroTokens(ctx, "", 10)
	require.NoError(t, err)
	require.Len(t, page, 1)
	_, _, err = s.StaleTerms(ctx, "", 10)
	require.NoError(t, err)
	n, err := memory.BackfillTokens(ctx, s, func(string) int { return 7 })
	require.NoError(t, err)
	assert.Equal(t, 1, n)

	// The stand-in refuses what strict Qdrant refuses.
	_, err = s.client.Scroll(ctx, &qdrant.ScrollPoints{CollectionName: s.collection,
		Filter: &qdrant.Filter{Must: []*qdrant.Condition{qdrant.NewMatch("model", "x")}}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "Index required")
}
