package qdrant

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/memory"
)

// More memories of one microsecond than one read of a ts gives (an
// import of a thousand lines stamped alike): a page still comes by id,
// and paging through them lists each once.
func TestListALargeTie(t *testing.T) {
	ctx := context.Background()
	s := openFresh(t, server(t))
	_, err := s.VectorSpace(ctx, "m", 4)
	require.NoError(t, err)
	at := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	var ms []memory.Memory
	for range listPage + 100 {
		ms = append(ms, memory.Memory{ID: memory.NewID(), Namespace: "a", Type: memory.Curated, Text: "alike", Time: at})
	}
	before := memory.Memory{ID: memory.NewID(), Namespace: "a", Type: memory.Curated, Text: "before", Time: at.Add(-time.Second)}
	after := memory.Memory{ID: memory.NewID(), Namespace: "a", Type: memory.Curated, Text: "after", Time: at.Add(time.Second)}
	require.NoError(t, s.Upsert(ctx, append(ms, before, after)...))

	tie := ids(ms)
	slices.SortFunc(tie, func(a, b string) int { return strings.Compare(b, a) })
	want := append(append([]string{after.ID}, tie...), before.ID)
	var got []string
	cursor := ""
	for pages := 0; ; pages++ {
		require.Less(t, pages, 10)
		page, next, err := s.List(ctx, memory.Filter{Namespace: "a"}, memory.NewestFirst, cursor, 400)
		require.NoError(t, err)
		got = append(got, ids(page)...)
		if next == "" {
			break
		}
		cursor = next
	}
	assert.Equal(t, want, got)
}

func ids(ms []memory.Memory) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.ID
	}
	return out
}
