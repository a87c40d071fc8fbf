package embedded

import (
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/memory"
	"github.com/vera-proxy/vera/memory/storetest"
)

// bruteLexical scores every document passing f with BM25, without pruning:
// the reference lexical must agree with. tfs holds each slot's term
// frequencies.
func bruteLexical(ix *index, tfs []map[string]float64, f *memory.Filter, text string, limit int) []scored {
	weights := map[string]float64{}
	for _, t := range memory.Terms(text) {
		if id, ok := ix.terms[t]; ok && len(ix.post[id]) > 0 {
			weights[t]++
		}
	}
	n := float64(ix.live)
	avg := float64(ix.total) / n
	sf := compile(f)
	top := topK{k: limit}
	for s := range ix.docs {
		if !sf.ok(&ix.meta[s]) {
			continue
		}
		tf := tfs[s]
		score := 0.0
		for t, w := range weights {
			if tf[t] == 0 {
				continue
			}
			df := float64(len(ix.post[ix.terms[t]]))
			idf := math.Log(1 + (n-df+0.5)/(df+0.5))
			norm := bm25K1 * (1 - bm25B + bm25B*float64(ix.meta[s].length)/avg)
			score += w * idf * tf[t] * (bm25K1 + 1) / (tf[t] + norm)
		}
		if score > 0 {
			top.offer(scored{slot: int32(s), score: score})
		}
	}
	return top.best()
}

func TestLexicalPruningIsExact(t *testing.T) {
	ms := storetest.TextCorpus(4000)
	rng := rand.New(rand.NewPCG(5, 9))
	ix := newIndex()
	for i, m := range ms {
		if i%3 == 0 {
			m.Type = memory.Curated
		}
		ix.add(m, nil)
	}
	for i := range ms[:500] { // some removed slots
		if i%2 == 0 {
			ix.remove(ms[i].ID)
		}
	}
	tfs := make([]map[string]float64, len(ix.docs))
	for s, d := range ix.docs {
		tfs[s] = map[string]float64{}
		for _, t := range memory.Terms(d.mem.Text) {
			tfs[s][t]++
		}
	}
	for q := range 300 {
		m := ms[500+rng.IntN(len(ms)-500)]
		words := memory.Terms(m.Text)
		var text string
		for range 1 + rng.IntN(6) {
			text += words[rng.IntN(len(words))] + " "
		}
		if q%4 == 0 {
			text += text // repeated query terms weigh more
		}
		f := memory.Filter{Namespace: "bench"}
		if q%3 == 0 {
			f.Types = []memory.Type{memory.Curated}
		}
		limit := 1 + rng.IntN(60)
		got := ix.lexical(&f, text, limit)
		want := bruteLexical(ix, tfs, &f, text, limit)
		require.Len(t, got, len(want), "query %q", text)
		for i := range want {
			require.InEpsilon(t, want[i].score, got[i].score, 1e-4, "query %q rank %d", text, i)
			// Ties may come in either order; distinct scores in this one.
			if i+1 < len(want) && want[i].score-want[i+1].score > 1e-4 && (i == 0 || want[i-1].score-want[i].score > 1e-4) {
				assert.Equal(t, want[i].slot, got[i].slot, "query %q rank %d", text, i)
			}
		}
	}
	assert.Greater(t, ix.pruned.Load(), int64(50), "the pruned path must be exercised")
}

func TestLatestFromIndex(t *testing.T) {
	ms := storetest.TextCorpus(300)
	ix := newIndex()
	for _, m := range ms {
		ix.add(m, nil)
	}
	f := memory.Filter{Namespace: "bench"}
	got := ix.latest(&f, 5)
	require.Len(t, got, 5)
	for i, m := range got {
		assert.Equal(t, ms[len(ms)-1-i].ID, m.ID)
	}

	// Out of order: an older memory arrives last.
	old := ms[0]
	old.ID, old.Time = memory.NewID(), old.Time.Add(-1)
	ix.add(old, nil)
	f.Until = ms[2].Time
	got = ix.latest(&f, 10)
	ids := make([]string, len(got))
	for i, m := range got {
		ids[i] = m.ID
	}
	assert.Equal(t, []string{ms[1].ID, ms[0].ID, old.ID}, ids)
	assert.True(t, slices.IsSortedFunc(got, func(a, b memory.Memory) int { return b.Time.Compare(a.Time) }))

	// An older memory arriving after a newer one was removed is still out
	// of order.
	ix = newIndex()
	a, b, c := ms[5], ms[9], ms[7]
	ix.add(a, nil)
	ix.add(b, nil)
	ix.remove(b.ID)
	c.ID = memory.NewID()
	c.Time = a.Time.Add(-time.Minute)
	ix.add(c, nil)
	got = ix.latest(&memory.Filter{Namespace: "bench"}, 1)
	require.Len(t, got, 1)
	assert.Equal(t, a.ID, got[0].ID)
}

// A time range over a namespace in time order, with a memory removed in
// the middle: the memories on both sides of it are found.
func TestLatestRangePastARemovedSlot(t *testing.T) {
	ms := storetest.TextCorpus(5)
	ix := newIndex()
	for _, m := range ms {
		ix.add(m, nil)
	}
	ix.remove(ms[2].ID)
	f := memory.Filter{Namespace: "bench", Since: ms[1].Time, Until: ms[4].Time}
	got := ix.latest(&f, 10)
	ids := make([]string, len(got))
	for i, m := range got {
		ids[i] = m.ID
	}
	assert.Equal(t, []string{ms[3].ID, ms[1].ID}, ids)
}

// TestSearchAllocationsDoNotGrowWithTheStore: a search allocates the same
// number of times in a store six times larger (lexical, vector on sign
// bits, and both fused), and a few times per result at most. The vector
// and lexical passes score into pooled buffers and typed heaps; only the
// results are allocated (container/heap, which boxes every candidate kept,
// made it 600 to 750).
func TestSearchAllocationsDoNotGrowWithTheStore(t *testing.T) {
	const dim = 32
	ms := storetest.TextCorpus(30_000)
	rng := rand.New(rand.NewPCG(3, 3))
	vec := func() []float32 {
		v := make([]float32, dim)
		for j := range v {
			v[j] = float32(rng.NormFloat64())
		}
		return normalize(v)
	}
	small, large := newIndex(), newIndex()
	for i, m := range ms {
		v := vec()
		if i < 5_000 {
			small.add(m, v)
		}
		large.add(m, v)
	}
	require.GreaterOrEqual(t, small.nvec, exactBelow, "both stores rank on sign bits")
	q := &memory.Query{Filter: memory.Filter{Namespace: "bench"}, Threshold: 0.05, Limit: 47}
	text, _ := storetest.QueryFor(rng, memory.Memory{Text: ms[42].Text, Vector: make([]float32, dim)})
	qvec := vec()
	for _, mode := range []string{"lexical", "vector", "hybrid"} {
		t.Run(mode, func(t *testing.T) {
			mq := *q
			var qv []float32
			if mode != "vector" {
				mq.Text = text
			}
			if mode != "lexical" {
				qv = qvec
			}
			allocs := func(ix *index) float64 {
				require.NotEmpty(t, ix.search(&mq, qv), "the search finds something")
				return storetest.AllocsPer(50, func() { ix.search(&mq, qv) })
			}
			a, b := allocs(small), allocs(large)
			t.Logf("allocations per search: %.0f at 5k, %.0f at 30k", a, b)
			slack := 2.0
			if raceOn {
				slack = 12 // pooled buffers dropped at random
			}
			assert.LessOrEqual(t, b, a+slack, "allocations per search grow with the store")
			assert.LessOrEqual(t, b, float64(4*q.Limit), "allocations per search, for %d results", q.Limit)
		})
	}
}

// TestSearchAfterATurnKeepsItsBuffers: every chat adds a turn, so the next
// search runs on a store one memory larger. Its score buffer (4 bytes a
// memory) must not be made again for that: at a million memories that was
// 4 MB of fresh pages per chat, most of the chat's time.
func TestSearchAfterATurnKeepsItsBuffers(t *testing.T) {
	ms := storetest.TextCorpus(30_060)
	ix := newIndex()
	for _, m := range ms[:30_000] {
		ix.add(m, nil)
	}
	q := &memory.Query{Filter: memory.Filter{Namespace: "bench"}, Threshold: 0.05, Limit: 10}
	q.Text, _ = storetest.QueryFor(rand.New(rand.NewPCG(4, 4)), memory.Memory{Text: ms[7].Text})
	require.NotEmpty(t, ix.search(q, nil))
	var searched uint64
	for _, m := range ms[30_000:] {
		ix.add(m, nil)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		ix.search(q, nil)
		runtime.ReadMemStats(&after)
		searched += after.TotalAlloc - before.TotalAlloc
	}
	perSearch := searched / 60
	t.Logf("bytes allocated per search after a turn: %d (the score buffer: %d)", perSearch, 4*len(ix.docs))
	limit := uint64(4 * len(ix.docs) / 2)
	if raceOn {
		// sync.Pool drops pooled buffers at random under the race
		// detector, so some searches make it again anyway; made again
		// for every turn, it would still be more than this.
		limit = uint64(4 * len(ix.docs) * 9 / 10)
	}
	assert.Less(t, perSearch, limit, "the score buffer is made again after every turn")
}
