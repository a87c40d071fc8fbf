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

// In an index written in time order: the neighbour half an hour away
// lends, one more than that does not; a removed turn between two is
// passed over; of two turns at the same time the one written first is
// before; a curated memory ranked neither takes nor lends; and a turn
// that only neighbours a ranked one does not take in its other
// neighbour's score when that one ranks too low to be in the lexical
// ranking (it is no candidate), though it holds the word.
func TestAroundInTimeOrder(t *testing.T) {
	ix := newIndex()
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	at := time.Duration(0)
	seqOf := map[string]int64{}
	ids := map[int64]string{} // by row
	add := func(id string, typ memory.Type, text string, after time.Duration) {
		at += after
		seq := int64(len(ids) + 1)
		seqOf[id], ids[seq] = seq, id
		m := memory.Memory{ID: id, Namespace: "a", Type: typ, Text: text, Time: t0.Add(at)}
		ix.Add(seq, &m, nil)
	}
	filler := "User: " + strings.Repeat("words about nothing much ", 12) + "\nAssistant: ok"
	// Strong and middling matches, hours apart, fill the lexical ranking
	// of a search of limit 1 (its depth is 11).
	for i := range 4 {
		add(fmt.Sprintf("strong%d", i), memory.Raw, "User: kayak kayak kayak\nAssistant: kayak", 5*time.Hour)
	}
	for i := range 8 {
		add(fmt.Sprintf("middling%d", i), memory.Raw, "User: a kayak, "+strings.Repeat("words about nothing ", 3)+"\nAssistant: ok", 5*time.Hour)
	}
	add("weak", memory.Raw, filler+" kayak", 5*time.Hour) // ranks below all twelve
	add("between", memory.Raw, "User: hm\nAssistant: hm", 30*time.Minute)
	add("gone", memory.Raw, "User: x\nAssistant: y", time.Minute)
	add("strongest", memory.Raw, "User: kayak kayak kayak kayak\nAssistant: kayak kayak", time.Minute)
	add("same time", memory.Raw, "User: nothing\nAssistant: nothing", 0)
	add("far", memory.Raw, "User: nothing\nAssistant: nothing", 31*time.Minute)
	add("note", memory.Curated, "User: kayak kayak kayak kayak\nAssistant: kayak kayak", time.Minute)
	add("after note", memory.Raw, "User: nothing\nAssistant: nothing", time.Minute)
	// Deleted, as the store deletes: removed, then scrubbed.
	require.True(t, ix.Remove(seqOf["gone"]))
	ix.Scrub()
	require.True(t, ix.Ordered(), "written in time order")

	// The lexical side itself, by memory id: a search would cut it to
	// its limit.
	lexical := func(around float64, limit int) map[string]float64 {
		q := memory.Query{Filter: memory.Filter{Namespace: "a"}, Text: "kayak", Limit: limit, Around: around}
		out := map[string]float64{}
		for _, h := range ix.lexicalSide(&q, nil) {
			out[ids[ix.seqs[h.slot]]] = h.score
		}
		return out
	}
	own := lexical(0, 100)
	require.Contains(t, own, "weak")
	require.NotContains(t, lexical(0, 1), "weak", "the weak match is past the lexical ranking of limit 1")
	got := lexical(1, 1)
	// "between" neighbours "weak" (30 minutes before) and "strongest"
	// (past the removed turn); only "strongest" is a candidate.
	require.Contains(t, got, "between")
	require.Positive(t, own["weak"])
	assert.Equal(t, 0+own["strongest"], got["between"])
	// "strongest" lends to "between", and takes in nothing ("between"
	// does not hold the word). "same time", written after it at the same
	// time, is not a turn after it (as the builder's context of a hit).
	assert.Equal(t, own["strongest"], got["strongest"])
	assert.NotContains(t, got, "same time")
	assert.NotContains(t, got, "far", "31 minutes after its neighbour")
	assert.Equal(t, own["note"], got["note"], "a curated memory takes in nothing")
	assert.NotContains(t, got, "after note", "nor lends")
}

// The share re-ranks as a plain walk of the time order says, on random
// stores: times in and out of order, every type, removed turns, filters,
// turns without a neighbour within the window. A candidate (a ranked
// turn or a neighbour of one) takes in its neighbours among the
// candidates.
func TestAroundAsTheTimeOrderSays(t *testing.T) {
	for store := range 4 {
		rng := rand.New(rand.NewPCG(uint64(store), 5))
		ix := newIndex()
		n := 300 + rng.IntN(500)
		tfs := make([]map[string]float64, n)
		at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		for i := range n {
			ws := make([]string, 2+rng.IntN(20))
			for w := range ws {
				ws[w] = fmt.Sprintf("w%d", rng.IntN(30))
			}
			at = at.Add(time.Duration(rng.IntN(40)) * time.Minute)
			ts := at
			if store%2 == 1 && rng.IntN(5) == 0 {
				ts = at.Add(-time.Duration(rng.IntN(300)) * time.Minute) // out of order
			}
			typ := memory.Raw
			if rng.IntN(6) == 0 {
				typ = memory.Curated
			}
			m := memory.Memory{ID: fmt.Sprint(i), Namespace: "a", Type: typ, Text: strings.Join(ws, " "), Time: ts}
			tfs[i] = termCounts(m.Text)
			ix.Add(int64(i+1), &m, nil)
		}
		for range n / 20 {
			ix.Remove(int64(1 + rng.IntN(n)))
		}
		// The time order, walked plainly: slots by time, equal times by slot.
		order := make([]int32, len(ix.meta))
		for s := range order {
			order[s] = int32(s)
		}
		slices.SortStableFunc(order, func(a, b int32) int { return cmp.Compare(ix.meta[a].ts, ix.meta[b].ts) })
		pos := make([]int, len(order))
		for i, s := range order {
			pos[s] = i
		}
		raw := typeBit(memory.Raw)
		for q := range 60 {
			f := memory.Filter{Namespace: "a"}
			if q%3 == 0 {
				f.Types = []memory.Type{memory.Raw}
			}
			sf := compile(&f)
			text := fmt.Sprintf("w%d w%d", rng.IntN(30), rng.IntN(30))
			share, limit := 0.1+rng.Float64(), 1+rng.IntN(40)
			top := ix.rankTerms(&f, ix.queryTerms(text), limit, nil)
			score := map[int32]float64{}
			for _, h := range bruteLexical(ix, tfs, &f, text, len(ix.meta)) {
				score[h.slot] = h.score
			}
			neighbours := func(s int32) []int32 {
				var out []int32
				if ix.meta[s].typ != raw {
					return nil
				}
				// The newest raw turn in [t-window, t), the oldest in
				// [t+1µs, t+window).
				ts, win := ix.meta[s].ts, int64(memory.ExchangeWindow)
				for i := pos[s] - 1; i >= 0 && ix.meta[order[i]].ts >= ts-win; i-- {
					if x := order[i]; ix.meta[x].typ == raw && ix.meta[x].ts < ts {
						if sf.ok(&ix.meta[x]) {
							out = append(out, x)
						}
						break
					}
				}
				for i := pos[s] + 1; i < len(order) && ix.meta[order[i]].ts < ts+win; i++ {
					if x := order[i]; ix.meta[x].typ == raw && ix.meta[x].ts >= ts+int64(time.Microsecond) {
						if sf.ok(&ix.meta[x]) {
							out = append(out, x)
						}
						break
					}
				}
				return out
			}
			cand := map[int32]bool{}
			for _, h := range top {
				cand[h.slot] = true
				for _, x := range neighbours(h.slot) {
					cand[x] = true
				}
			}
			var want []scored
			for s := range cand {
				v := score[s]
				for _, x := range neighbours(s) {
					if cand[x] {
						v += share * score[x]
					}
				}
				if v > 0 {
					want = append(want, scored{slot: s, score: v})
				}
			}
			slices.SortFunc(want, bestFirst)
			want = want[:min(len(want), limit)]
			got := ix.around(&memory.Query{Filter: f, Text: text, Around: share}, ix.queryTerms(text), top, limit)
			require.Len(t, got, len(want), "store %d query %q", store, text)
			for i := range want {
				require.InDelta(t, want[i].score, got[i].score, 1e-9, "store %d query %q rank %d", store, text, i)
				require.Equal(t, want[i].slot, got[i].slot, "store %d query %q rank %d", store, text, i)
			}
		}
		assert.Equal(t, store%2 == 1, ix.unordered, "store %d", store)
	}
}
