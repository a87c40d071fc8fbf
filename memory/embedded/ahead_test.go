package embedded

import (
	"context"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/memory"
	"github.com/vera-proxy/vera/memory/embedded/index"
	"github.com/vera-proxy/vera/memory/storetest"
	"github.com/vera-proxy/vera/text"
)

// A search started ahead and finished with the vector finds what Search
// finds with that vector, also when the namespace changes in between, and
// when the lexical side is ranked on several workers and the caller joins
// (a namespace this size scans on every core here).
func TestSearchAheadMatchesSearch(t *testing.T) {
	ctx := context.Background()
	d, err := open(ctx, t.TempDir(), options{index: index.Options{ParallelAbove: 256, CommonMin: 256, DensePiece: 256}})
	require.NoError(t, err)
	defer d.Close()
	ms := storetest.Corpus(3000, 16)
	require.NoError(t, d.Upsert(ctx, ms...))
	// Words most memories hold (in a quarter or more: common, their
	// frequencies kept by slot): ranked dense, on every core.
	df := map[string]int{}
	for _, m := range ms {
		for _, w := range slices.Compact(slices.Sorted(slices.Values(text.Terms(m.Text)))) {
			df[w]++
		}
	}
	var common []string
	for w, n := range df {
		if 4*n >= len(ms) {
			common = append(common, w)
		}
	}
	slices.Sort(common)
	require.NotEmpty(t, common)
	rng := rand.New(rand.NewPCG(7, 8))
	for i := range 90 {
		text, vec := storetest.QueryFor(rng, ms[rng.IntN(len(ms))])
		if i%3 == 1 {
			text = strings.Join([]string{common[rng.IntN(len(common))], common[rng.IntN(len(common))]}, " ")
		}
		q := memory.Query{Filter: memory.Filter{Namespace: ms[0].Namespace}, Text: text, Threshold: 0.1, Limit: 1 + rng.IntN(40),
			Around: []float64{0, 0.3}[i%2]}
		if i%5 == 0 {
			vec = nil // lexical only
		}
		finish := d.SearchAhead(ctx, q)
		if i%3 == 0 {
			// A write after the lexical side has (most likely) run: the
			// finished search must not mix two states of the index.
			time.Sleep(5 * time.Millisecond)
			m := ms[rng.IntN(len(ms))]
			m.Text = text + " " + text
			require.NoError(t, d.Upsert(ctx, m))
		}
		got, err := finish(vec)
		require.NoError(t, err)
		q.Vector = vec
		want, err := d.Search(ctx, q)
		require.NoError(t, err)
		require.Equal(t, len(want), len(got), "query %d", i)
		for j := range want {
			require.Equal(t, want[j].ID, got[j].ID, "query %d rank %d", i, j)
			require.InDelta(t, want[j].Score, got[j].Score, 1e-12)
		}
	}
	// Whether a caller found the ranking still running to join depends on
	// the machine's load; the index's TestSpreadCoversEachSlotOnce covers
	// joining.
}

// The vector side ranked while the lexical side ends is kept only while
// the index has not changed at all: a memory added, or a vector set,
// before the fusion makes it rank again.
func TestVectorAheadRanksAgainAfterAChange(t *testing.T) {
	ctx := context.Background()
	d, err := Open(ctx, t.TempDir())
	require.NoError(t, err)
	defer d.Close()
	ms := storetest.Corpus(300, 16)
	require.NoError(t, d.Upsert(ctx, ms...))
	ns := ms[0].Namespace
	rng := rand.New(rand.NewPCG(5, 6))
	for i, change := range []func(vec []float32) error{
		func(vec []float32) error { // a memory added, the closest of all
			m := storetest.Corpus(1, 16)[0]
			m.ID, m.Namespace, m.Vector = memory.NewID(), ns, slices.Clone(vec)
			return d.Upsert(ctx, m)
		},
		func(vec []float32) error { // a memory's vector set to the query's
			m := ms[rng.IntN(len(ms))]
			m.Vector = slices.Clone(vec)
			return d.SetVectors(ctx, m)
		},
	} {
		text, vec := storetest.QueryFor(rng, ms[rng.IntN(len(ms))])
		q := memory.Query{Filter: memory.Filter{Namespace: ns}, Text: text, Limit: 10}
		d.mu.RLock()
		lex := d.ns[ns].RankLexical(&q, nil)
		d.mu.RUnlock()
		ahead := d.vectorAhead(ctx, &q, vec)
		require.Positive(t, ahead.Len())
		require.NoError(t, change(vec))
		got, err := d.search(ctx, q, vec, &lex, &ahead)
		require.NoError(t, err)
		q.Vector = vec
		want, err := d.Search(ctx, q)
		require.NoError(t, err)
		require.Equal(t, idsOf(want), idsOf(got), "change %d", i)
	}
}

func idsOf(hits []memory.Hit) []string {
	out := make([]string, len(hits))
	for i, h := range hits {
		out[i] = h.ID
	}
	return out
}
