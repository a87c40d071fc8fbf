package memory

import (
	"context"
	"log/slog"
	"reflect"
	"slices"
	"time"
)

// The writer's second half: its worker takes the committed turns from
// the queue, embeds them and stores them, retrying while the embedder or
// the store is down.

// closeRetry is how long Close keeps retrying a queue that refuses turns.
const closeRetry = 10 * time.Second

func (w *Writer) next(d time.Duration) time.Duration {
	maxB := w.MaxBackoff
	if maxB <= 0 {
		maxB = time.Minute
	}
	if d <= 0 {
		return 200 * time.Millisecond
	}
	return min(2*d, maxB)
}

// fail records a failure of what, logging it when it is new.
func (w *Writer) fail(what string, err error) {
	w.errMu.Lock()
	old := w.lastErr[what]
	w.lastErr[what] = err.Error()
	w.errMu.Unlock()
	if old != err.Error() {
		w.log.Warn("memory write failed; will retry", slog.String("what", what), slog.Any("error", err))
	}
}

// ok clears the failure of what.
func (w *Writer) ok(what string) {
	w.errMu.Lock()
	delete(w.lastErr, what)
	w.errMu.Unlock()
}

// work drains the queue into the store and backfills missing vectors.
func (w *Writer) work() {
	defer w.done.Done()
	var backoff time.Duration
	every := w.RetryInterval
	if every <= 0 {
		every = 30 * time.Second
	}
	retry := time.NewTicker(every)
	defer retry.Stop()
	w.needBackfill.Store(true) // memories left without vectors by an earlier run
	for {
		progressed, err := w.drain()
		switch {
		case err != nil:
			backoff = w.next(backoff)
		case progressed:
			backoff = 0
			continue
		default:
			backoff = 0
			if w.needBackfill.Load() {
				w.backfill()
			}
		}
		wait := time.Hour
		if backoff > 0 {
			wait = backoff
		}
		select {
		case <-w.closing:
			// Finish what the committer queued, once, without waiting on
			// an outage: leftovers are picked up at the next start.
			if backoff == 0 {
				_, _ = w.drain()
			}
			return
		case <-w.kick:
		case <-retry.C:
		case <-time.After(wait):
		}
	}
}

// drain stores one batch of queued turns. It reports whether it stored
// anything.
func (w *Writer) drain() (bool, error) {
	ctx := context.Background()
	batch, err := w.queue.Pending(ctx, 64)
	if err != nil {
		w.fail("queue", err)
		return false, err
	}
	w.ok("queue")
	if len(batch) == 0 {
		return false, nil
	}
	ids := make([]string, len(batch))
	for i, m := range batch {
		ids[i] = m.ID
	}
	// A regenerated or edited turn replaces the one it redoes, wherever
	// that one is: in the store, or still queued. The old one goes first,
	// so the two are never both found.
	replaced := replacedBy(batch)
	batch = slices.DeleteFunc(batch, func(m Memory) bool { return slices.Contains(replaced, m.ID) })
	w.counted(batch)
	w.embed(batch)
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	done := append(ids, replaced...)
	superseded := replacedMemories(batch) // before storeBatch filters batch in place
	settled, stored, err := w.storeBatch(sctx, batch, replaced, done)
	if err != nil {
		w.storeOK.Store(false)
		w.fail("store", err)
		return false, err
	}
	w.storeOK.Store(true)
	w.ok("store")
	w.History.Record(ctx, ViaChat, Created, stored...)
	w.History.Record(ctx, ViaChat, Superseded, superseded...)
	if settled {
		return true, nil
	}
	if err := w.queue.Done(ctx, done...); err != nil {
		// Stored but still queued: the next drain upserts the same IDs
		// again, which replaces rather than duplicates.
		w.fail("queue", err)
		return false, err
	}
	return true, nil
}

// storeBatch writes a batch: the turns it replaces out, then the batch, less
// what was forgotten meanwhile. Forget waits while it runs, so a memory
// deleted by hand is either skipped here or deleted after. A store that
// keeps the queue too takes done off it in the same transaction
// (settled).
func (w *Writer) storeBatch(ctx context.Context, batch []Memory, replaced, done []string) (settled bool, stored []Memory, err error) {
	w.storing.Lock()
	defer w.storing.Unlock()
	batch = slices.DeleteFunc(batch, w.forgotten) // done with, never stored
	if len(replaced) > 0 {
		if err := w.store.Delete(ctx, replaced...); err != nil {
			return false, nil, err
		}
	}
	if w.settler != nil {
		return true, batch, w.settler.Settle(ctx, batch, done)
	}
	if len(batch) == 0 {
		return false, nil, nil
	}
	return false, batch, w.store.Upsert(ctx, batch...)
}

// same reports whether a and b are the one value (a store that keeps the
// queue too).
func same(a, b any) (ok bool) {
	// == panics on a struct holding values that cannot be compared.
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	t := reflect.TypeOf(a)
	return t != nil && t == reflect.TypeOf(b) && t.Comparable() && a == b
}

// replacedBy lists the turns that turns in batch replace.
func replacedBy(batch []Memory) []string {
	var ids []string
	for _, m := range replacedMemories(batch) {
		ids = append(ids, m.ID)
	}
	return ids
}

// replacedMemories are the turns the batch's replace (by id and
// namespace).
func replacedMemories(batch []Memory) []Memory {
	var out []Memory
	for _, m := range batch {
		if id, ok := m.Metadata[MetaReplaces].(string); ok && id != "" {
			out = append(out, Memory{ID: id, Namespace: m.Namespace})
		}
	}
	return out
}

// embed fills in the vectors of ms; it reports whether it could.
func (w *Writer) embed(ms []Memory) bool {
	if w.embedder == nil {
		return false
	}
	texts := make([]string, len(ms))
	for i, m := range ms {
		texts[i] = m.Text
	}
	timeout := w.EmbedTimeout
	if timeout <= 0 {
		timeout = time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	vecs, err := w.embedder.Embed(ctx, texts)
	if err != nil {
		w.embedOK.Store(false)
		w.needBackfill.Store(true)
		w.fail("embedder", err)
		return false
	}
	if !w.embedOK.Swap(true) {
		w.log.Info("embedder is back")
	}
	w.ok("embedder")
	for i := range ms {
		ms[i].Vector = vecs[i]
	}
	return true
}
