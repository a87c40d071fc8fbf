package memory

import (
	"context"
	"sync"
	"time"
)

// What changed a memory (an Entry's Action).
const (
	Created    = "created"
	Edited     = "edited"
	Hidden     = "forgotten"
	Restored   = "restored"
	Superseded = "superseded"
	// Distilled: a raw turn the curator distilled into curated memories,
	// and deleted.
	Distilled = "curated"
	// Deleted: removed by vera itself (a turn a regenerate replaced, a
	// forgotten memory past its 30 days, a turn the curator dropped).
	Deleted = "deleted"
	// Erased: removed, to the byte, because a person or an agent asked.
	Erased = "erased"
)

// Entry is one change of one memory, in its namespace's history. It holds
// no text of the memory: an erased memory leaves nothing of what it said
// there. Actor is who made the change, as Source.Via names the ways in
// (chat, command, curator, admin, mcp, import).
type Entry struct {
	At        time.Time `json:"at"`
	Action    string    `json:"action"`
	Actor     string    `json:"actor"`
	ID        string    `json:"id"`
	Namespace string    `json:"namespace,omitempty"`
}

// AuditQuery selects a page of history, newest first.
type AuditQuery struct {
	Namespace string // "": every namespace
	Since     time.Time
	Cursor    string
	Limit     int
}

// HistoryStore keeps the history (in the local file, whichever store
// holds the memories).
type HistoryStore interface {
	AddHistory(ctx context.Context, es ...Entry) error
	// HistoryOf returns a memory's entries, oldest first.
	HistoryOf(ctx context.Context, id string) ([]Entry, error)
	// Audit returns a page of entries, newest first, and the cursor of
	// the next ("" at the end).
	Audit(ctx context.Context, q AuditQuery) ([]Entry, string, error)
	// DeleteHistory drops every entry of namespace ns.
	DeleteHistory(ctx context.Context, ns string) error
}

// History records every change of a memory. Record writes at once; what
// a failing store refuses is kept (up to a bound) and written by the next
// Flush, so a short outage loses no entry.
type History struct {
	store   HistoryStore
	mu      sync.Mutex
	pending []Entry
	now     func() time.Time
}

// NewHistory returns a history kept in store.
func NewHistory(store HistoryStore) *History {
	return &History{store: store, now: time.Now}
}

// maxPendingEntries bounds what waits for a store that refuses writes.
const maxPendingEntries = 1 << 16

// Actors, for a context: the changes made under it are theirs.
type actorKey struct{}

// WithActor returns ctx whose changes are actor's.
func WithActor(ctx context.Context, actor string) context.Context {
	return context.WithValue(ctx, actorKey{}, actor)
}

// ActorOf is the actor WithActor put in ctx, or def.
func ActorOf(ctx context.Context, def string) string {
	if a, ok := ctx.Value(actorKey{}).(string); ok && a != "" {
		return a
	}
	return def
}

// Record writes one entry per memory of ms: action, by actor, now.
func (h *History) Record(ctx context.Context, actor, action string, ms ...Memory) {
	if h == nil || len(ms) == 0 {
		return
	}
	at := h.now().UTC()
	es := make([]Entry, len(ms))
	for i, m := range ms {
		es[i] = Entry{At: at, Action: action, Actor: actor, ID: m.ID, Namespace: m.Namespace}
	}
	h.write(ctx, es)
}

// RecordIDs is Record for memories known by id, all of namespace ns.
func (h *History) RecordIDs(ctx context.Context, actor, action, ns string, ids ...string) {
	if h == nil || len(ids) == 0 {
		return
	}
	ms := make([]Memory, len(ids))
	for i, id := range ids {
		ms[i] = Memory{ID: id, Namespace: ns}
	}
	h.Record(ctx, actor, action, ms...)
}

// write stores es after what waits, or keeps them for the next Flush.
func (h *History) write(ctx context.Context, es []Entry) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.pending) > 0 {
		if len(h.pending)+len(es) <= maxPendingEntries {
			h.pending = append(h.pending, es...)
		}
		return // the order stays: Flush writes them after those before
	}
	if err := h.store.AddHistory(context.WithoutCancel(ctx), es...); err != nil {
		h.pending = append(h.pending, es[:min(len(es), maxPendingEntries)]...)
	}
}

// Flush writes what a failing store refused before.
func (h *History) Flush(ctx context.Context) error {
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.pending) == 0 {
		return nil
	}
	if err := h.store.AddHistory(ctx, h.pending...); err != nil {
		return err
	}
	h.pending = nil
	return nil
}

// Of returns memory id's history, oldest first, what waits included.
func (h *History) Of(ctx context.Context, id string) ([]Entry, error) {
	if h == nil {
		return []Entry{}, nil
	}
	es, err := h.store.HistoryOf(ctx, id)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, e := range h.pending {
		if e.ID == id {
			es = append(es, e)
		}
	}
	if es == nil {
		es = []Entry{}
	}
	return es, nil
}

// Audit returns a page of the history, newest first.
func (h *History) Audit(ctx context.Context, q AuditQuery) ([]Entry, string, error) {
	if h == nil {
		return []Entry{}, "", nil
	}
	if err := h.Flush(ctx); err != nil {
		return nil, "", err
	}
	return h.store.Audit(ctx, q)
}

// Forget drops namespace ns's history: a person erased leaves none.
func (h *History) Forget(ctx context.Context, ns string) error {
	if h == nil {
		return nil
	}
	h.mu.Lock()
	kept := h.pending[:0]
	for _, e := range h.pending {
		if e.Namespace != ns {
			kept = append(kept, e)
		}
	}
	h.pending = kept
	h.mu.Unlock()
	return h.store.DeleteHistory(ctx, ns)
}
