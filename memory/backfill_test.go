package memory

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeCounter is a TokenCounter over a map, paging in id order like the
// embedded store.
type fakeCounter struct {
	text    map[string]string
	tokens  map[string]int
	pages   int
	sets    int
	failGet error
	failSet error
	stuck   bool // returns the same cursor forever
}

func newFakeCounter(n int) *fakeCounter {
	f := &fakeCounter{text: map[string]string{}, tokens: map[string]int{}}
	for i := range n {
		id := fmt.Sprintf("id%05d", i)
		f.text[id] = strings.Repeat("w", i%7)
	}
	return f
}

func (f *fakeCounter) ZeroTokens(ctx context.Context, cursor string, limit int) ([]Memory, string, error) {
	if f.failGet != nil {
		return nil, "", f.failGet
	}
	f.pages++
	var ids []string
	for id := range f.text {
		if id > cursor && f.tokens[id] == 0 {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	next := ""
	if len(ids) > limit {
		ids = ids[:limit]
		next = ids[limit-1]
	}
	if f.stuck {
		next = "stuck"
	}
	out := make([]Memory, len(ids))
	for i, id := range ids {
		out[i] = Memory{ID: id, Text: f.text[id]}
	}
	return out, next, nil
}

func (f *fakeCounter) SetTokens(ctx context.Context, counts map[string]int) error {
	if f.failSet != nil {
		return f.failSet
	}
	f.sets++
	for id, n := range counts {
		if _, ok := f.text[id]; ok && n > 0 && f.tokens[id] == 0 {
			f.tokens[id] = n
		}
	}
	return nil
}

func TestBackfillTokensCountsEveryUnknown(t *testing.T) {
	f := newFakeCounter(600)
	f.tokens["id00003"] = 42 // known already: not asked for, not changed
	n, err := BackfillTokens(context.Background(), f, func(s string) int { return len(s) })
	require.NoError(t, err)
	assert.Equal(t, 599, n)
	assert.Equal(t, 3, f.pages, "599 in pages of 256")
	assert.Equal(t, 3, f.sets)
	for id, text := range f.text {
		switch {
		case id == "id00003":
			assert.Equal(t, 42, f.tokens[id])
		case text == "":
			assert.Equal(t, 1, f.tokens[id], "an empty text counts 1, so it is not counted again")
		default:
			assert.Equal(t, len(text), f.tokens[id])
		}
	}

	n, err = BackfillTokens(context.Background(), f, func(s string) int { return len(s) })
	require.NoError(t, err)
	assert.Zero(t, n, "nothing left")
}

func TestBackfillTokensStops(t *testing.T) {
	t.Run("context ended", func(t *testing.T) {
		f := newFakeCounter(600)
		ctx, cancel := context.WithCancel(context.Background())
		calls := 0
		n, err := BackfillTokens(ctx, f, func(s string) int {
			if calls++; calls == 300 {
				cancel()
			}
			return 1
		})
		require.ErrorIs(t, err, context.Canceled)
		assert.Equal(t, 256, n, "the first page set, the second counted but not written")
		assert.Equal(t, 1, f.sets)
	})
	t.Run("store errors", func(t *testing.T) {
		boom := errors.New("boom")
		_, err := BackfillTokens(context.Background(), &fakeCounter{failGet: boom}, func(string) int { return 1 })
		require.ErrorIs(t, err, boom)
		f := newFakeCounter(3)
		f.failSet = boom
		n, err := BackfillTokens(context.Background(), f, func(string) int { return 1 })
		require.ErrorIs(t, err, boom)
		assert.Zero(t, n)
	})
	t.Run("a cursor that does not move", func(t *testing.T) {
		f := newFakeCounter(3)
		f.stuck = true
		_, err := BackfillTokens(context.Background(), f, func(string) int { return 1 })
		require.ErrorContains(t, err, "cursor")
		assert.Equal(t, 2, f.pages)
	})
}
