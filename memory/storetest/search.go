package storetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/memory"
)

// The contract's searches: lexical, vector, hybrid, and the latest.

// testLexicalSearchWithoutVectors checks that words alone find memories that
// have no vectors.
func testLexicalSearchWithoutVectors(ctx context.Context, t *testing.T, fresh func(*testing.T) memory.Store) {
	s := fresh(t)
	cat := mem("alice", memory.Raw, 0, "User: my cat is called Miso\nAssistant: Miso is a lovely name for a cat.")
	dog := mem("alice", memory.Raw, 1, "User: I walked the dog\nAssistant: Dogs love walks.")
	other := mem("bob", memory.Raw, 2, "User: my cat is called Tiger\nAssistant: Tiger the cat!")
	cur := mem("alice", memory.Curated, 3, "User: What pet does the user have?\nAssistant: A cat named Miso.")
	require.NoError(t, s.Upsert(ctx, cat, dog, other, cur))

	hits, err := s.Search(ctx, memory.Query{Filter: memory.Filter{Namespace: "alice"}, Text: "what is my cat called?", Limit: 10})
	require.NoError(t, err)
	require.NotEmpty(t, hits)
	assert.ElementsMatch(t, []string{cat.ID, cur.ID}, hitIDs(hits), "bob's cat and the dog must not match")
	for _, h := range hits {
		assert.Greater(t, h.Lexical, 0.0)
		assert.Greater(t, h.Score, 0.0)
		assert.Nil(t, h.Vector)
	}

	hits, err = s.Search(ctx, memory.Query{Filter: memory.Filter{Namespace: "alice", Types: []memory.Type{memory.Curated}}, Text: "cat", Limit: 10})
	require.NoError(t, err)
	assert.Equal(t, []string{cur.ID}, hitIDs(hits))

	hits, err = s.Search(ctx, memory.Query{Filter: memory.Filter{Namespace: "carol"}, Text: "cat", Limit: 10})
	require.NoError(t, err)
	assert.Empty(t, hits)

	hits, err = s.Search(ctx, memory.Query{Filter: memory.Filter{Namespace: "alice"}, Text: "the and of", Limit: 10})
	require.NoError(t, err)
	assert.Empty(t, hits, "stop words alone match nothing")
}

// testLexicalRanksRareTermsHigher checks that a rare word weighs more than a
// common one.
func testLexicalRanksRareTermsHigher(ctx context.Context, t *testing.T, fresh func(*testing.T) memory.Store) {
	s := fresh(t)
	var ms []memory.Memory
	for i := range 20 {
		ms = append(ms, mem("a", memory.Raw, i, fmt.Sprintf("User: talking about work again, day %d\nAssistant: work is work", i)))
	}
	rare := mem("a", memory.Raw, 30, "User: I adopted a greyhound at work\nAssistant: a greyhound!")
	ms = append(ms, rare)
	require.NoError(t, s.Upsert(ctx, ms...))
	hits, err := s.Search(ctx, memory.Query{Filter: memory.Filter{Namespace: "a"}, Text: "work greyhound", Limit: 3})
	require.NoError(t, err)
	require.Len(t, hits, 3)
	assert.Equal(t, rare.ID, hits[0].ID)
}

// testVectorSearchThresholdAndOrder checks that vector hits are best first
// and none under the threshold.
func testVectorSearchThresholdAndOrder(ctx context.Context, t *testing.T, fresh func(*testing.T) memory.Store) {
	s := fresh(t)
	near := mem("a", memory.Raw, 0, "User: alpha\nAssistant: one")
	near.Vector = vec(Dim, 0, 1, 0.1)
	mid := mem("a", memory.Raw, 1, "User: beta\nAssistant: two")
	mid.Vector = vec(Dim, 0, 1, 1.0) // cos ≈ 0.77 to axis 0
	far := mem("a", memory.Raw, 2, "User: gamma\nAssistant: three")
	far.Vector = vec(Dim, 5, 6, 0.1)
	none := mem("a", memory.Raw, 3, "User: delta\nAssistant: four")
	otherNS := mem("b", memory.Raw, 4, "User: alpha\nAssistant: one")
	otherNS.Vector = vec(Dim, 0, 1, 0.1)
	require.NoError(t, s.Upsert(ctx, near, mid, far, none, otherNS))

	q := memory.Query{Filter: memory.Filter{Namespace: "a"}, Vector: vec(Dim, 0, 1, 0), Threshold: 0.5, Limit: 10}
	hits, err := s.Search(ctx, q)
	require.NoError(t, err)
	assert.Equal(t, []string{near.ID, mid.ID}, hitIDs(hits))
	assert.InDelta(t, 0.995, hits[0].Cosine, 0.01)
	assert.InDelta(t, 0.707, hits[1].Cosine, 0.01)

	q.Threshold = 0.9
	hits, err = s.Search(ctx, q)
	require.NoError(t, err)
	assert.Equal(t, []string{near.ID}, hitIDs(hits))
}

// testHybridFusesBothSides checks that a hybrid search finds what either
// side finds.
func testHybridFusesBothSides(ctx context.Context, t *testing.T, fresh func(*testing.T) memory.Store) {
	s := fresh(t)
	both := mem("a", memory.Raw, 0, "User: my sister lives in Lisbon\nAssistant: Lisbon is lovely.")
	both.Vector = vec(Dim, 0, 1, 0.3)
	vecOnly := mem("a", memory.Raw, 1, "User: family abroad\nAssistant: noted.")
	vecOnly.Vector = vec(Dim, 0, 1, 0.2)
	lexOnly := mem("a", memory.Raw, 2, "User: Lisbon trams\nAssistant: yellow ones.")
	lexOnly.Vector = vec(Dim, 4, 5, 0.1)
	pending := mem("a", memory.Raw, 3, "User: flights to Lisbon\nAssistant: book early.")
	require.NoError(t, s.Upsert(ctx, both, vecOnly, lexOnly, pending))
	hits, err := s.Search(ctx, memory.Query{
		Filter: memory.Filter{Namespace: "a"}, Vector: vec(Dim, 0, 1, 0.25), Threshold: 0.5,
		Text: "where does my sister live? Lisbon?", Limit: 10,
	})
	require.NoError(t, err)
	require.Len(t, hits, 4)
	assert.Equal(t, both.ID, hits[0].ID, "found by both sides, so first")
	assert.ElementsMatch(t, []string{both.ID, vecOnly.ID, lexOnly.ID, pending.ID}, hitIDs(hits))
}

// testVectorSearchAtScale checks that vector search finds the nearest among
// many memories.
func testVectorSearchAtScale(ctx context.Context, t *testing.T, fresh func(*testing.T) memory.Store) {
	s := fresh(t)
	const n, dim = 5000, Dim
	rng := rand.New(rand.NewPCG(1, 2))
	ms := make([]memory.Memory, n)
	for i := range ms {
		ms[i] = mem("a", memory.Raw, i, fmt.Sprintf("User: note %d\nAssistant: ok", i))
		v := make([]float32, dim)
		for j := range v {
			v[j] = float32(rng.NormFloat64())
		}
		ms[i].Vector = v
	}
	for i := 0; i < n; i += 500 {
		require.NoError(t, s.Upsert(ctx, ms[i:i+500]...))
	}
	for _, k := range []int{0, 1234, 4999} {
		q := append([]float32(nil), ms[k].Vector...)
		q[0] += 0.05
		hits, err := s.Search(ctx, memory.Query{Filter: memory.Filter{Namespace: "a"}, Vector: q, Threshold: 0.5, Limit: 5})
		require.NoError(t, err)
		require.NotEmpty(t, hits)
		assert.Equal(t, ms[k].ID, hits[0].ID)
	}
}

// testLatestNewestFirst checks that Latest lists the newest memories first.
func testLatestNewestFirst(ctx context.Context, t *testing.T, fresh func(*testing.T) memory.Store) {
	s := fresh(t)
	var ms []memory.Memory
	for _, i := range []int{3, 1, 4, 0, 2} { // inserted out of order
		ms = append(ms, mem("a", memory.Raw, i, fmt.Sprintf("User: %d\nAssistant: ok", i)))
	}
	cur := mem("a", memory.Curated, 9, "User: curated\nAssistant: ok")
	require.NoError(t, s.Upsert(ctx, append(ms, cur, mem("b", memory.Raw, 8, "User: b\nAssistant: ok"))...))
	got, err := s.Latest(ctx, memory.Filter{Namespace: "a", Types: []memory.Type{memory.Raw}}, 3)
	require.NoError(t, err)
	require.Len(t, got, 3)
	assert.Equal(t, []string{"User: 4\nAssistant: ok", "User: 3\nAssistant: ok", "User: 2\nAssistant: ok"},
		[]string{got[0].Text, got[1].Text, got[2].Text})
	got, err = s.Latest(ctx, memory.Filter{Namespace: "a"}, 1)
	require.NoError(t, err)
	assert.Equal(t, []string{cur.ID}, ids(got))
}
