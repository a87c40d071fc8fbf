package memory_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/memory"
	"github.com/vera-proxy/vera/memory/embedded"
	"github.com/vera-proxy/vera/text"
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
		wg.Go(func() { w.Record(context.Background(), turn("a", i)) })
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
	w.Record(context.Background(), memory.Turn{Namespace: "a", User: "my sister lives in Lisbon", Assistant: "noted", Time: time.Now()})
	// The store commits the row, then indexes it: wait for the search,
	// not the row count.
	require.Eventually(t, func() bool {
		hits, err := db.Search(ctx, memory.Query{Filter: memory.Filter{Namespace: "a"}, Text: "Lisbon", Limit: 5})
		return err == nil && len(hits) == 1
	}, 10*time.Second, 10*time.Millisecond, "lexically searchable without its vector")
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
		w.Record(context.Background(), turn("a", i))
	}
	require.Eventually(t, func() bool {
		p, err := db.Pending(ctx, 100)
		return err == nil && len(p) == 5
	}, 10*time.Second, 10*time.Millisecond)
	// Health tells: the store is failing and five turns wait locally.
	require.Eventually(t, func() bool { return !w.Status(ctx).StoreOK }, 10*time.Second, 10*time.Millisecond)
	st := w.Status(ctx)
	assert.Equal(t, "store down", st.StoreError)
	// A turn moving from the journal to the queue's table is counted
	// twice in the moment its transaction commits (embedded.DB.Len).
	assert.Eventually(t, func() bool { return w.Status(ctx).Pending == 5 }, 10*time.Second, 10*time.Millisecond)
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
		w.Record(context.Background(), turn("a", i))
	}
	w.Close() // right away: every recorded turn must be in the queue
	p, err := db.Pending(ctx, 1000)
	require.NoError(t, err)
	assert.Len(t, p, 100)
}

// countingQueue counts commits and can be made slow.
type countingQueue struct {
	memory.Queue
	commits atomic.Int64
	delay   atomic.Int64 // nanoseconds each commit takes
}

func (q *countingQueue) Enqueue(ctx context.Context, ms ...memory.Memory) error {
	q.commits.Add(1)
	time.Sleep(time.Duration(q.delay.Load()))
	return q.Queue.Enqueue(ctx, ms...)
}

func TestWriterRecordReturnsOnceCommitted(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, t.TempDir())
	defer db.Close()
	fs := &flakyStore{Store: db}
	fs.down.Store(true) // the turn stays in the queue, where we can see it
	q := &countingQueue{Queue: db}
	q.delay.Store(int64(20 * time.Millisecond))
	w := fastWriter(fs, q, nil)
	w.Start()
	defer w.Close()
	require.NoError(t, w.Record(ctx, turn("a", 1)))
	p, err := db.Pending(ctx, 10)
	require.NoError(t, err)
	require.Len(t, p, 1, "on disk when Record returns")
	assert.Equal(t, "User: question 1\nAssistant: answer 1", p[0].Text)
}

func TestWriterGroupsConcurrentCommits(t *testing.T) {
	db := openDB(t, t.TempDir())
	defer db.Close()
	q := &countingQueue{Queue: db}
	q.delay.Store(int64(5 * time.Millisecond))
	w := fastWriter(db, q, nil)
	w.Start()
	defer w.Close()
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Go(func() { assert.NoError(t, w.Record(context.Background(), turn("a", i))) })
	}
	wg.Wait()
	assert.Less(t, q.commits.Load(), int64(64), "concurrent turns share commits")
	require.Eventually(t, func() bool { return count(t, db, memory.Filter{Namespace: "a"}) == 64 }, 10*time.Second, 10*time.Millisecond)
}

func TestWriterSlowQueueReleasesAndTells(t *testing.T) {
	db := openDB(t, t.TempDir())
	defer db.Close()
	q := &countingQueue{Queue: db}
	q.delay.Store(int64(300 * time.Millisecond))
	w := fastWriter(db, q, nil)
	w.Start()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := w.Record(ctx, turn("a", 1))
	require.ErrorIs(t, err, memory.ErrCommitSlow)
	st := w.Status(context.Background())
	assert.False(t, st.StoreOK)
	assert.Contains(t, st.StoreError, "not committed")
	w.Close() // the turn is still committed: stored, or queued for the next start
	p, err := db.Pending(context.Background(), 10)
	require.NoError(t, err)
	assert.Equal(t, 1, len(p)+count(t, db, memory.Filter{Namespace: "a"}))
}

func TestWriterCapsLongTurnsAndKeepsTheirCount(t *testing.T) {
	ctx := context.Background()
	tok, err := text.NewTokenizer()
	require.NoError(t, err)
	db := openDB(t, t.TempDir())
	defer db.Close()
	w := memory.NewWriter(db, db, nil, tok, nil)
	w.MaxTurnTokens = 200
	w.Start()
	defer w.Close()
	huge := "START " + strings.Repeat("lorem ipsum dolor sit amet ", 400_000) + " END"
	require.NoError(t, w.Record(ctx, memory.Turn{Namespace: "a", User: huge, Assistant: "short answer", Time: time.Now()}))
	require.NoError(t, w.Record(ctx, memory.Turn{Namespace: "a", User: "short question", Assistant: "fine"}))
	require.Eventually(t, func() bool { return count(t, db, memory.Filter{Namespace: "a"}) == 2 }, 10*time.Second, 10*time.Millisecond)
	ms, _, err := db.Scroll(ctx, memory.Filter{Namespace: "a"}, "", 10)
	require.NoError(t, err)
	for _, m := range ms {
		assert.Equal(t, tok.Count(m.Text), m.Tokens, "count kept: %.40q", m.Text)
		assert.LessOrEqual(t, m.Tokens, 200)
		user, answer, ok := memory.ParseExchange(m.Text)
		require.True(t, ok)
		if strings.HasPrefix(user, "START") {
			assert.Contains(t, user, "[…]")
			assert.True(t, strings.HasSuffix(user, "END"), "tail kept")
			assert.Equal(t, "short answer", answer, "the short side is whole")
		}
	}
}

// More turns than the writer's channel holds, while the disk is stuck, and
// then a shutdown: nothing panics and every turn is committed.
func TestWriterOverflowSurvivesClose(t *testing.T) {
	db := openDB(t, t.TempDir())
	defer db.Close()
	q := &countingQueue{Queue: db}
	q.delay.Store(int64(200 * time.Millisecond))
	w := fastWriter(db, q, nil)
	w.Start()
	var wg sync.WaitGroup
	for i := range 4200 {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
			defer cancel()
			_ = w.Record(ctx, turn("a", i))
		})
	}
	wg.Wait()
	q.delay.Store(0)
	w.Close()
	p, err := db.Pending(context.Background(), 10000)
	require.NoError(t, err)
	assert.Equal(t, 4200, len(p)+count(t, db, memory.Filter{Namespace: "a"}))
}

// An embedder that comes back is used at once when the writer is nudged,
// not at its next retry (health would say "down" meanwhile).
func TestWriterNudgeRetriesAtOnce(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, t.TempDir())
	defer db.Close()
	e := &flakyEmbedder{}
	e.down.Store(true)
	w := memory.NewWriter(db, db, e, nil, nil)
	w.RetryInterval = time.Hour
	w.Start()
	defer w.Close()
	require.NoError(t, w.Record(ctx, turn("a", 1)))
	require.Eventually(t, func() bool { return count(t, db, memory.Filter{Namespace: "a"}) == 1 }, 10*time.Second, 10*time.Millisecond)
	require.Eventually(t, func() bool { return !w.Status(ctx).EmbedderOK }, 10*time.Second, 10*time.Millisecond)
	e.down.Store(false)
	w.Nudge()
	require.Eventually(t, func() bool {
		return w.Status(ctx).EmbedderOK && count(t, db, memory.Filter{Namespace: "a", NoVector: true}) == 0
	}, 10*time.Second, 10*time.Millisecond)
}

// loadingStore is a store whose index is still loading, and which fails
// the test if asked which memories lack a vector meanwhile (the embedded
// store would wait for its load there).
type loadingStore struct {
	memory.Store
	t       *testing.T
	loading atomic.Bool
}

func (s *loadingStore) Loading() (memory.Progress, bool) { return memory.Progress{}, s.loading.Load() }

func (s *loadingStore) Scroll(ctx context.Context, f memory.Filter, cursor string, limit int) ([]memory.Memory, string, error) {
	if f.NoVector && s.loading.Load() {
		s.t.Error("the backfill asked for memories without a vector while the index loads")
	}
	return s.Store.Scroll(ctx, f, cursor, limit)
}

// While the store's index loads, the writer stores the queue's turns and
// leaves the backfill for later; once loaded, the backfill runs.
func TestWriterStoresTurnsWhileTheIndexLoads(t *testing.T) {
	db := openDB(t, t.TempDir())
	defer db.Close()
	require.NoError(t, db.Upsert(context.Background(), memory.Memory{ID: memory.NewID(), Namespace: "a", Type: memory.Raw,
		Text: "User: left without a vector\nAssistant: ok", Time: time.Now()}))
	ls := &loadingStore{Store: db, t: t}
	ls.loading.Store(true)
	w := fastWriter(ls, db, &flakyEmbedder{})
	w.Start()
	defer w.Close()
	w.Record(context.Background(), turn("a", 1))
	require.Eventually(t, func() bool { return count(t, db, memory.Filter{Namespace: "a"}) == 2 }, 10*time.Second, 10*time.Millisecond)
	assert.Equal(t, 1, count(t, db, memory.Filter{Namespace: "a", NoVector: true}), "no backfill while loading")
	ls.loading.Store(false)
	w.Nudge()
	require.Eventually(t, func() bool { return count(t, db, memory.Filter{Namespace: "a", NoVector: true}) == 0 }, 10*time.Second, 10*time.Millisecond)
}

// settleCounting is the embedded store, counting Settle's calls.
type settleCounting struct {
	*embedded.DB
	settles atomic.Int64
}

func (s *settleCounting) Settle(ctx context.Context, ms []memory.Memory, done []string) error {
	s.settles.Add(1)
	return s.DB.Settle(ctx, ms, done)
}

// A store that keeps the queue too stores turns and takes them off the
// queue in one transaction (Settle); one apart from the queue is written,
// then the queue told.
func TestWriterSettlesWhereTheQueueIsTheStore(t *testing.T) {
	for _, apart := range []bool{false, true} {
		db := openDB(t, t.TempDir())
		s := &settleCounting{DB: db}
		var q memory.Queue = s
		if apart {
			q = db
		}
		w := fastWriter(s, q, &flakyEmbedder{})
		w.Start()
		for i := range 20 {
			require.NoError(t, w.Record(context.Background(), turn("a", i)))
		}
		require.Eventually(t, func() bool { return count(t, db, memory.Filter{Namespace: "a"}) == 20 }, 10*time.Second, 10*time.Millisecond)
		w.Close()
		pending, err := db.Pending(context.Background(), 100)
		require.NoError(t, err)
		assert.Empty(t, pending, "apart=%v", apart)
		if apart {
			assert.Zero(t, s.settles.Load())
		} else {
			assert.Positive(t, s.settles.Load())
		}
		require.NoError(t, db.Close())
	}
}
