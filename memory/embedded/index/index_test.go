package index

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/memory"
	"github.com/vera-proxy/vera/memory/storetest"
	"github.com/vera-proxy/vera/text"
)

// newIndex is an index of the default options.
func newIndex() *Namespace { return New(Options{}) }

// addAll indexes ms as rows 1..len(ms) of the file.
func addAll(ix *Namespace, ms []memory.Memory) {
	for i := range ms {
		ix.Add(int64(i+1), &ms[i], nil)
	}
}

// idsAt names the memories of slots, ms being the index's rows.
func idsAt(ix *Namespace, ms []memory.Memory, slots []int32) []string {
	out := make([]string, len(slots))
	for i, s := range slots {
		out[i] = ms[ix.seqs[s]-1].ID
	}
	return out
}

// termCounts counts the terms of text.
func termCounts(content string) map[string]float64 {
	tf := map[string]float64{}
	for _, t := range text.Terms(content) {
		tf[t]++
	}
	return tf
}

// bruteLexical scores every document passing f with BM25, without pruning:
// the reference lexical must agree with. tfs holds each row's term counts.
func bruteLexical(ix *Namespace, tfs []map[string]float64, f *memory.Filter, text string, limit int) []scored {
	terms := ix.queryTerms(text)
	avg := float64(ix.total) / float64(ix.live)
	c0, c1 := bm25K1*(1-bm25B), bm25K1*bm25B/avg
	sf := compile(f)
	top := topK{k: limit}
	words := make([]string, len(terms))
	for w, id := range ix.terms {
		for i, qt := range terms {
			if qt.id == id {
				words[i] = w
			}
		}
	}
	for s := range ix.meta {
		if !sf.ok(&ix.meta[s]) {
			continue
		}
		tf := tfs[ix.seqs[s]-1]
		score, found := 0.0, false
		for i, qt := range terms {
			if n := tf[words[i]]; n > 0 {
				found = true
				score += qt.scale * n / (n + c0 + c1*float64(ix.lens[s]))
			}
		}
		if found {
			top.offer(scored{slot: int32(s), score: score})
		}
	}
	return top.best()
}

// Block-max WAND ranks as scoring every document does, on random stores:
// vocabularies small and large (common terms span many blocks), removed
// and replaced memories, filters, repeated terms, every limit. Scores
// agree to a float tolerance, and the results are the same slots in the
// same order (ties: the lower slot first, in both).
func TestLexicalPruningIsExact(t *testing.T) {
	var pruned, unread, floors int64
	for store := range 6 {
		// Odd stores keep arrays of their common terms' frequencies.
		commonMin := 1 << 30
		if store%2 == 1 {
			commonMin = 64
		}
		rng := rand.New(rand.NewPCG(uint64(store), 9))
		vocab := []int{30, 300, 3000}[store%3]
		n := 500 + rng.IntN(4000)
		zipf := rand.NewZipf(rand.New(rand.NewPCG(uint64(store), 1)), 1.1, 1, uint64(vocab-1))
		ms := make([]memory.Memory, n)
		start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		for i := range ms {
			words := make([]string, 3+rng.IntN(60))
			for w := range words {
				words[w] = fmt.Sprintf("w%d", zipf.Uint64())
			}
			ms[i] = memory.Memory{ID: fmt.Sprint(i), Namespace: "r", Type: memory.Raw, Text: strings.Join(words, " "), Time: start.Add(time.Duration(i) * time.Second)}
			if rng.IntN(3) == 0 {
				ms[i].Type = memory.Curated
			}
		}
		ix := New(Options{CommonMin: commonMin})
		addAll(ix, ms)
		tfs := make([]map[string]float64, n)
		for i, m := range ms {
			tfs[i] = termCounts(m.Text)
		}
		for range n / 10 { // removed, and replaced with new text
			seq := int64(1 + rng.IntN(n))
			if rng.IntN(2) == 0 {
				ix.Remove(seq)
				continue
			}
			m := ms[seq-1]
			m.Text = fmt.Sprintf("w%d w%d w1 w0", rng.IntN(vocab), rng.IntN(vocab))
			if rng.IntN(8) == 0 {
				// A frequency past what a byte holds.
				m.Text += strings.Repeat(" w1", 300)
			}
			tfs[seq-1] = termCounts(m.Text)
			ix.Add(seq, &m, nil)
		}
		for q := range 200 {
			var words []string
			for range 1 + rng.IntN(6) {
				words = append(words, fmt.Sprintf("w%d", zipf.Uint64()))
			}
			text := strings.Join(words, " ")
			if q%4 == 0 {
				text += " " + text // repeated query terms weigh more
			}
			f := memory.Filter{Namespace: "r"}
			if q%3 == 0 {
				f.Types = []memory.Type{memory.Curated}
			}
			limit := 1 + rng.IntN(60)
			want := bruteLexical(ix, tfs, &f, text, limit)
			terms := ix.queryTerms(text)
			bm := bm25{c0: bm25K1 * (1 - bm25B), c1: bm25K1 * bm25B / (float64(ix.total) / float64(ix.live))}
			// Both rankings, whichever lexical would choose.
			for path, got := range map[string][]scored{"lexical": ix.lexical(&f, text, limit, nil),
				"maxscore": ix.maxScore(&f, terms, bm, limit), "dense": ix.dense(&f, terms, bm, limit, nil),
				"dense on 3 workers": ix.denseIn(&f, terms, bm, limit, 1+rng.IntN(3000), 3, nil)} {
				require.Len(t, got, len(want), "%s: store %d query %q", path, store, text)
				for i := range want {
					require.InDelta(t, want[i].score, got[i].score, 1e-9, "%s: store %d query %q rank %d", path, store, text, i)
					require.Equal(t, want[i].slot, got[i].slot, "%s: store %d query %q rank %d", path, store, text, i)
				}
			}
		}
		pruned += ix.pruned.Load()
		unread += ix.unread.Load()
		floors += ix.floors.Load()
		if store%2 == 1 {
			assert.NotEmpty(t, ix.common, "store %d: common terms keep their arrays", store)
		}
	}
	assert.Greater(t, pruned, int64(100), "blocks must be skipped")
	assert.Greater(t, floors, int64(50), "dense rankings must start from their champions' floor")
	assert.Greater(t, unread, int64(100), "candidates must be dismissed on their frequencies alone")
}

// Postings survive every block boundary: a cursor's walk and its seeks
// find exactly the slots added.
func TestPostingsCursor(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, blockSize - 1, blockSize, blockSize + 1, 5*blockSize + 3} {
		var p postings
		var slots []int32
		s := int32(-1)
		for range n {
			s += 1 + int32(rng.IntN(1000))
			slots = append(slots, s)
			p.add(s, uint32(1+rng.IntN(3)), 10)
		}
		var walked []int32
		p.each(func(slot int32, _ uint32) { walked = append(walked, slot) })
		assert.Equal(t, slots, walked, "n=%d", n)
		for range 50 {
			target := int32(rng.IntN(int(s) + 2))
			c := cursor{p: &p}
			c.start()
			c.seek(target)
			i, _ := slices.BinarySearch(slots, target)
			if i == len(slots) {
				assert.Equal(t, int32(endSlot), c.slot)
			} else {
				assert.Equal(t, slots[i], c.slot, "n=%d seek %d", n, target)
			}
		}
	}
}

func TestLatestFromIndex(t *testing.T) {
	ms := storetest.TextCorpus(300)
	ix := newIndex()
	addAll(ix, ms)
	f := memory.Filter{Namespace: "bench"}
	got := idsAt(ix, ms, ix.inTimeOrder(&f, 5, false))
	require.Len(t, got, 5)
	for i, id := range got {
		assert.Equal(t, ms[len(ms)-1-i].ID, id)
	}

	// Out of order: an older memory arrives last.
	old := ms[0]
	old.ID, old.Time = memory.NewID(), old.Time.Add(-1)
	ms = append(ms, old)
	ix.Add(int64(len(ms)), &old, nil)
	f.Until = ms[2].Time
	assert.Equal(t, []string{ms[1].ID, ms[0].ID, old.ID}, idsAt(ix, ms, ix.inTimeOrder(&f, 10, false)))
	f = memory.Filter{Namespace: "bench", Since: old.Time, Until: ms[1].Time}
	assert.Equal(t, []string{ms[0].ID, old.ID}, idsAt(ix, ms, ix.inTimeOrder(&f, 10, false)), "a range in time order")

	// An older memory arriving after a newer one was removed is still out
	// of order.
	ix = newIndex()
	a, b, c := ms[5], ms[9], ms[7]
	c.ID = memory.NewID()
	c.Time = a.Time.Add(-time.Minute)
	rows := []memory.Memory{a, b, c}
	ix.Add(1, &a, nil)
	ix.Add(2, &b, nil)
	ix.Remove(2)
	ix.Add(3, &c, nil)
	assert.Equal(t, []string{a.ID}, idsAt(ix, rows, ix.inTimeOrder(&memory.Filter{Namespace: "bench"}, 1, false)))
}

// A time range over a namespace in time order, with a memory removed in
// the middle: the memories on both sides of it are found.
func TestLatestRangePastARemovedSlot(t *testing.T) {
	ms := storetest.TextCorpus(5)
	ix := newIndex()
	addAll(ix, ms)
	ix.Remove(3)
	f := memory.Filter{Namespace: "bench", Since: ms[1].Time, Until: ms[4].Time}
	assert.Equal(t, []string{ms[3].ID, ms[1].ID}, idsAt(ix, ms, ix.inTimeOrder(&f, 10, false)))
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
		return Normalize(v)
	}
	small, large := newIndex(), newIndex()
	for i := range ms {
		v := vec()
		if i < 5_000 {
			small.Add(int64(i+1), &ms[i], v)
		}
		large.Add(int64(i+1), &ms[i], v)
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
			allocs := func(ix *Namespace) float64 {
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

// Latest of types other than raw reads their own lists: the same memories,
// in the same order (newest first, the later written first on equal
// times), as a walk over every slot, also out of time order, with
// removals and a compaction.
func TestLatestOfOtherTypes(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	types := []memory.Type{memory.Raw, memory.Raw, memory.Raw, memory.Curated, memory.Rule, memory.Profile, memory.Forgotten}
	ix := newIndex()
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var ms []memory.Memory
	for i := range 3000 {
		m := memory.Memory{ID: fmt.Sprint(i), Namespace: "k", Type: types[rng.IntN(len(types))], Text: "w1 w2",
			Time: start.Add(time.Duration(rng.IntN(500)) * time.Minute)}
		ms = append(ms, m)
		ix.Add(int64(i+1), &ms[i], nil)
		if rng.IntN(5) == 0 {
			ix.Remove(int64(1 + rng.IntN(i+1)))
		}
	}
	walk := func(f *memory.Filter, limit int) []int32 {
		sf := compile(f)
		var slots []int32
		for s := range ix.meta {
			if sf.ok(&ix.meta[s]) {
				slots = append(slots, int32(s))
			}
		}
		slices.SortFunc(slots, func(a, b int32) int {
			if ix.meta[a].ts != ix.meta[b].ts {
				return int(ix.meta[b].ts - ix.meta[a].ts)
			}
			return int(b - a)
		})
		return slots[:min(len(slots), limit)]
	}
	for q := range 200 {
		f := memory.Filter{Namespace: "k", Types: []memory.Type{types[3+q%4]}}
		if q%3 == 0 {
			f.Types = append(f.Types, memory.Rule)
		}
		if q%2 == 0 {
			f.Since, f.Until = start.Add(time.Duration(rng.IntN(250))*time.Minute), start.Add(time.Duration(250+rng.IntN(250))*time.Minute)
		}
		limit := 1 + rng.IntN(50)
		require.Equal(t, walk(&f, limit), ix.inTimeOrder(&f, limit, false), "query %d", q)
		if q%5 == 0 {
			f.Types = []memory.Type{memory.Raw}
			require.Equal(t, walk(&f, limit), ix.inTimeOrder(&f, limit, false), "raw query %d", q)
		}
		// Earliest: the same, oldest first.
		all := walk(&f, len(ix.meta))
		slices.Reverse(all)
		require.Equal(t, all[:min(len(all), limit)], ix.inTimeOrder(&f, limit, true), "earliest, query %d", q)
	}
}

// The arrays of common terms say what the postings say, slot by slot,
// through tfIn (a frequency past a byte included): as memories are added,
// once a term becomes common, after removals and a compaction, and after
// a snapshot is read back.
func TestCommonArraysMatchPostings(t *testing.T) {
	ix := New(Options{CommonMin: 32})
	rng := rand.New(rand.NewPCG(3, 4))
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	seq := int64(0)
	add := func(n int) {
		for range n {
			seq++
			text := fmt.Sprintf("alpha w%d w%d", rng.IntN(50), rng.IntN(5))
			if rng.IntN(10) == 0 {
				text += strings.Repeat(" alpha", 300+rng.IntN(10))
			}
			m := memory.Memory{ID: fmt.Sprint(seq), Namespace: "c", Type: memory.Raw, Text: text, Time: start.Add(time.Duration(seq) * time.Second)}
			ix.Add(seq, &m, nil)
		}
	}
	check := func(ix *Namespace, when string) {
		require.NotEmpty(t, ix.common, when)
		for id, arr := range ix.common {
			want := map[int32]uint32{}
			ix.post[id].each(func(s int32, tf uint32) { want[s] = tf })
			c := cursor{p: &ix.post[id]}
			c.start()
			for s := range int32(len(ix.meta)) {
				require.Equal(t, want[s], tfIn(arr, &c, s), "%s: term %d slot %d", when, id, s)
			}
		}
		alpha := ix.terms["alpha"]
		assert.Contains(t, ix.common, alpha, when)
		// A term in a sixteenth of the slots without an array (one
		// that was common keeps it) has its bits, and they say where
		// its postings are.
		mids := 0
		for id := range ix.post {
			id := int32(id)
			_, ok := ix.present[id]
			if _, common := ix.common[id]; ix.isMid(id) && !common {
				require.True(t, ok, "%s: term %d has bits", when, id)
			}
			if !ok {
				continue
			}
			mids++
			require.NotContains(t, ix.common, id, when)
			in := map[int32]bool{}
			ix.post[id].each(func(s int32, _ uint32) { in[s] = true })
			c := ix.cursorOf(id)
			for s := range int32(len(ix.meta)) {
				require.Equal(t, !in[s], c.lacks(s), "%s: term %d slot %d", when, id, s)
			}
		}
		assert.Positive(t, mids, when)
	}
	add(20) // too few slots: no arrays yet
	assert.Empty(t, ix.common)
	add(2000)
	check(ix, "once common")
	slots := len(ix.meta)
	for range 1500 {
		ix.Remove(int64(1 + rng.IntN(int(seq))))
	}
	require.Less(t, len(ix.meta), slots, "compacted")
	add(100)
	check(ix, "after removals and a compaction")
	check(throughSnapshot(t, ix), "read from a snapshot")
}

// The vector scan's byte per slot says what meta says through every
// change (memories added with a vector and without, a vector set later,
// removals, a compaction, a snapshot, the vectors dropped), and the scan
// finds a memory by its own vector exactly while it is live with one,
// and only for a filter of its type and time.
func TestVectorScanFollowsMeta(t *testing.T) {
	ix := newIndex()
	rng := rand.New(rand.NewPCG(5, 6))
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	newVec := func() []float32 {
		v := make([]float32, 64)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		return Normalize(v)
	}
	const n = 12000
	vecs := map[int64][]float32{} // by seq: the vector last given
	// check compares the bytes with meta, and (but once the vectors are
	// dropped) searches by vector through the sign bits' scan.
	check := func(ix *Namespace, when string) {
		t.Helper()
		require.Len(t, ix.scan, len(ix.meta), when)
		for s := range ix.meta {
			require.Equal(t, scanByte(&ix.meta[s]), ix.scan[s], "%s: slot %d", when, s)
		}
		if when == "vectors dropped" {
			return
		}
		require.GreaterOrEqual(t, ix.nvec, exactBelow, "%s: the scan, not the exact pass", when)
		for seq := int64(1); seq <= n; seq += 37 {
			v, ok := vecs[seq]
			if !ok {
				continue
			}
			got := ix.vector(&memory.Filter{Namespace: "c"}, v, 0.99, 1)
			s, live := ix.bySeq[seq]
			if live && ix.meta[s].vec {
				require.Len(t, got, 1, "%s: seq %d", when, seq)
				assert.Equal(t, s, got[0].slot, "%s: seq %d", when, seq)
				// Not for a filter of another type, nor of a time after it.
				other := memory.Raw
				if ix.meta[s].typ == typeBit(memory.Raw) {
					other = memory.Curated
				}
				assert.Empty(t, ix.vector(&memory.Filter{Namespace: "c", Types: []memory.Type{other}}, v, 0.99, 1), "%s: seq %d", when, seq)
				later := time.Unix(0, ix.meta[s].ts).Add(time.Second)
				assert.Empty(t, ix.vector(&memory.Filter{Namespace: "c", Since: later}, v, 0.99, 1), "%s: seq %d", when, seq)
			} else {
				assert.Empty(t, got, "%s: seq %d, removed or without a vector", when, seq)
			}
		}
	}
	for seq := int64(1); seq <= n; seq++ {
		m := memory.Memory{ID: fmt.Sprint(seq), Namespace: "c", Type: memory.Raw, Text: fmt.Sprintf("w%d", seq), Time: start.Add(time.Duration(seq) * time.Second)}
		if seq%5 == 0 {
			m.Type = memory.Curated
		}
		var v []float32
		if rng.IntN(10) < 6 {
			v = newVec()
			vecs[seq] = v
		}
		ix.Add(seq, &m, v)
	}
	check(ix, "added")
	for seq := int64(1); seq <= n; seq += 3 {
		if _, ok := vecs[seq]; !ok {
			vecs[seq] = newVec()
			ix.SetVector(seq, vecs[seq])
		}
	}
	check(ix, "vectors set later")
	for range 700 {
		ix.Remove(int64(1 + rng.IntN(n)))
	}
	require.Len(t, ix.meta, n, "not compacted yet")
	check(ix, "removed")
	for seq := int64(1); len(ix.meta) == n && seq <= n; seq += 2 {
		ix.Remove(seq)
	}
	require.Less(t, len(ix.meta), n, "compacted")
	check(ix, "compacted")
	check(throughSnapshot(t, ix), "read from a snapshot")
	ix.DropVectors()
	check(ix, "vectors dropped")
	// A vector again for three memories of four; the fourth, whose
	// vector went, is found no more.
	for seq := int64(1); seq <= n; seq++ {
		if seq%4 != 0 {
			vecs[seq] = newVec()
			ix.SetVector(seq, vecs[seq])
		}
	}
	check(ix, "set again")
}
