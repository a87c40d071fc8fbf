package memory_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/memory"
	"github.com/vera-proxy/vera/memory/embedded"
)

// flakyEmbedder fails while down is set; otherwise it returns a vector
// derived from the text's length.
type flakyEmbedder struct {
	down  atomic.Bool
	calls atomic.Int64
}

func (e *flakyEmbedder) Embed(_ context.Context, texts []string) ([][]float32, error) {
	e.calls.Add(1)
	if e.down.Load() {
		return nil, fmt.Errorf("%w: connection refused", memory.ErrUnavailable)
	}
	out := make([][]float32, len(texts))
	for i, t := range texts {
		out[i] = []float32{1, float32(len(t) % 7), 0.5}
	}
	return out, nil
}

// flakyStore fails upserts while down is set.
type flakyStore struct {
	memory.Store
	down    atomic.Bool
	upserts atomic.Int64
}

func (s *flakyStore) Upsert(ctx context.Context, ms ...memory.Memory) error {
	if s.down.Load() {
		return errors.New("store down")
	}
	s.upserts.Add(int64(len(ms)))
	return s.Store.Upsert(ctx, ms...)
}

func openDB(t *testing.T, dir string) *embedded.DB {
	t.Helper()
	db, err := embedded.Open(context.Background(), dir)
	require.NoError(t, err)
	return db
}

func fastWriter(store memory.Store, q memory.Queue, e memory.Embedder) *memory.Writer {
	w := memory.NewWriter(store, q, e, nil, nil)
	w.MaxBackoff = 20 * time.Millisecond
	w.RetryInterval = 20 * time.Millisecond
	return w
}

func turn(ns string, i int) memory.Turn {
	return memory.Turn{Namespace: ns, Model: "m", User: fmt.Sprintf("question %d", i), Assistant: fmt.Sprintf("answer %d", i), Time: time.Now()}
}

func count(t *testing.T, s memory.Store, f memory.Filter) int {
	n, err := s.Count(context.Background(), f)
	require.NoError(t, err)
	return n
}

func TestWriterStoresEachTurnOnce(t *testing.T) {
	db := openDB(t, t.TempDir())
	defer db.Close()
	fs := &flakyStore{Store: db}
	e := &flakyEmbedder{}
	w := fastWriter(fs, db, e)
	w.Start()
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() { w.Record(turn("a", i)) })
	}
	wg.Wait()
	require.Eventually(t, func() bool { return count(t, db, memory.Filter{Namespace: "a"}) == 50 }, 10*time.Second, 10*time.Millisecond)
	w.Close()
	assert.Equal(t, 50, count(t, db, memory.Filter{Namespace: "a"}))
	assert.Equal(t, int64(50), fs.upserts.Load(), "each turn written once")
	assert.Equal(t, 0, count(t, db, memory.Filter{Namespace: "a", NoVector: true}), "all embedded")
	pending, err := db.Pending(context.Background(), 100)
	require.NoError(t, err)
	assert.Empty(t, pending)
}

func TestWriterEmbedderDownStoresLexicallyThenBackfills(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, t.TempDir())
	defer db.Close()
	e := &flakyEmbedder{}
	e.down.Store(true)
	w := fastWriter(db, db, e)
	w.Start()
	defer w.Close()
	w.Record(memory.Turn{Namespace: "a", User: "my sister lives in Lisbon", Assistant: "noted", Time: time.Now()})
	require.Eventually(t, func() bool { return count(t, db, memory.Filter{Namespace: "a"}) == 1 }, 10*time.Second, 10*time.Millisecond)
	hits, err := db.Search(ctx, memory.Query{Filter: memory.Filter{Namespace: "a"}, Text: "Lisbon", Limit: 5})
	require.NoError(t, err)
	require.Len(t, hits, 1, "lexically searchable at once")
	assert.Equal(t, 1, count(t, db, memory.Filter{Namespace: "a", NoVector: true}))
	st := w.Status(ctx)
	assert.False(t, st.EmbedderOK)
	assert.Contains(t, st.EmbedderError, "connection refused")
	assert.True(t, st.StoreOK)

	e.down.Store(false)
	require.Eventually(t, func() bool { return count(t, db, memory.Filter{Namespace: "a", NoVector: true}) == 0 }, 10*time.Second, 10*time.Millisecond)
	st = w.Status(ctx)
	assert.True(t, st.EmbedderOK)
	assert.Empty(t, st.EmbedderError)
	assert.Equal(t, 1, count(t, db, memory.Filter{Namespace: "a"}))
}

func TestWriterStoreDownKeepsTurnsQueuedAcrossRestart(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db := openDB(t, dir)
	fs := &flakyStore{Store: db}
	fs.down.Store(true)
	w := fastWriter(fs, db, &flakyEmbedder{})
	w.Start()
	for i := range 5 {
		w.Record(turn("a", i))
	}
	require.Eventually(t, func() bool {
		p, err := db.Pending(ctx, 100)
		return err == nil && len(p) == 5
	}, 10*time.Second, 10*time.Millisecond)
	// Health tells: the store is failing and five turns wait locally.
	require.Eventually(t, func() bool { return !w.Status(ctx).StoreOK }, 10*time.Second, 10*time.Millisecond)
	st := w.Status(ctx)
	assert.Equal(t, "store down", st.StoreError)
	assert.Equal(t, 5, st.Pending)
	w.Close()
	assert.Equal(t, 0, count(t, db, memory.Filter{Namespace: "a"}))
	require.NoError(t, db.Close())

	// Next start: the store works again and the queued turns land, once.
	db = openDB(t, dir)
	defer db.Close()
	w = fastWriter(db, db, &flakyEmbedder{})
	w.Start()
	defer w.Close()
	require.Eventually(t, func() bool { return count(t, db, memory.Filter{Namespace: "a"}) == 5 }, 10*time.Second, 10*time.Millisecond)
	require.Eventually(t, func() bool {
		p, err := db.Pending(ctx, 100)
		return err == nil && len(p) == 0
	}, 10*time.Second, 10*time.Millisecond)
	assert.Equal(t, 5, count(t, db, memory.Filter{Namespace: "a"}))
}

func TestWriterCloseCommitsRecordedTurns(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, t.TempDir())
	defer db.Close()
	fs := &flakyStore{Store: db}
	fs.down.Store(true)
	w := fastWriter(fs, db, nil)
	w.Start()
	for i := range 100 {
		w.Record(turn("a", i))
	}
	w.Close() // right away: every recorded turn must be in the queue
	p, err := db.Pending(ctx, 1000)
	require.NoError(t, err)
	assert.Len(t, p, 100)
}
