package index

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/memory"
)

// A common term's strongest cells mark every slot that can give it more
// than a bound, whatever was added since they were built: memories
// longer and shorter than the average (BM25's c1 moves both ways), slots
// in held cells and in cells no slot had, and enough of them to build
// the cells again. When mark declines, a slot outside the held cells can
// pass.
func TestStrongestMarkEveryPassingSlot(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	doc := func(i, words, heavy int) memory.Memory {
		ws := make([]string, words)
		for w := range ws {
			ws[w] = fmt.Sprintf("w%d", rng.IntN(40))
		}
		for range heavy {
			ws = append(ws, "w0")
		}
		return memory.Memory{ID: fmt.Sprint(i), Namespace: "s", Type: memory.Raw, Text: strings.Join(ws, " "), Time: start.Add(time.Duration(i) * time.Second)}
	}
	ix := New(Options{CommonMin: 64})
	seq := int64(0)
	add := func(words, heavy int) {
		seq++
		m := doc(int(seq), words, heavy)
		ix.Add(seq, &m, nil)
	}
	for range 3000 {
		add(5+rng.IntN(60), rng.IntN(4))
	}
	id := ix.terms["w0"]
	built := ix.strongest[id]
	require.NotNil(t, built, "w0 is common")
	marks, declines := 0, 0
	check := func(phase string) {
		st, arr, bm := ix.strongest[id], ix.common[id], ix.bm25()
		var gives []float64 // what each slot gives a term of weight 1, most first
		for s, f := range arr {
			if f != 0 {
				gives = append(gives, bm.score(1, uint32(f), ix.lens[s]))
			}
		}
		slices.SortFunc(gives, func(a, b float64) int { return cmp.Compare(b, a) })
		garbage := make([]uint64, (len(ix.meta)+63)/64+3)
		for q := range 300 {
			// Bounds that a fifth of the slots or fewer pass, bounds that
			// are exactly what a strong slot gives (the scan's rounding
			// is then all that lets it pass), and some that half of the
			// slots pass.
			scale := 0.1 + rng.Float64()*3
			var least float64
			switch q % 10 {
			case 0:
				least = scale * gives[rng.IntN(len(gives)/2)]
			case 1, 2, 3, 4:
				for {
					if s := rng.IntN(len(arr)); arr[s] != 0 && bm.score(1, uint32(arr[s]), ix.lens[s]) >= gives[len(gives)/5] {
						least = bm.score(scale, uint32(arr[s]), ix.lens[s])
						break
					}
				}
			default:
				least = scale * gives[rng.IntN(len(gives)/5)]
			}
			// In an array that held other bits, as a kept one does.
			for i := range garbage {
				garbage[i] = ^uint64(0)
			}
			marked := st.mark(len(ix.meta), scale, least, bm, garbage)
			require.Equal(t, st.mark(len(ix.meta), scale, least, bm, nil), marked, "%s: the kept array is cleared", phase)
			if marked == nil {
				// Declined: some slot the held cells do not hold passes.
				declines++
				continue
			}
			marks++
			// The scan's own test, which the marks must cover.
			need := (&denseQuery{terms: []queryTerm{{scale: scale}}, bm: bm}).needFor(least)
			for s, f := range arr {
				if f != 0 && f >= need[min(int(ix.lens[s]), len(need)-1)] {
					require.NotZero(t, marked[s>>6]&(1<<(s&63)), "%s: slot %d (tf %d, length %v) passes %v but is not marked", phase, s, f, ix.lens[s], least)
				}
			}
		}
	}
	check("built")
	for range 800 { // longer memories: the average length grows, c1 falls
		add(100+rng.IntN(200), rng.IntN(40))
	}
	assert.Same(t, built, ix.strongest[id], "not built again yet")
	assert.NotEmpty(t, built.tail, "slots added since the build are kept apart")
	check("longer")
	for range 800 { // short memories, many of w0: c1 rises
		add(1+rng.IntN(3), 1+rng.IntN(30))
	}
	check("shorter")
	for range 6000 {
		add(5+rng.IntN(60), rng.IntN(6))
	}
	assert.NotSame(t, built, ix.strongest[id], "a long tail builds the cells again")
	check("rebuilt")
	ix.commonAll() // as a load builds them: no drift, no tail
	check("loaded")
	t.Log(marks, declines)
	assert.Greater(t, marks, 600, "most bounds are marked")
	assert.Positive(t, declines, "a low bound needs cells not held")
}

// The candidates marked are those of a scan: a dense ranking led by a
// common term takes them from its strongest cells, and ranks the same.
func TestDenseMarkedRanksAsTheScan(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ix := New(Options{CommonMin: 64})
	for i := range 5000 {
		ws := make([]string, 10+rng.IntN(80))
		for w := range ws {
			ws[w] = fmt.Sprintf("w%d", rng.IntN(6))
		}
		m := memory.Memory{ID: fmt.Sprint(i), Namespace: "d", Type: memory.Raw, Text: strings.Join(ws, " "), Time: start.Add(time.Duration(i) * time.Second)}
		ix.Add(int64(i+1), &m, nil)
	}
	f := memory.Filter{Namespace: "d"}
	for q := range 50 {
		text := fmt.Sprintf("w%d w%d w%d", rng.IntN(6), rng.IntN(6), rng.IntN(6))
		terms, bm, limit := ix.queryTerms(text), ix.bm25(), 1+rng.IntN(80)
		before := ix.marked.Load()
		got := ix.denseIn(&f, terms, bm, limit, 4096, 1+q%3, nil)
		if ix.marked.Load() == before {
			continue
		}
		strongest := ix.strongest
		ix.strongest = nil
		want := ix.denseIn(&f, terms, bm, limit, 4096, 1+q%3, nil)
		ix.strongest = strongest
		require.Equal(t, want, got, "query %q limit %d", text, limit)
	}
	assert.Positive(t, ix.marked.Load(), "the strongest cells lead some rankings")
}

// A common term's champions score as scoresOf scores them, from what
// they keep: their frequencies of other terms (common or not) are read
// once and kept until a champion comes; memories added that do not
// become champions, and removals, keep them; a compaction makes the
// champions anew.
func TestChampionsKeepWhatTheyRead(t *testing.T) {
	ix, add := smallIndex(t)
	rng := rand.New(rand.NewPCG(9, 9))
	words := func(n int) string {
		ws := make([]string, n)
		for i := range ws {
			ws[i] = fmt.Sprintf("w%d", min(rng.IntN(60), rng.IntN(60)))
		}
		return strings.Join(ws, " ")
	}
	for range 3000 {
		add(words(5 + rng.IntN(40)))
	}
	lead := ix.terms["w25"]
	champs := ix.champions[lead]
	require.NotNil(t, champs)
	check := func(phase string, text string) {
		t.Helper()
		terms := ix.queryTerms(text)
		require.Equal(t, lead, terms[0].id, "%s: w25 leads %q", phase, text)
		slots, scores := ix.champions[lead].scores(ix, terms, ix.bm25())
		fresh := slices.Clone(slots)
		want := ix.scoresOf(terms, ix.bm25(), fresh)
		require.Equal(t, fresh, slots, phase)
		require.Equal(t, want, scores, "%s: %q", phase, text)
		var live []int32
		for _, h := range ix.champions[lead].h {
			live = append(live, h.slot)
		}
		slices.Sort(live)
		require.Equal(t, live, slots, "%s: the champions now", phase)
	}
	// w25 is the rarest word of each question (in about two memories of
	// five: common), so it leads.
	questions := []string{"w25 w1 w2", "w25 w3 w10", "w25 w1 w20 w7"}
	for _, q := range questions {
		check("first asked", q)
	}
	kept := champs.kept
	require.NotNil(t, kept)
	assert.Len(t, kept.tfs, 7, "every term asked, once")
	check("asked again", questions[0])
	assert.Same(t, kept, champs.kept, "nothing read again")

	// A memory that is no champion keeps them; one that is drops them.
	add("w1 w2 w3 " + strings.Repeat("w4 ", 60))
	assert.Same(t, kept, champs.kept, "a memory without w25 is no champion of it")
	for _, s := range []int32{champs.h[0].slot, champs.h[5].slot} {
		ix.Remove(ix.seqs[s])
	}
	check("after removals", questions[1])
	assert.Same(t, kept, champs.kept, "a removed champion is left to the filter")
	add("w25 w25 w25 w25 w25 w1")
	assert.Nil(t, champs.kept, "a champion came")
	for _, q := range questions {
		check("after a champion came", q)
	}
	for range 1500 {
		ix.Remove(int64(1 + rng.IntN(len(ix.seqs))))
	}
	require.NotSame(t, champs, ix.champions[lead], "compacted: champions anew")
	for _, q := range questions {
		check("after a compaction", q)
	}
}

// A middling word keeps its bits while it stays one, and gives them up
// once the namespace outgrows it (half its share), its look-ups then
// read from its postings as before.
func TestMiddlingWordsOutgrown(t *testing.T) {
	ix, add := smallIndex(t)
	for i := range 400 {
		add(fmt.Sprintf("w%d w%d", i%3, i)) // w0, w1, w2: a third each
		if i%10 == 0 {
			add("mid")
		}
	}
	mid := ix.terms["mid"]
	require.Contains(t, ix.present, mid, "in 40 of 440 memories: a middling word")
	for i := range 2000 {
		add(fmt.Sprintf("w%d x%d", i%3, i))
	}
	add("mid")
	assert.NotContains(t, ix.present, mid, "in 41 of 2,441: outgrown")
	c := ix.cursorOf(mid)
	c.start()
	found := 0
	for s := range int32(len(ix.meta)) {
		if tfIn(nil, &c, s) > 0 {
			found++
		}
	}
	assert.Equal(t, 41, found, "still found through its postings")
}

// smallIndex is an index that keeps arrays and bits from 64 slots on,
// and a function adding a raw turn of text as its next row.
func smallIndex(t *testing.T) (*Namespace, func(text string)) {
	ix, seq := New(Options{CommonMin: 64}), int64(0)
	return ix, func(text string) {
		seq++
		m := memory.Memory{ID: fmt.Sprint(seq), Namespace: "s", Type: memory.Raw, Text: text, Time: time.Unix(seq, 0)}
		ix.Add(seq, &m, nil)
	}
}
