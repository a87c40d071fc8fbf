package memory

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vera-proxy/vera/text"
)

// Writer takes finished turns off the request path and makes sure each
// ends up in the store exactly once: Record hands a turn to a committer
// goroutine, which commits it to the durable local queue (one write, one
// sync, for every turn that arrived meanwhile: group commit) and only
// then lets Record return; a worker then
// embeds it (if it can), upserts it by its fixed ID, and only then removes
// it from the queue. Whatever fails is retried with backoff, also after a
// restart. A turn stored while the embedder is down is searchable lexically
// at once and gets its vector from the backfill once the embedder is back.
type Writer struct {
	store    Store
	queue    Queue
	embedder Embedder // nil: lexical memory only
	tokens   *text.Tokenizer
	log      *slog.Logger

	// EmbedTimeout bounds one embedding call; 0 means 60s (a cold model
	// load can take that long).
	EmbedTimeout time.Duration
	// MaxBackoff caps the wait between retries; 0 means one minute.
	MaxBackoff time.Duration
	// RetryInterval is how often a down embedder is tried again for the
	// backfill; 0 means 30s.
	RetryInterval time.Duration
	// MaxTurnTokens caps a stored turn (memory.max_turn_tokens); 0 means
	// DefaultMaxTurnTokens.
	MaxTurnTokens int
	// History records each turn stored, and each a regenerate replaced;
	// nil: none.
	History *History

	in chan pending
	// overflow holds turns that found in full; more tells the committer.
	overflowMu sync.Mutex
	overflow   []pending
	more       chan struct{}
	kick       chan struct{}
	closing    chan struct{}
	done       sync.WaitGroup
	closeOne   sync.Once

	// storing is held while a batch goes from the queue to the store, so
	// that a memory forgotten meanwhile is either skipped or deleted after.
	storing   sync.Mutex
	forgotIDs map[string]time.Time // forgotten memories, and when
	forgotNS  map[string]time.Time // forgotten namespaces: turns from before go

	needBackfill atomic.Bool
	embedOK      atomic.Bool
	storeOK      atomic.Bool
	// The last failure of each kind ("commit": turns into the queue; "queue": reading it; "store", "embedder").
	errMu   sync.Mutex
	lastErr map[string]string

	// settler is the store when it keeps the queue too: it stores and
	// dequeues in one transaction.
	settler Settler
}

// NewWriter returns a Writer; call Start before Record.
func NewWriter(store Store, queue Queue, embedder Embedder, tokens *text.Tokenizer, logger *slog.Logger) *Writer {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	w := &Writer{
		store: store, queue: queue, embedder: embedder, tokens: tokens, log: logger,
		in: make(chan pending, 4096), more: make(chan struct{}, 1), kick: make(chan struct{}, 1), closing: make(chan struct{}),
		lastErr: map[string]string{},
	}
	if s, ok := store.(Settler); ok && same(store, queue) {
		w.settler = s
	}
	w.embedOK.Store(embedder != nil)
	w.storeOK.Store(true)
	return w
}

// Start runs the committer and the worker until Close.
func (w *Writer) Start() {
	w.done.Add(2)
	go w.commit()
	go w.work()
}

// pending is a turn on its way to the queue, and where to say it arrived.
type pending struct {
	m    Memory
	done chan struct{}
}

// ErrCommitSlow is returned by Record when the local queue did not commit a
// turn in time. The turn is not lost from this process: it is committed as
// soon as the disk allows.
var ErrCommitSlow = errors.New("the local queue did not commit the turn in time")

// Record hands over a finished turn and returns once it is committed to
// the durable queue, so that a crash from then on loses nothing, or when
// ctx ends first (ErrCommitSlow; the turn is still committed later, and
// the failure shows in Status). Concurrent calls share one commit.
func (w *Writer) Record(ctx context.Context, t Turn) error {
	p := pending{m: w.memoryOf(t), done: make(chan struct{})}
	select {
	case w.in <- p:
	default:
		// Thousands of turns are waiting for the disk: keep this one
		// aside rather than drop it or make the caller wait for room.
		w.overflowMu.Lock()
		w.overflow = append(w.overflow, p)
		w.overflowMu.Unlock()
		select {
		case w.more <- struct{}{}:
		default:
		}
	}
	select {
	case <-p.done:
		return nil
	case <-ctx.Done():
		w.fail("commit", fmt.Errorf("a turn was not committed within the time an answer may be held; answers are released before their turns are on disk: %w", ErrCommitSlow))
		return ErrCommitSlow
	}
}

// Close commits every recorded turn to the queue and stops. Turns not yet
// in the store stay queued for the next start. Record must not be called
// after Close: a turn recorded then is not committed.
func (w *Writer) Close() {
	w.closeOne.Do(func() {
		close(w.closing)
		w.done.Wait()
	})
}

// Nudge makes the writer retry what failed (a store write, an embedding,
// the backfill) now rather than at its next retry time: call it when a
// dependency is known to be back.
func (w *Writer) Nudge() {
	w.needBackfill.Store(true)
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// Status is the writer's view of its dependencies, for /healthz.
type Status struct {
	EmbedderOK, StoreOK bool
	// Pending counts turns committed locally but not yet in the store.
	Pending int
	// EmbedderError and StoreError are the last failures, while failing.
	EmbedderError, StoreError string
}

// Status returns the current status.
func (w *Writer) Status(ctx context.Context) Status {
	st := Status{EmbedderOK: w.embedOK.Load(), StoreOK: w.storeOK.Load()}
	st.Pending, _ = w.queue.Len(ctx)
	w.errMu.Lock()
	defer w.errMu.Unlock()
	if !st.EmbedderOK {
		st.EmbedderError = w.lastErr["embedder"]
	}
	if !st.StoreOK {
		st.StoreError = w.lastErr["store"]
	}
	for _, what := range []string{"queue", "commit"} {
		if q := w.lastErr[what]; q != "" {
			st.StoreOK, st.StoreError = false, "local queue: "+q
		}
	}
	return st
}

func (w *Writer) memoryOf(t Turn) Memory {
	m := Memory{
		ID: t.ID, Namespace: t.Namespace, Type: Raw,
		Time: t.Time.UTC(), Model: t.Model,
	}
	if m.ID == "" {
		m.ID = NewID()
	}
	if t.Replaces != "" && t.Replaces != m.ID {
		m.Metadata = map[string]any{MetaReplaces: t.Replaces}
	}
	if t.Source.Via != "" {
		m.Metadata = WithSource(m.Metadata, t.Source)
	}
	if len(t.Private) > 0 {
		m.Metadata = MarkPrivate(m.Metadata, true, t.Private...)
	}
	if m.Namespace == "" {
		m.Namespace = DefaultNamespace
	}
	if m.Time.IsZero() {
		m.Time = time.Now().UTC()
	}
	m.Text, m.Tokens = w.exchange(t.User, t.Assistant)
	return m
}

// exchange renders a turn for the queue, capped (CapExchange). A turn
// whose bytes fit the cap (a token is at least a byte) is not counted
// here, at the end of its answer: its count stays 0 until the writer
// counts it before storing it (counted).
func (w *Writer) exchange(user, assistant string) (string, int) {
	limit := w.MaxTurnTokens
	if limit <= 0 {
		limit = DefaultMaxTurnTokens
	}
	if len(user)+len(assistant) <= limit-exchangeOverhead {
		return FormatExchange(strings.TrimSpace(user), strings.TrimSpace(assistant)), 0
	}
	return CapExchange(w.tokens, user, assistant, w.MaxTurnTokens)
}

// counted classifies the batch's memories (Classify) and fills in the token counts that exchange left for later.
func (w *Writer) counted(batch []Memory) {
	for i := range batch {
		Classify(&batch[i]) // a turn that holds anything private is private whole
		if m := &batch[i]; m.Tokens == 0 && m.Type == Raw && m.Text != "" {
			if w.tokens == nil {
				m.Tokens = (len(m.Text) + 3) / 4
			} else {
				m.Tokens = w.tokens.Count(m.Text)
			}
		}
	}
}

// commit moves recorded turns into the durable queue, batching whatever
// has arrived together into one write (one sync), and tells each
// turn's Record when it is on disk.
func (w *Writer) commit() {
	defer w.done.Done()
	for {
		select {
		case p := <-w.in:
			w.commitBatch(w.gather([]pending{p}))
		case <-w.more:
			w.commitBatch(w.gather(nil))
		case <-w.closing:
			for b := w.gather(nil); len(b) > 0; b = w.gather(nil) {
				w.commitBatch(b)
			}
			return
		}
	}
}

// gather adds to batch what else is waiting, up to 256 turns.
func (w *Writer) gather(batch []pending) []pending {
	w.overflowMu.Lock()
	n := min(len(w.overflow), max(256-len(batch), 0))
	batch = append(batch, w.overflow[:n]...)
	w.overflow = w.overflow[n:]
	if len(w.overflow) > 0 {
		select {
		case w.more <- struct{}{}:
		default:
		}
	}
	w.overflowMu.Unlock()
	for len(batch) < 256 {
		select {
		case p := <-w.in:
			batch = append(batch, p)
		default:
			return batch
		}
	}
	return batch
}

// commitBatch enqueues batch, retrying while the disk refuses (a turn is
// never dropped), then releases every Record waiting on it. While closing
// it gives up after closeRetry, so that a dead disk cannot hang shutdown.
func (w *Writer) commitBatch(batch []pending) {
	if len(batch) == 0 {
		return
	}
	ms := make([]Memory, len(batch))
	for i, p := range batch {
		ms[i] = p.m
	}
	var backoff time.Duration
	var closingSince time.Time
	for {
		err := w.queue.Enqueue(context.Background(), ms...)
		if err == nil {
			w.ok("commit")
			break
		}
		// The local disk refused: keep the turns in memory and retry.
		w.fail("commit", err)
		select {
		case <-w.closing:
			if closingSince.IsZero() {
				closingSince = time.Now()
			} else if time.Since(closingSince) > closeRetry {
				w.log.Error("stopping with turns the local queue refused", slog.Int("turns", len(ms)), slog.Any("error", err))
				return
			}
		default:
		}
		backoff = w.next(backoff)
		time.Sleep(backoff)
	}
	// The worker is woken first: the goroutine readied last runs next on
	// this core, and that should be a held answer (the batch's last), not
	// the worker, which embeds and stores the turns.
	select {
	case w.kick <- struct{}{}:
	default:
	}
	for _, p := range batch {
		close(p.done)
	}
}

// backfill embeds stored memories that have no vector yet.
func (w *Writer) backfill() {
	if w.embedder == nil {
		return
	}
	if l, ok := w.store.(Loader); ok {
		if _, loading := l.Loading(); loading {
			// Which memories lack a vector is known once the index is
			// loaded; until then the queue's turns go on being stored,
			// and the backfill waits for the next round.
			return
		}
	}
	ctx := context.Background()
	nss, err := w.store.Namespaces(ctx)
	if err != nil {
		w.fail("store", err)
		return
	}
	for _, ns := range nss {
		cursor := ""
		for {
			select {
			case <-w.closing:
				return
			default:
			}
			page, next, err := w.store.Scroll(ctx, Filter{Namespace: ns, Types: []Type{Raw, Curated}, NoVector: true}, cursor, 64)
			if err != nil {
				w.fail("store", err)
				return
			}
			if len(page) > 0 {
				if !w.embed(page) {
					return
				}
				if err := w.store.SetVectors(ctx, page...); err != nil {
					w.fail("store", err)
					return
				}
			}
			if next == "" {
				break
			}
			cursor = next
		}
	}
	w.needBackfill.Store(false)
}

// Forget makes sure memories deleted by hand never arrive from the queue:
// a batch being stored when it is called is finished first (the caller
// then deletes from the store what it holds), and a later one skips them.
func (w *Writer) Forget(ids ...string) {
	w.storing.Lock()
	defer w.storing.Unlock()
	if w.forgotIDs == nil {
		w.forgotIDs = map[string]time.Time{}
	}
	now := time.Now()
	for _, id := range ids {
		w.forgotIDs[id] = now
	}
	w.pruneForgotten(now)
}

// ForgetNamespace does what Forget does for every turn of ns recorded so
// far.
func (w *Writer) ForgetNamespace(ns string) {
	w.storing.Lock()
	defer w.storing.Unlock()
	if w.forgotNS == nil {
		w.forgotNS = map[string]time.Time{}
	}
	now := time.Now()
	w.forgotNS[ns] = now
	w.pruneForgotten(now)
}

// forgotten reports whether m was forgotten before it was stored;
// w.storing is held.
func (w *Writer) forgotten(m Memory) bool {
	if _, ok := w.forgotIDs[m.ID]; ok {
		return true
	}
	at, ok := w.forgotNS[m.Namespace]
	return ok && !m.Time.After(at)
}

// forgetFor is how long a forgotten id is remembered: far longer than a
// turn waits in the queue while the store is up.
const forgetFor = 24 * time.Hour

func (w *Writer) pruneForgotten(now time.Time) {
	for id, at := range w.forgotIDs {
		if now.Sub(at) > forgetFor {
			delete(w.forgotIDs, id)
		}
	}
	for ns, at := range w.forgotNS {
		if now.Sub(at) > forgetFor {
			delete(w.forgotNS, ns)
		}
	}
}
