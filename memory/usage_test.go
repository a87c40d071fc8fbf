package memory_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/memory"
	"github.com/vera-proxy/vera/memory/embedded"
)

// failingUsage fails its first AddUsage, then is the store underneath.
type failingUsage struct {
	memory.UsageStore
	failed bool
}

func (f *failingUsage) AddUsage(ctx context.Context, uses ...memory.Use) error {
	if !f.failed {
		f.failed = true
		return errors.New("disk full")
	}
	return f.UsageStore.AddUsage(ctx, uses...)
}

// Counts are noted in memory, flushed in batches, kept through a failed
// flush, read with what is not flushed yet, and erased with the memory or
// its namespace.
func TestUsage(t *testing.T) {
	ctx := context.Background()
	db, err := embedded.Open(ctx, t.TempDir())
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	u := memory.NewUsage(&failingUsage{UsageStore: db})
	at := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	u.Note("a", []string{"m1", "m2"}, at)
	u.Note("a", []string{"m1"}, at.Add(time.Minute))
	assert.Equal(t, 2, u.Of(ctx, "m1")["m1"].Count, "read before it is flushed")
	require.Error(t, u.Flush(ctx))
	u.Note("a", []string{"m1"}, at.Add(2*time.Minute))
	require.NoError(t, u.Flush(ctx), "the failed batch is written with the next")
	got := u.Of(ctx, "m1", "m2", "m3")
	assert.Equal(t, 3, got["m1"].Count)
	assert.True(t, at.Add(2*time.Minute).Equal(got["m1"].Last))
	assert.Equal(t, 1, got["m2"].Count)
	assert.NotContains(t, got, "m3")

	u.Note("b", []string{"m9"}, at)
	require.NoError(t, u.Forget(ctx, "", "m1"))
	assert.NotContains(t, u.Of(ctx, "m1"), "m1")
	require.NoError(t, u.Forget(ctx, "a"))
	assert.Empty(t, u.Of(ctx, "m2"))
	assert.Equal(t, 1, u.Of(ctx, "m9")["m9"].Count, "another namespace's stay")
}
