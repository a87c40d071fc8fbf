package index

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/memory"
	"github.com/vera-proxy/vera/memory/storetest"
)

// The lexical side kept from ahead is used while no memory it saw has
// changed or gone; a removal makes the search rank again. A memory added
// meanwhile is not in it.
func TestSearchAheadKeepsOnlyWhatStillHolds(t *testing.T) {
	ms := storetest.Corpus(200, 16)
	ix := newIndex()
	for i := range ms {
		ix.Add(int64(i+1), &ms[i], Normalize(ms[i].Vector))
	}
	q := memory.Query{Filter: memory.Filter{Namespace: ms[0].Namespace}, Text: ms[3].Text, Limit: 5}
	// A stale ranking that names slot 0 only.
	held := &Ranking{ix: ix, removals: ix.removals, top: []scored{{slot: 0, score: 1}}}
	require.Len(t, ix.Search(&q, nil, held, nil), 1, "unchanged: the ranking made ahead is used")
	added := storetest.Corpus(1, 16)[0]
	added.ID, added.Text = memory.NewID(), ms[3].Text
	ix.Add(int64(len(ms)+1), &added, Normalize(added.Vector))
	require.Len(t, ix.Search(&q, nil, held, nil), 1, "a memory added: the ranking made ahead still holds for what it saw")
	// Deleted, as the store deletes: removed, then scrubbed.
	require.True(t, ix.Remove(151))
	ix.Scrub()
	got := ix.Search(&q, nil, held, nil)
	require.Greater(t, len(got), 1, "changed: ranked again")
	require.Equal(t, int64(4), got[0].Row, "the memory of the question's text first")
}
