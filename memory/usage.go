package memory

import (
	"context"
	"sync"
	"time"
)

// Use is how often a memory was injected into an answer, and when last.
type Use struct {
	ID, Namespace string
	Count         int
	Last          time.Time
}

// UsageStore keeps the counts (the local file, whichever store holds the
// memories).
type UsageStore interface {
	// AddUsage adds each Use's Count to the memory's, and keeps the later
	// Last.
	AddUsage(ctx context.Context, uses ...Use) error
	// Usage returns the counts of ids that have any.
	Usage(ctx context.Context, ids ...string) (map[string]Use, error)
	// DeleteUsage drops the counts of ids, or with ns and no ids, of
	// every memory of ns.
	DeleteUsage(ctx context.Context, ns string, ids ...string) error
}

// Usage counts the answers each memory was injected into, off the chat
// path: Note only adds to a map, and Flush (every few seconds, and at
// close) writes what was noted. A crash loses at most what was noted
// since the last flush.
type Usage struct {
	store   UsageStore
	mu      sync.Mutex
	pending map[string]*Use
}

// NewUsage returns a counter kept in store.
func NewUsage(store UsageStore) *Usage {
	return &Usage{store: store, pending: map[string]*Use{}}
}

// maxPendingUses bounds what waits for a flush: past it a note is
// dropped (a count is a statistic, never worth memory without bound).
const maxPendingUses = 1 << 16

// Note counts one answer that memories ids of ns were injected into.
func (u *Usage) Note(ns string, ids []string, at time.Time) {
	if u == nil || len(ids) == 0 {
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, id := range ids {
		p := u.pending[id]
		if p == nil {
			if len(u.pending) >= maxPendingUses {
				continue
			}
			p = &Use{ID: id, Namespace: ns}
			u.pending[id] = p
		}
		p.Count++
		if at.After(p.Last) {
			p.Last = at
		}
	}
}

// Flush writes what was noted; on failure it is kept for the next one.
func (u *Usage) Flush(ctx context.Context) error {
	if u == nil {
		return nil
	}
	u.mu.Lock()
	pending := u.pending
	u.pending = map[string]*Use{}
	u.mu.Unlock()
	if len(pending) == 0 {
		return nil
	}
	uses := make([]Use, 0, len(pending))
	for _, p := range pending {
		uses = append(uses, *p)
	}
	if err := u.store.AddUsage(ctx, uses...); err != nil {
		u.mu.Lock()
		for _, p := range uses {
			if q := u.pending[p.ID]; q != nil {
				q.Count += p.Count
				if p.Last.After(q.Last) {
					q.Last = p.Last
				}
			} else if len(u.pending) < maxPendingUses {
				u.pending[p.ID] = &p
			}
		}
		u.mu.Unlock()
		return err
	}
	return nil
}

// Of returns the counts of ids, those not yet flushed included.
func (u *Usage) Of(ctx context.Context, ids ...string) map[string]Use {
	if u == nil || len(ids) == 0 {
		return nil
	}
	out, err := u.store.Usage(ctx, ids...)
	if err != nil || out == nil {
		out = map[string]Use{}
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, id := range ids {
		if p := u.pending[id]; p != nil {
			o := out[id]
			o.ID, o.Namespace, o.Count = id, p.Namespace, o.Count+p.Count
			if p.Last.After(o.Last) {
				o.Last = p.Last
			}
			out[id] = o
		}
	}
	return out
}

// Forget drops the counts of ids (or, with ns and no ids, of every memory
// of ns): an erased memory leaves none.
func (u *Usage) Forget(ctx context.Context, ns string, ids ...string) error {
	if u == nil {
		return nil
	}
	u.mu.Lock()
	for id, p := range u.pending {
		if len(ids) == 0 && p.Namespace == ns {
			delete(u.pending, id)
		}
	}
	for _, id := range ids {
		delete(u.pending, id)
	}
	u.mu.Unlock()
	return u.store.DeleteUsage(ctx, ns, ids...)
}
