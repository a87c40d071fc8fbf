package storetest

import (
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/memory"
)

// newestFirst sorts ms as List does newest first: by time, of equal
// times by id, both descending.
func newestFirst(ms []memory.Memory) []string {
	ms = slices.Clone(ms)
	slices.SortFunc(ms, func(a, b memory.Memory) int {
		if !a.Time.Equal(b.Time) {
			if a.Time.After(b.Time) {
				return -1
			}
			return 1
		}
		return strings.Compare(b.ID, a.ID)
	})
	return ids(ms)
}

func reversed(s []string) []string {
	s = slices.Clone(s)
	slices.Reverse(s)
	return s
}

// listAll pages through the list of f in order o, limit a page, and
// returns the ids it gave, checking each page on the way.
func listAll(t *testing.T, s memory.Store, f memory.Filter, o memory.Order, limit int) []string {
	t.Helper()
	var got []string
	cursor := ""
	for pages := 0; ; pages++ {
		require.Less(t, pages, 200, "the list does not end")
		page, next, err := s.List(context.Background(), f, o, cursor, limit)
		require.NoError(t, err)
		if next == "" {
			require.LessOrEqual(t, len(page), limit)
			return append(got, ids(page)...)
		}
		require.Len(t, page, limit, "a page that is not the last is full")
		got = append(got, ids(page)...)
		cursor = next
	}
}

// testListNewestFirstAndBack checks that List pages newest first and oldest
// first, whatever the page size.
func testListNewestFirstAndBack(ctx context.Context, t *testing.T, fresh func(*testing.T) memory.Store) {
	s := fresh(t)
	var ms []memory.Memory
	for _, i := range []int{3, 1, 4, 0, 2, 9, 5} { // written out of order
		ms = append(ms, mem("a", memory.Raw, i, fmt.Sprintf("User: %d\nAssistant: ok", i)))
	}
	ms = append(ms, mem("a", memory.Curated, 7, "User: curated\nAssistant: ok"))
	require.NoError(t, s.Upsert(ctx, ms...))
	require.NoError(t, s.Upsert(ctx, mem("b", memory.Raw, 8, "User: b\nAssistant: ok")))

	want := newestFirst(ms)
	all := memory.Filter{Namespace: "a"}
	for _, limit := range []int{1, 3, 8, 100} {
		assert.Equal(t, want, listAll(t, s, all, memory.NewestFirst, limit), "newest first, %d a page", limit)
		assert.Equal(t, reversed(want), listAll(t, s, all, memory.OldestFirst, limit), "oldest first, %d a page", limit)
	}
	page, _, err := s.List(ctx, all, memory.NewestFirst, "", 1)
	require.NoError(t, err)
	require.Len(t, page, 1)
	assert.Equal(t, ms[5].ID, page[0].ID, "the newest opens the list")
	assert.Equal(t, ms[5].Text, page[0].Text, "whole memories")
	assert.Equal(t, memory.Raw, page[0].Type)
}

// testListTiesByID: memories of one time (an import, a fast writer; the same
// microsecond but not the same nanosecond too) come by id, and a page
// boundary among them neither skips nor repeats one.
func testListTiesByID(ctx context.Context, t *testing.T, fresh func(*testing.T) memory.Store) {
	s := fresh(t)
	var ms []memory.Memory
	for i := range 9 {
		m := mem("a", memory.Raw, 5, fmt.Sprintf("User: tie %d\nAssistant: ok", i))
		ms = append(ms, m)
	}
	for i := range 4 {
		m := mem("a", memory.Raw, 2, fmt.Sprintf("User: nano %d\nAssistant: ok", i))
		m.Time = m.Time.Add(time.Duration(i%2) * time.Nanosecond)
		ms = append(ms, m)
	}
	ms = append(ms, mem("a", memory.Raw, 9, "User: after\nAssistant: ok"), mem("a", memory.Raw, 0, "User: before\nAssistant: ok"))
	for _, m := range ms {
		require.NoError(t, s.Upsert(ctx, m)) // one at a time: stores that keep the writing order keep it
	}
	want := newestFirst(ms)
	for _, limit := range []int{1, 2, 4, 5, 20} {
		assert.Equal(t, want, listAll(t, s, memory.Filter{Namespace: "a"}, memory.NewestFirst, limit), "newest first, %d a page", limit)
		assert.Equal(t, reversed(want), listAll(t, s, memory.Filter{Namespace: "a"}, memory.OldestFirst, limit), "oldest first, %d a page", limit)
	}
}

// testListWhileWriting: written while a person pages: a memory behind the
// cursor's place comes on a later page, one before it does not, and one
// deleted before its page is not listed. Nothing listed comes twice.
func testListWhileWriting(ctx context.Context, t *testing.T, fresh func(*testing.T) memory.Store) {
	for _, o := range []memory.Order{memory.NewestFirst, memory.OldestFirst} {
		t.Run(o.String(), func(t *testing.T) {
			s := fresh(t)
			var ms []memory.Memory
			for i := range 10 {
				ms = append(ms, mem("a", memory.Raw, 10+i, fmt.Sprintf("User: %d\nAssistant: ok", i)))
			}
			ms = append(ms, mem("a", memory.Raw, 14, "User: tie a\nAssistant: ok"), mem("a", memory.Raw, 14, "User: tie b\nAssistant: ok"))
			require.NoError(t, s.Upsert(ctx, ms...))
			order := newestFirst(ms)
			if o == memory.OldestFirst {
				order = reversed(order)
			}
			f := memory.Filter{Namespace: "a"}
			page, next, err := s.List(ctx, f, o, "", 4)
			require.NoError(t, err)
			require.Equal(t, order[:4], ids(page))
			require.NotEmpty(t, next)
			place := page[3]

			// Ahead of the place: a memory before the whole list in
			// its order, and one of the place's time whose id comes
			// first. Behind it: one after the whole list, and one of
			// the place's time whose id comes after.
			aheadAt, behindAt := 30, 0 // minutes: newer, older
			if o == memory.OldestFirst {
				aheadAt, behindAt = behindAt, aheadAt
			}
			ahead := []memory.Memory{mem("a", memory.Raw, aheadAt, "User: ahead\nAssistant: ok")}
			behind := []memory.Memory{mem("a", memory.Raw, behindAt, "User: behind\nAssistant: ok")}
			for _, id := range []string{"00000000-0000-4000-8000-000000000000", "ffffffff-ffff-4fff-bfff-ffffffffffff"} {
				m := memory.Memory{ID: id, Namespace: "a", Type: memory.Raw, Text: "User: tie " + id + "\nAssistant: ok", Time: place.Time}
				if o.Compare(m, place) < 0 {
					ahead = append(ahead, m)
				} else {
					behind = append(behind, m)
				}
			}
			require.Len(t, ahead, 2)
			require.Len(t, behind, 2)
			require.NoError(t, s.Upsert(ctx, append(slices.Clone(ahead), behind...)...))
			gone := order[6]
			require.NoError(t, s.Delete(ctx, gone))

			var rest []string
			for next != "" {
				page, next, err = s.List(ctx, f, o, next, 3)
				require.NoError(t, err)
				rest = append(rest, ids(page)...)
			}
			later := map[string]bool{}
			for _, id := range append(slices.Clone(order[4:]), ids(behind)...) {
				later[id] = id != gone
			}
			var want []memory.Memory
			for _, m := range append(ms, behind...) {
				if later[m.ID] {
					want = append(want, m)
				}
			}
			wantIDs := newestFirst(want)
			if o == memory.OldestFirst {
				wantIDs = reversed(wantIDs)
			}
			assert.Equal(t, wantIDs, rest)
		})
	}
}

// testListFilters checks that List keeps to its filter.
func testListFilters(ctx context.Context, t *testing.T, fresh func(*testing.T) memory.Store) {
	s := fresh(t)
	var ms []memory.Memory
	for i := range 12 {
		typ := memory.Raw
		if i%3 == 0 {
			typ = memory.Curated
		}
		m := mem("a", typ, i*60, fmt.Sprintf("User: hour %d\nAssistant: ok", i)) // one an hour
		if i%2 == 0 {
			m.Vector = vec(Dim, 0, 1, 0)
		}
		ms = append(ms, m)
	}
	require.NoError(t, s.Upsert(ctx, ms...))
	pick := func(keep func(i int) bool) []memory.Memory {
		var out []memory.Memory
		for i, m := range ms {
			if keep(i) {
				out = append(out, m)
			}
		}
		return out
	}
	f := memory.Filter{Namespace: "a", Types: []memory.Type{memory.Raw}, Since: t0.Add(2 * time.Hour), Until: t0.Add(9 * time.Hour)}
	want := newestFirst(pick(func(i int) bool { return i%3 != 0 && i >= 2 && i < 9 }))
	assert.Equal(t, want, listAll(t, s, f, memory.NewestFirst, 2), "since is inclusive, until exclusive")
	assert.Equal(t, reversed(want), listAll(t, s, f, memory.OldestFirst, 2))
	want = newestFirst(pick(func(i int) bool { return i%2 == 1 }))
	assert.Equal(t, want, listAll(t, s, memory.Filter{Namespace: "a", NoVector: true}, memory.NewestFirst, 4))
	assert.Empty(t, listAll(t, s, memory.Filter{Namespace: "nobody"}, memory.NewestFirst, 4))
}

// testListBadCursor checks that a cursor List did not give, or of the other
// order, is refused.
func testListBadCursor(ctx context.Context, t *testing.T, fresh func(*testing.T) memory.Store) {
	s := fresh(t)
	for i := range 3 {
		require.NoError(t, s.Upsert(ctx, mem("a", memory.Raw, i, fmt.Sprintf("User: %d\nAssistant: ok", i))))
	}
	f := memory.Filter{Namespace: "a"}
	_, next, err := s.List(ctx, f, memory.NewestFirst, "", 1)
	require.NoError(t, err)
	require.NotEmpty(t, next)
	for _, bad := range []string{"not a cursor", "eyJpZCI6MX0", base64.RawURLEncoding.EncodeToString([]byte("newest yesterday x"))} {
		_, _, err := s.List(ctx, f, memory.NewestFirst, bad, 1)
		assert.ErrorIs(t, err, memory.ErrBadCursor, "%q", bad)
	}
	_, _, err = s.List(ctx, f, memory.OldestFirst, next, 1)
	assert.ErrorIs(t, err, memory.ErrBadCursor, "a cursor goes on in its own order")
}
