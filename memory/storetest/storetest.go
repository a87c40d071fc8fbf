// Package storetest is the contract every memory.Store backend must meet,
// written once and run by each backend's tests.
package storetest

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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

	t.Run("UpsertGetRoundTrip", func(t *testing.T) {
		s := fresh(t)
		m := mem("alice", memory.Raw, 0, "User: my cat is called Miso\nAssistant: Nice name!")
		m.Metadata = map[string]any{"source": "test", "n": float64(3), "source_ids": []any{"a", "b"}}
		m.Vector = vec(Dim, 1, 2, 0.5)
		m.Tokens = 17
		require.NoError(t, s.Upsert(ctx, m))
		got, err := s.Get(ctx, m.ID)
		require.NoError(t, err)
		assert.Equal(t, m.ID, got.ID)
		assert.Equal(t, "alice", got.Namespace)
		assert.Equal(t, memory.Raw, got.Type)
		assert.Equal(t, m.Text, got.Text)
		assert.True(t, m.Time.Equal(got.Time), "time %v != %v", got.Time, m.Time)
		assert.Equal(t, time.UTC, got.Time.Location())
		assert.Equal(t, "llama3.1:8b", got.Model)
		assert.Equal(t, m.Metadata, got.Metadata)
		assert.Equal(t, 17, got.Tokens)
		// The same direction: a store may keep vectors normalised (Qdrant
		// does, for cosine).
		require.Len(t, got.Vector, Dim)
		assert.InDelta(t, 1, cosine(got.Vector, m.Vector), 1e-5)
	})

	t.Run("UpsertReplacesByID", func(t *testing.T) {
		s := fresh(t)
		m := mem("alice", memory.Raw, 0, "User: first\nAssistant: one")
		require.NoError(t, s.Upsert(ctx, m))
		m.Text = "User: second\nAssistant: two"
		m.Type = memory.Curated
		require.NoError(t, s.Upsert(ctx, m))
		require.NoError(t, s.Upsert(ctx, m)) // a retried write
		n, err := s.Count(ctx, memory.Filter{Namespace: "alice"})
		require.NoError(t, err)
		assert.Equal(t, 1, n)
		got, err := s.Get(ctx, m.ID)
		require.NoError(t, err)
		assert.Equal(t, "User: second\nAssistant: two", got.Text)
		assert.Equal(t, memory.Curated, got.Type)
		hits, err := s.Search(ctx, memory.Query{Filter: memory.Filter{Namespace: "alice"}, Text: "first", Limit: 5})
		require.NoError(t, err)
		assert.Empty(t, hits, "the replaced text must no longer be found")
		hits, err = s.Search(ctx, memory.Query{Filter: memory.Filter{Namespace: "alice"}, Text: "second", Limit: 5})
		require.NoError(t, err)
		assert.Equal(t, []string{m.ID}, hitIDs(hits))
	})

	t.Run("SetVectorsOnlyOnUnchangedText", func(t *testing.T) {
		s := fresh(t)
		a := mem("a", memory.Raw, 0, "User: one\nAssistant: ok")
		b := mem("a", memory.Raw, 1, "User: two\nAssistant: ok")
		a.Metadata = map[string]any{"keep": "me"}
		require.NoError(t, s.Upsert(ctx, a, b))
		stale := b
		stale.Text = "User: before an edit\nAssistant: ok"
		a.Vector, stale.Vector = vec(Dim, 0, 1, 0), vec(Dim, 2, 3, 0)
		gone := mem("a", memory.Raw, 2, "User: gone\nAssistant: ok")
		gone.Vector = vec(Dim, 0, 1, 0)
		require.NoError(t, s.SetVectors(ctx, a, stale, gone))
		got, err := s.Get(ctx, a.ID)
		require.NoError(t, err)
		assert.Len(t, got.Vector, Dim)
		assert.Equal(t, a.Metadata, got.Metadata)
		got, err = s.Get(ctx, b.ID)
		require.NoError(t, err)
		assert.Nil(t, got.Vector, "text changed since the vector was made")
		_, err = s.Get(ctx, gone.ID)
		assert.ErrorIs(t, err, memory.ErrNotFound)
		hits, err := s.Search(ctx, memory.Query{Filter: memory.Filter{Namespace: "a"}, Vector: vec(Dim, 0, 1, 0), Threshold: 0.5, Limit: 5})
		require.NoError(t, err)
		assert.Equal(t, []string{a.ID}, hitIDs(hits))
	})

	t.Run("InvalidMemoriesRefused", func(t *testing.T) {
		s := fresh(t)
		for name, m := range map[string]memory.Memory{
			"no id":        {Namespace: "a", Type: memory.Raw, Text: "x", Time: t0},
			"no namespace": {ID: memory.NewID(), Type: memory.Raw, Text: "x", Time: t0},
			"bad type":     {ID: memory.NewID(), Namespace: "a", Type: "note", Text: "x", Time: t0},
			"no time":      {ID: memory.NewID(), Namespace: "a", Type: memory.Raw, Text: "x"},
		} {
			assert.Error(t, s.Upsert(ctx, m), name)
		}
	})

	t.Run("GetUnknown", func(t *testing.T) {
		s := fresh(t)
		_, err := s.Get(ctx, memory.NewID())
		assert.ErrorIs(t, err, memory.ErrNotFound)
	})

	t.Run("LexicalSearchWithoutVectors", func(t *testing.T) {
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
	})

	t.Run("LexicalRanksRareTermsHigher", func(t *testing.T) {
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
	})

	t.Run("VectorSearchThresholdAndOrder", func(t *testing.T) {
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
	})

	t.Run("HybridFusesBothSides", func(t *testing.T) {
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
	})

	t.Run("VectorSearchAtScale", func(t *testing.T) {
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
	})

	t.Run("LatestNewestFirst", func(t *testing.T) {
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
	})

	t.Run("ScrollPagesEverythingOnce", func(t *testing.T) {
		s := fresh(t)
		var want []string
		for i := range 23 {
			m := mem("a", memory.Raw, i, fmt.Sprintf("User: %d\nAssistant: ok", i))
			want = append(want, m.ID)
			require.NoError(t, s.Upsert(ctx, m))
		}
		require.NoError(t, s.Upsert(ctx, mem("b", memory.Raw, 0, "User: b\nAssistant: ok")))
		var got []string
		cursor := ""
		pages := 0
		for {
			page, next, err := s.Scroll(ctx, memory.Filter{Namespace: "a"}, cursor, 5)
			require.NoError(t, err)
			assert.LessOrEqual(t, len(page), 5)
			got = append(got, ids(page)...)
			pages++
			require.Less(t, pages, 10, "scroll does not end")
			if next == "" {
				break
			}
			cursor = next
		}
		assert.ElementsMatch(t, want, got)
		assert.Len(t, got, 23)
	})

	runList(t, fresh)

	t.Run("ScrollFilters", func(t *testing.T) {
		s := fresh(t)
		var ms []memory.Memory
		for i := range 10 {
			m := mem("a", memory.Raw, i*60, fmt.Sprintf("User: hour %d\nAssistant: ok", i)) // one per hour
			if i%2 == 0 {
				m.Vector = vec(Dim, 0, 1, 0)
			}
			ms = append(ms, m)
		}
		require.NoError(t, s.Upsert(ctx, ms...))
		f := memory.Filter{Namespace: "a", Types: []memory.Type{memory.Raw}, Since: t0.Add(2 * time.Hour), Until: t0.Add(5 * time.Hour)}
		page, _, err := s.Scroll(ctx, f, "", 100)
		require.NoError(t, err)
		assert.ElementsMatch(t, ids(ms[2:5]), ids(page), "since is inclusive, until exclusive")
		n, err := s.Count(ctx, f)
		require.NoError(t, err)
		assert.Equal(t, 3, n)

		page, _, err = s.Scroll(ctx, memory.Filter{Namespace: "a", NoVector: true}, "", 100)
		require.NoError(t, err)
		assert.ElementsMatch(t, []string{ms[1].ID, ms[3].ID, ms[5].ID, ms[7].ID, ms[9].ID}, ids(page))
	})

	t.Run("Namespaces", func(t *testing.T) {
		s := fresh(t)
		got, err := s.Namespaces(ctx)
		require.NoError(t, err)
		assert.Empty(t, got)
		require.NoError(t, s.Upsert(ctx, mem("b", memory.Raw, 0, "x"), mem("a", memory.Raw, 0, "y"), mem("b", memory.Curated, 1, "z")))
		got, err = s.Namespaces(ctx)
		require.NoError(t, err)
		assert.ElementsMatch(t, []string{"a", "b"}, got)
	})

	t.Run("Delete", func(t *testing.T) {
		s := fresh(t)
		a := mem("a", memory.Raw, 0, "User: the blue door\nAssistant: ok")
		a.Vector = vec(Dim, 0, 1, 0)
		b := mem("a", memory.Raw, 1, "User: the red door\nAssistant: ok")
		require.NoError(t, s.Upsert(ctx, a, b))
		require.NoError(t, s.Delete(ctx, a.ID, memory.NewID()))
		_, err := s.Get(ctx, a.ID)
		assert.ErrorIs(t, err, memory.ErrNotFound)
		hits, err := s.Search(ctx, memory.Query{Filter: memory.Filter{Namespace: "a"}, Text: "door", Vector: vec(Dim, 0, 1, 0), Threshold: 0.5, Limit: 10})
		require.NoError(t, err)
		assert.Equal(t, []string{b.ID}, hitIDs(hits))
		n, err := s.Count(ctx, memory.Filter{Namespace: "a"})
		require.NoError(t, err)
		assert.Equal(t, 1, n)
		require.NoError(t, s.Delete(ctx))
	})

	// A hidden memory (type forgotten) is kept and listed by its type,
	// never found by the searches chats make; restored, it is found again.
	t.Run("HideAndRestore", func(t *testing.T) {
		s := fresh(t)
		a := mem("a", memory.Curated, 0, "Alice's locker code is 4417")
		a.Vector = vec(Dim, 0, 1, 0)
		require.NoError(t, s.Upsert(ctx, a))
		a.Hide(t0.Add(time.Hour))
		require.NoError(t, s.Upsert(ctx, a))
		chats := memory.Query{Filter: memory.Filter{Namespace: "a", Types: []memory.Type{memory.Raw, memory.Curated}}, Text: "locker code", Vector: vec(Dim, 0, 1, 0), Threshold: 0.5, Limit: 10}
		hits, err := s.Search(ctx, chats)
		require.NoError(t, err)
		assert.Empty(t, hits)
		latest, err := s.Latest(ctx, memory.Filter{Namespace: "a", Types: []memory.Type{memory.Raw}}, 10)
		require.NoError(t, err)
		assert.Empty(t, latest)
		page, _, err := s.Scroll(ctx, memory.Filter{Namespace: "a", Types: []memory.Type{memory.Forgotten}}, "", 10)
		require.NoError(t, err)
		require.Len(t, page, 1)
		assert.Equal(t, "curated", page[0].Metadata["forgotten_from"])

		got := page[0]
		require.True(t, got.Restore())
		require.NoError(t, s.Upsert(ctx, got))
		hits, err = s.Search(ctx, chats)
		require.NoError(t, err)
		assert.Equal(t, []string{a.ID}, hitIDs(hits))
		back, err := s.Get(ctx, a.ID)
		require.NoError(t, err)
		assert.Equal(t, memory.Curated, back.Type)
		assert.Empty(t, back.Metadata)
	})

	// A regenerated or edited turn replaces the one it redoes,
	// whether that one is in the store already or still queued with it.
	t.Run("WriterReplacesTurns", func(t *testing.T) {
		s := fresh(t)
		q := &sliceQueue{}
		w := memory.NewWriter(s, q, nil, nil, nil)
		w.Start()
		t.Cleanup(w.Close)
		first := memory.NewID()
		require.NoError(t, w.Record(ctx, memory.Turn{ID: first, Namespace: "a", User: "what is the door's colour?", Assistant: "Blue."}))
		require.Eventually(t, func() bool { _, err := s.Get(ctx, first); return err == nil }, 10*time.Second, 10*time.Millisecond)
		again := memory.NewID()
		require.NoError(t, w.Record(ctx, memory.Turn{ID: again, Replaces: first, Namespace: "a", User: "what is the door's colour?", Assistant: "Red."}))
		require.Eventually(t, func() bool { _, err := s.Get(ctx, again); return err == nil }, 10*time.Second, 10*time.Millisecond)
		_, err := s.Get(ctx, first)
		assert.ErrorIs(t, err, memory.ErrNotFound, "the regenerated turn replaced the one stored")
		w.Close()

		// Both still queued (left by a run that stopped before its store
		// took them): only the replacement arrives.
		s = fresh(t)
		old := mem("a", memory.Raw, 0, "User: where is the cat?\nAssistant: Upstairs.")
		edited := mem("a", memory.Raw, 1, "User: where is the dog?\nAssistant: Outside.")
		edited.Metadata = map[string]any{memory.MetaReplaces: old.ID}
		q = &sliceQueue{}
		require.NoError(t, q.Enqueue(ctx, old, edited))
		w = memory.NewWriter(s, q, nil, nil, nil)
		w.Start()
		t.Cleanup(w.Close)
		require.Eventually(t, func() bool { n, _ := q.Len(ctx); return n == 0 }, 10*time.Second, 10*time.Millisecond)
		n, err := s.Count(ctx, memory.Filter{Namespace: "a"})
		require.NoError(t, err)
		assert.Equal(t, 1, n, "the edited turn replaced the one queued before it")
		_, err = s.Get(ctx, edited.ID)
		assert.NoError(t, err)
	})

	// A memory deleted by hand while its turn is still queued never
	// arrives (the admin API tells the writer to forget it).
	t.Run("WriterForgets", func(t *testing.T) {
		s := fresh(t)
		one := mem("a", memory.Raw, 0, "User: my pin is 1234\nAssistant: noted")
		two := mem("a", memory.Raw, 1, "User: my cat is Miso\nAssistant: noted")
		other := mem("b", memory.Raw, 2, "User: b's secret\nAssistant: noted")
		q := &sliceQueue{}
		require.NoError(t, q.Enqueue(ctx, one, two, other))
		w := memory.NewWriter(s, q, nil, nil, nil)
		w.Forget(one.ID)
		w.ForgetNamespace("b")
		w.Start()
		t.Cleanup(w.Close)
		require.Eventually(t, func() bool { n, _ := q.Len(ctx); return n == 0 }, 10*time.Second, 10*time.Millisecond)
		_, err := s.Get(ctx, one.ID)
		assert.ErrorIs(t, err, memory.ErrNotFound)
		_, err = s.Get(ctx, other.ID)
		assert.ErrorIs(t, err, memory.ErrNotFound)
		_, err = s.Get(ctx, two.ID)
		assert.NoError(t, err)
	})

	t.Run("ConcurrentWritesAndSearches", func(t *testing.T) {
		s := fresh(t)
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Go(func() {
				for i := range 25 {
					m := mem("a", memory.Raw, w*100+i, fmt.Sprintf("User: writer %d item %d\nAssistant: stored", w, i))
					assert.NoError(t, s.Upsert(ctx, m))
					_, err := s.Search(ctx, memory.Query{Filter: memory.Filter{Namespace: "a"}, Text: "writer item", Limit: 5})
					assert.NoError(t, err)
				}
			})
		}
		wg.Wait()
		n, err := s.Count(ctx, memory.Filter{Namespace: "a"})
		require.NoError(t, err)
		assert.Equal(t, 100, n)
	})

	t.Run("Plans", func(t *testing.T) {
		ps, ok := fresh(t).(memory.PlanStore)
		require.True(t, ok, "the store keeps conversations' plans")
		now := time.Now().UTC().Truncate(time.Millisecond)
		a := memory.Plan{ID: "conv-a", Namespace: "a", Keys: []string{memory.PlanKey("k1"), memory.PlanKey("k2")},
			Memories: []string{"m1", "m2"}, Rev: 1, Used: now, Body: []byte(`{"plan":"a"}`)}
		b := memory.Plan{ID: "conv-b", Namespace: "b", Keys: []string{memory.PlanKey("k3")}, Memories: []string{"m2", "m3"}, Rev: 1, Used: now, Body: []byte(`{"plan":"b"}`)}
		require.NoError(t, ps.SavePlan(ctx, a))
		require.NoError(t, ps.SavePlan(ctx, b))
		got, err := ps.LoadPlan(ctx, memory.PlanKey("k2"))
		require.NoError(t, err)
		assert.Equal(t, a.ID, got.ID)
		assert.Equal(t, a.Namespace, got.Namespace)
		assert.Equal(t, a.Body, got.Body)
		assert.Equal(t, uint64(1), got.Rev)
		assert.True(t, now.Equal(got.Used), "%v %v", now, got.Used)
		_, err = ps.LoadPlan(ctx, memory.PlanKey("nope"))
		assert.ErrorIs(t, err, memory.ErrNotFound)

		// A save replaces by id; its keys move with it.
		a.Rev, a.Body, a.Keys = 2, []byte(`{"plan":"a2"}`), []string{memory.PlanKey("k1"), memory.PlanKey("k4")}
		a.Used = now.Add(time.Second)
		require.NoError(t, ps.SavePlan(ctx, a))
		got, err = ps.LoadPlan(ctx, memory.PlanKey("k4"))
		require.NoError(t, err)
		assert.Equal(t, uint64(2), got.Rev)
		assert.Equal(t, `{"plan":"a2"}`, string(got.Body))

		// A key saved with another plan moves to it, and the plan it left
		// no longer answers to it, even once the new one is dropped.
		c := memory.Plan{ID: "conv-c", Namespace: "a", Keys: []string{memory.PlanKey("k4")}, Memories: []string{"m7"}, Rev: 1, Used: now.Add(2 * time.Second), Body: []byte(`{"plan":"c"}`)}
		require.NoError(t, ps.SavePlan(ctx, c))
		got, err = ps.LoadPlan(ctx, memory.PlanKey("k4"))
		require.NoError(t, err)
		assert.Equal(t, "conv-c", got.ID)
		_, err = ps.DropPlans(ctx, "", "m7")
		require.NoError(t, err)
		_, err = ps.LoadPlan(ctx, memory.PlanKey("k4"))
		assert.ErrorIs(t, err, memory.ErrNotFound, "the older plan let go of the key")
		got, err = ps.LoadPlan(ctx, memory.PlanKey("k1"))
		require.NoError(t, err)
		assert.Equal(t, "conv-a", got.ID, "and keeps its others")

		// A plan unused for PlanTTL is not found.
		old := memory.Plan{ID: "conv-old", Namespace: "a", Keys: []string{memory.PlanKey("k9")}, Rev: 1, Used: now.Add(-memory.PlanTTL - time.Hour), Body: []byte(`{}`)}
		require.NoError(t, ps.SavePlan(ctx, old))
		_, err = ps.LoadPlan(ctx, memory.PlanKey("k9"))
		assert.ErrorIs(t, err, memory.ErrNotFound)

		// Deleting a memory drops every plan that carries it.
		n, err := ps.DropPlans(ctx, "", "m2")
		require.NoError(t, err)
		assert.Equal(t, 2, n)
		for _, k := range []string{"k1", "k3"} {
			_, err = ps.LoadPlan(ctx, memory.PlanKey(k))
			assert.ErrorIs(t, err, memory.ErrNotFound, k)
		}

		// A namespace forgotten drops its plans only.
		require.NoError(t, ps.SavePlan(ctx, a))
		require.NoError(t, ps.SavePlan(ctx, b))
		n, err = ps.DropPlans(ctx, "a")
		require.NoError(t, err)
		assert.Equal(t, 2, n, "conv-a and the expired conv-old: conv-c went with its memory")
		_, err = ps.LoadPlan(ctx, memory.PlanKey("k1"))
		assert.ErrorIs(t, err, memory.ErrNotFound)
		_, err = ps.LoadPlan(ctx, memory.PlanKey("k3"))
		assert.NoError(t, err)
	})
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
