package embedded

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/memory"
	"github.com/vera-proxy/vera/memory/storetest"
)

func TestContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) memory.Store {
		db, err := Open(context.Background(), t.TempDir())
		require.NoError(t, err)
		return db
	})
}

func TestReopenRebuildsIndex(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db, err := Open(ctx, dir)
	require.NoError(t, err)
	m := memory.Memory{ID: memory.NewID(), Namespace: "a", Type: memory.Raw, Text: "User: my cat is Miso\nAssistant: ok", Time: time.Now(), Vector: []float32{1, 0, 0}}
	require.NoError(t, db.Upsert(ctx, m))
	require.NoError(t, db.Enqueue(ctx, memory.Memory{ID: "q1", Namespace: "a", Type: memory.Raw, Text: "queued", Time: time.Now()}))
	require.NoError(t, db.Close())

	db, err = Open(ctx, dir)
	require.NoError(t, err)
	defer db.Close()
	hits, err := db.Search(ctx, memory.Query{Filter: memory.Filter{Namespace: "a"}, Text: "Miso", Vector: []float32{1, 0.1, 0}, Threshold: 0.5, Limit: 5})
	require.NoError(t, err)
	require.Len(t, hits, 1)
	assert.Greater(t, hits[0].Cosine, 0.9)
	assert.Greater(t, hits[0].Lexical, 0.0)
	pending, err := db.Pending(ctx, 10)
	require.NoError(t, err)
	require.Len(t, pending, 1)
	assert.Equal(t, "queued", pending[0].Text)
	require.NoError(t, db.Done(ctx, "q1"))
	pending, err = db.Pending(ctx, 10)
	require.NoError(t, err)
	assert.Empty(t, pending)
}

func TestSecondOpenIsRefused(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db, err := Open(ctx, dir)
	require.NoError(t, err)
	defer db.Close()
	_, err = Open(ctx, dir)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "in use by another process")
}

func TestVectorSpaceChangeDropsOldVectors(t *testing.T) {
	ctx := context.Background()
	db, err := Open(ctx, t.TempDir())
	require.NoError(t, err)
	defer db.Close()
	reset, err := db.VectorSpace(ctx, "nomic-embed-text", 3)
	require.NoError(t, err)
	assert.False(t, reset)
	m := memory.Memory{ID: memory.NewID(), Namespace: "a", Type: memory.Raw, Text: "User: x\nAssistant: y", Time: time.Now(), Vector: []float32{1, 0, 0}}
	require.NoError(t, db.Upsert(ctx, m))
	reset, err = db.VectorSpace(ctx, "nomic-embed-text", 3)
	require.NoError(t, err)
	assert.False(t, reset, "same model: nothing to do")

	err = db.Upsert(ctx, memory.Memory{ID: memory.NewID(), Namespace: "a", Type: memory.Raw, Text: "z", Time: time.Now(), Vector: []float32{1, 0}})
	require.ErrorContains(t, err, "vector has 2 dimensions, the store holds 3")

	reset, err = db.VectorSpace(ctx, "mxbai-embed-large", 2)
	require.NoError(t, err)
	assert.True(t, reset)
	got, err := db.Get(ctx, m.ID)
	require.NoError(t, err)
	assert.Nil(t, got.Vector, "old vectors dropped")
	page, _, err := db.Scroll(ctx, memory.Filter{Namespace: "a", NoVector: true}, "", 10)
	require.NoError(t, err)
	assert.Len(t, page, 1, "waiting to be embedded again")
	require.NoError(t, db.Upsert(ctx, memory.Memory{ID: memory.NewID(), Namespace: "a", Type: memory.Raw, Text: "z", Time: time.Now(), Vector: []float32{1, 0}}))
}

// TestReopenLoadsManyBatchesInOrder: loading reads memories in batches and
// analyses them on every core; the index must come out as if they had
// been added one by one, in storage order: every memory found by its own
// words, the newest first in each namespace.
func TestReopenLoadsManyBatchesInOrder(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db, err := Open(ctx, dir)
	require.NoError(t, err)
	ms := storetest.TextCorpus(2_345) // several batches, the last one partial
	nss := []string{"a", "b", "c"}
	for i := range ms {
		ms[i].Namespace = nss[i%3]
		ms[i].Text += fmt.Sprintf(" marker%d", i)
		ms[i].Vector = []float32{float32(i%7) + 1, 1, 0}
	}
	require.NoError(t, db.Upsert(ctx, ms...))
	require.NoError(t, db.Close())

	db, err = Open(ctx, dir)
	require.NoError(t, err)
	defer db.Close()
	for _, i := range []int{0, 511, 512, 1024, 2344} {
		hits, err := db.Search(ctx, memory.Query{Filter: memory.Filter{Namespace: ms[i].Namespace}, Text: fmt.Sprintf("marker%d", i), Threshold: 0.5, Limit: 1})
		require.NoError(t, err)
		require.Len(t, hits, 1, "memory %d", i)
		assert.Equal(t, ms[i].ID, hits[0].Memory.ID)
	}
	db.mu.RLock()
	for _, ns := range nss {
		assert.True(t, db.ns[ns].Ordered(), "namespace %s: indexed in storage (and time) order", ns)
	}
	db.mu.RUnlock()
	for k, ns := range nss {
		latest, err := db.Latest(ctx, memory.Filter{Namespace: ns}, 2)
		require.NoError(t, err)
		require.Len(t, latest, 2)
		last := 2344 - (2344-k)%3
		assert.Equal(t, ms[last].ID, latest[0].ID, "namespace %s: the newest first", ns)
		assert.Equal(t, ms[last-3].ID, latest[1].ID)
	}
}

// A data directory whose name holds what a URI reads (a fragment, a
// query, an escape) keeps every file inside it: nothing is written at the
// path cut short, and a second store under another such name is its own.
func TestDataDirectoryNamesAreNotURIs(t *testing.T) {
	ctx := context.Background()
	parent := t.TempDir()
	var dirs []string
	for _, name := range []string{"notes#1", "a?b=c", "100%25 sure", "x#2"} {
		dir := filepath.Join(parent, name)
		require.NoError(t, os.Mkdir(dir, 0o755))
		db, err := Open(ctx, dir)
		require.NoError(t, err, name)
		m := memory.Memory{ID: memory.NewID(), Namespace: "a", Type: memory.Raw, Text: "User: in " + name + "\nAssistant: ok", Time: time.Now()}
		require.NoError(t, db.Upsert(ctx, m))
		n, err := db.Count(ctx, memory.Filter{Namespace: "a"})
		require.NoError(t, err)
		assert.Equal(t, 1, n, "%s: its own store, not another's", name)
		require.NoError(t, db.Close())
		dirs = append(dirs, dir)
	}
	for _, dir := range dirs {
		_, err := os.Stat(filepath.Join(dir, FileName))
		assert.NoError(t, err, "the file is in %s", dir)
	}
	left, err := os.ReadDir(parent)
	require.NoError(t, err)
	assert.Len(t, left, len(dirs), "nothing beside the data directories")
}
