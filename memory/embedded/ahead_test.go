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
	"github.com/vera-proxy/vera/memory/storetest"
)

// A search started ahead and finished with the vector finds what Search
// finds with that vector, also when the namespace changes in between, and
// when the lexical side is ranked on several workers and the caller joins
// (a namespace this size scans on every core here).
func TestSearchAheadMatchesSearch(t *testing.T) {
	defer func(p, c int) { parallelAbove, commonMin = p, c }(parallelAbove, commonMin)
	parallelAbove, commonMin = 256, 256
	ctx := context.Background()
	d, err := Open(ctx, t.TempDir())
	require.NoError(t, err)
	defer d.Close()
	ms := storetest.Corpus(3000, 16)
	require.NoError(t, d.Upsert(ctx, ms...))
	d.mu.RLock()
	var common []string // words most memories hold: ranked dense, on every core
	for w, id := range d.ns[ms[0].Namespace].terms {
		if d.ns[ms[0].Namespace].common[id] != nil {
			common = append(common, w)
		}
	}
	d.mu.RUnlock()
	slices.Sort(common)
	require.NotEmpty(t, common)
	rng := rand.New(rand.NewPCG(7, 8))
	for i := range 90 {
		text, vec := storetest.QueryFor(rng, ms[rng.IntN(len(ms))])
		if i%3 == 1 {
			text = strings.Join([]string{common[rng.IntN(len(common))], common[rng.IntN(len(common))]}, " ")
		}
		q := memory.Query{Filter: memory.Filter{Namespace: ms[0].Namespace}, Text: text, Threshold: 0.1, Limit: 1 + rng.IntN(40)}
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
}

// The lexical side kept from ahead is used while no memory it saw has
// changed or gone; a removal makes the search rank again. A memory added
// meanwhile is not in it.
func TestSearchAheadKeepsOnlyWhatStillHolds(t *testing.T) {
	ctx := context.Background()
	d, err := Open(ctx, t.TempDir())
	require.NoError(t, err)
	defer d.Close()
	ms := storetest.Corpus(200, 16)
	require.NoError(t, d.Upsert(ctx, ms...))
	ns := ms[0].Namespace
	q := memory.Query{Filter: memory.Filter{Namespace: ns}, Text: ms[3].Text, Limit: 5}
	d.mu.RLock()
	ix := d.ns[ns]
	removals := ix.removals
	d.mu.RUnlock()
	// A stale ranking that names slot 0 only.
	stale := []scored{{slot: 0, score: 1}}
	held := &rankedAhead{ix: ix, removals: removals, top: stale}
	got, err := d.search(ctx, q, nil, held, nil)
	require.NoError(t, err)
	require.Len(t, got, 1, "unchanged: the ranking made ahead is used")
	added := storetest.Corpus(1, 16)[0]
	added.ID, added.Text = memory.NewID(), ms[3].Text
	require.NoError(t, d.Upsert(ctx, added))
	got, err = d.search(ctx, q, nil, held, nil)
	require.NoError(t, err)
	require.Len(t, got, 1, "a memory added: the ranking made ahead still holds for what it saw")
	require.NoError(t, d.Delete(ctx, ms[150].ID))
	got, err = d.search(ctx, q, nil, held, nil)
	require.NoError(t, err)
	require.Greater(t, len(got), 1, "changed: ranked again")
	require.Equal(t, ms[3].ID, got[0].ID)
}
