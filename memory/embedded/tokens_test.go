package embedded

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/memory"
	"github.com/vera-proxy/vera/text"
)

func TestSetTokensTouchesNothingElse(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db, err := Open(ctx, dir)
	require.NoError(t, err)
	now := time.Now().UTC()
	zero := memory.Memory{ID: memory.NewID(), Namespace: "a", Type: memory.Raw, Text: "User: my cat is Miso\nAssistant: noted",
		Time: now, Model: "llama3.2", Metadata: map[string]any{"k": "v"}, Vector: []float32{1, 0, 0}}
	counted := memory.Memory{ID: memory.NewID(), Namespace: "b", Type: memory.Curated, Text: "The user's cat is Miso", Time: now.Add(time.Second), Tokens: 6}
	require.NoError(t, db.Upsert(ctx, zero, counted))

	page, next, err := db.ZeroTokens(ctx, "", 10)
	require.NoError(t, err)
	assert.Empty(t, next)
	require.Len(t, page, 1, "only the memory without a count")
	assert.Equal(t, zero.ID, page[0].ID)
	assert.Equal(t, zero.Text, page[0].Text)

	require.NoError(t, db.SetTokens(ctx, map[string]int{
		zero.ID:          11,
		counted.ID:       99, // counted already: an Upsert's count wins
		memory.NewID():   5,  // unknown: ignored
		"not even an id": 5,
	}))
	got, err := db.Get(ctx, zero.ID)
	require.NoError(t, err)
	want := zero
	want.Tokens = 11
	assert.Equal(t, want, got, "only the count changed")
	got, err = db.Get(ctx, counted.ID)
	require.NoError(t, err)
	assert.Equal(t, 6, got.Tokens)

	// The index, which Search and Latest read, has the count too.
	hits, err := db.Search(ctx, memory.Query{Filter: memory.Filter{Namespace: "a"}, Text: "Miso", Vector: []float32{1, 0, 0}, Threshold: 0.5, Limit: 5})
	require.NoError(t, err)
	require.Len(t, hits, 1)
	assert.Equal(t, 11, hits[0].Tokens)
	assert.Greater(t, hits[0].Cosine, 0.99, "vector untouched")
	latest, err := db.Latest(ctx, memory.Filter{Namespace: "a"}, 5)
	require.NoError(t, err)
	require.Len(t, latest, 1)
	assert.Equal(t, 11, latest[0].Tokens)

	page, _, err = db.ZeroTokens(ctx, "", 10)
	require.NoError(t, err)
	assert.Empty(t, page)

	// On disk: a reopened store has it.
	require.NoError(t, db.Close())
	db, err = Open(ctx, dir)
	require.NoError(t, err)
	defer db.Close()
	latest, err = db.Latest(ctx, memory.Filter{Namespace: "a"}, 5)
	require.NoError(t, err)
	require.Len(t, latest, 1)
	assert.Equal(t, 11, latest[0].Tokens)
}

// seed stores n memories without a count over three namespaces, and one
// with a count.
func seed(t *testing.T, db *DB, n int) []memory.Memory {
	t.Helper()
	ms := make([]memory.Memory, n)
	for i := range ms {
		ms[i] = memory.Memory{ID: memory.NewID(), Namespace: fmt.Sprintf("ns%d", i%3), Type: memory.Raw,
			Text: fmt.Sprintf("User: fact %d\nAssistant: noted", i), Time: time.Now().UTC(), Vector: []float32{float32(i + 1), 1}}
	}
	counted := memory.Memory{ID: memory.NewID(), Namespace: "ns0", Type: memory.Raw, Text: "counted", Time: time.Now().UTC(), Tokens: 1}
	require.NoError(t, db.Upsert(context.Background(), append(ms, counted)...))
	return ms
}

func TestZeroTokensPages(t *testing.T) {
	ctx := context.Background()
	db, err := Open(ctx, t.TempDir())
	require.NoError(t, err)
	defer db.Close()
	ms := seed(t, db, 5)

	seen := map[string]bool{}
	cursor, pages := "", 0
	for {
		page, next, err := db.ZeroTokens(ctx, cursor, 2)
		require.NoError(t, err)
		pages++
		assert.LessOrEqual(t, len(page), 2)
		counts := map[string]int{}
		for _, m := range page {
			assert.False(t, seen[m.ID], "%s seen twice", m.ID)
			seen[m.ID] = true
			counts[m.ID] = 3
		}
		// Counting a page does not disturb the paging.
		require.NoError(t, db.SetTokens(ctx, counts))
		if next == "" {
			break
		}
		cursor = next
	}
	assert.Equal(t, 3, pages, "5 memories in pages of 2")
	assert.Len(t, seen, len(ms))
	for _, m := range ms {
		assert.True(t, seen[m.ID])
		got, err := db.Get(ctx, m.ID)
		require.NoError(t, err)
		assert.Equal(t, 3, got.Tokens)
		assert.Equal(t, m.Text, got.Text)
		assert.Len(t, got.Vector, 2)
	}
}

func TestBackfillTokensEmbedded(t *testing.T) {
	ctx := context.Background()
	db, err := Open(ctx, t.TempDir())
	require.NoError(t, err)
	defer db.Close()
	ms := seed(t, db, 600) // three pages
	empty := memory.Memory{ID: memory.NewID(), Namespace: "ns1", Type: memory.Raw, Text: "", Time: time.Now().UTC()}
	require.NoError(t, db.Upsert(ctx, empty))
	tok, err := text.NewTokenizer()
	require.NoError(t, err)

	n, err := memory.BackfillTokens(ctx, db, tok.Count)
	require.NoError(t, err)
	assert.Equal(t, 601, n)
	for _, m := range ms[:5] {
		got, err := db.Get(ctx, m.ID)
		require.NoError(t, err)
		assert.Equal(t, tok.Count(m.Text), got.Tokens)
		assert.Equal(t, m.Vector, got.Vector)
	}
	got, err := db.Get(ctx, empty.ID)
	require.NoError(t, err)
	assert.Equal(t, 1, got.Tokens, "an empty text counts 1, so it is not counted again")

	n, err = memory.BackfillTokens(ctx, db, tok.Count)
	require.NoError(t, err)
	assert.Zero(t, n, "nothing left")
}

func TestBackfillTokensStopsWithContext(t *testing.T) {
	db, err := Open(context.Background(), t.TempDir())
	require.NoError(t, err)
	defer db.Close()
	seed(t, db, 600)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	calls := 0
	n, err := memory.BackfillTokens(ctx, db, func(s string) int {
		calls++
		if calls == 300 { // on the second page
			cancel()
		}
		return len(s)
	})
	require.ErrorIs(t, err, context.Canceled)
	assert.Less(t, calls, 600, "stopped before counting everything")
	left, _, err := db.ZeroTokens(context.Background(), "", 1000)
	require.NoError(t, err)
	assert.Len(t, left, 600-n, "what it reports set is set, the rest is left for the next run")
	assert.NotEmpty(t, left)
}
