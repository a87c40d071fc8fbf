package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/memory"
)

// The contract of reading everything: scroll and namespaces.

// testScrollPagesEverythingOnce checks that Scroll pages through every
// memory once.
func testScrollPagesEverythingOnce(ctx context.Context, t *testing.T, fresh func(*testing.T) memory.Store) {
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
}

// testScrollFilters checks that Scroll keeps to its filter: namespace,
// types, time.
func testScrollFilters(ctx context.Context, t *testing.T, fresh func(*testing.T) memory.Store) {
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
}

// testNamespaces checks that Namespaces lists each namespace once.
func testNamespaces(ctx context.Context, t *testing.T, fresh func(*testing.T) memory.Store) {
	s := fresh(t)
	got, err := s.Namespaces(ctx)
	require.NoError(t, err)
	assert.Empty(t, got)
	require.NoError(t, s.Upsert(ctx, mem("b", memory.Raw, 0, "x"), mem("a", memory.Raw, 0, "y"), mem("b", memory.Curated, 1, "z")))
	got, err = s.Namespaces(ctx)
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"a", "b"}, got)
}
