package memory

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Derived text follows its source: when a memory is forgotten or erased,
// the curator's memories (curated memories, rules, the profile) written
// while it was current may say what it said. They are withheld from chats
// until they are rewritten without it: by the curator, whose run for that
// namespace starts at once, or by a person's edit.

// Withhold is one withheld memory, and the removed memory that withholds
// it.
type Withhold struct {
	ID, Namespace string
	Because       string
	At            time.Time
}

// WithheldStore keeps what is withheld (the local file).
type WithheldStore interface {
	AddWithheld(ctx context.Context, ws ...Withhold) error
	// AllWithheld returns every withheld memory (read once, at start).
	AllWithheld(ctx context.Context) ([]Withhold, error)
	// DeleteWithheld releases ids of ns, or with no ids every memory of
	// ns.
	DeleteWithheld(ctx context.Context, ns string, ids ...string) error
}

// Withheld knows what is withheld; the chat path asks Is, a map lookup.
type Withheld struct {
	store  WithheldStore
	memory Store
	// Rewrite, when set, starts the curator's rewrite of ns's withheld
	// memories (in the background).
	Rewrite func(ns string)
	// Withdraw, when set, takes newly withheld memories out of the
	// running conversations that carry them.
	Withdraw func(ids ...string)

	mu  sync.RWMutex
	ids map[string]Withhold
	// removed holds, per namespace, the text of what was removed since
	// its withheld memories were last rewritten, for the curator to leave
	// out. Only in memory: an erased text is never written anywhere.
	removed map[string][]string
}

// maxRemovedTexts bounds the removed texts kept per namespace.
const maxRemovedTexts = 64

// NewWithheld reads what store withholds; memories is where the derived
// memories are looked for.
func NewWithheld(ctx context.Context, store WithheldStore, memories Store) (*Withheld, error) {
	all, err := store.AllWithheld(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the withheld memories: %w", err)
	}
	w := &Withheld{store: store, memory: memories, ids: make(map[string]Withhold, len(all)), removed: map[string][]string{}}
	for _, x := range all {
		w.ids[x.ID] = x
	}
	return w, nil
}

// Is reports whether memory id is withheld from chats.
func (w *Withheld) Is(id string) bool {
	if w == nil {
		return false
	}
	w.mu.RLock()
	_, ok := w.ids[id]
	w.mu.RUnlock()
	return ok
}

// Of lists namespace ns's withheld memories.
func (w *Withheld) Of(ns string) []Withhold {
	if w == nil {
		return nil
	}
	w.mu.RLock()
	defer w.mu.RUnlock()
	var out []Withhold
	for _, x := range w.ids {
		if x.Namespace == ns {
			out = append(out, x)
		}
	}
	slices.SortFunc(out, func(a, b Withhold) int { return a.At.Compare(b.At) })
	return out
}

// RemovedTexts is what was removed from ns since the last rewrite, when
// this process saw it.
func (w *Withheld) RemovedTexts(ns string) []string {
	if w == nil {
		return nil
	}
	w.mu.RLock()
	defer w.mu.RUnlock()
	return slices.Clone(w.removed[ns])
}

// Removed withholds what removed (memories of one namespace, as they were
// before they were forgotten or erased) may live on in, and starts the
// rewrite. It returns the ids it withheld.
func (w *Withheld) Removed(ctx context.Context, removed ...Memory) ([]string, error) {
	if w == nil || len(removed) == 0 {
		return nil, nil
	}
	ns := removed[0].Namespace
	derived, err := w.derived(ctx, ns)
	if err != nil {
		return nil, err
	}
	gone := map[string]bool{}
	for _, r := range removed {
		gone[r.ID] = true
	}
	now := time.Now().UTC()
	var add []Withhold
	for _, d := range derived {
		if gone[d.ID] || w.Is(d.ID) {
			continue
		}
		for _, r := range removed {
			if DerivedFrom(d, r) {
				add = append(add, Withhold{ID: d.ID, Namespace: ns, Because: r.ID, At: now})
				break
			}
		}
	}
	if len(add) > 0 {
		if err := w.store.AddWithheld(ctx, add...); err != nil {
			return nil, fmt.Errorf("withholding what the removed memory lives on in: %w", err)
		}
	}
	w.mu.Lock()
	ids := make([]string, len(add))
	for i, x := range add {
		w.ids[x.ID], ids[i] = x, x.ID
	}
	pending := false
	for _, x := range w.ids {
		pending = pending || x.Namespace == ns
	}
	if pending {
		for _, r := range removed {
			if r.Text != "" {
				w.removed[ns] = append(w.removed[ns], r.Text)
			}
		}
		if n := len(w.removed[ns]); n > maxRemovedTexts {
			w.removed[ns] = w.removed[ns][n-maxRemovedTexts:]
		}
	}
	w.mu.Unlock()
	if len(ids) > 0 && w.Withdraw != nil {
		w.Withdraw(ids...)
	}
	if pending && w.Rewrite != nil {
		w.Rewrite(ns)
	}
	return ids, nil
}

// derived lists ns's memories written by the curator.
func (w *Withheld) derived(ctx context.Context, ns string) ([]Memory, error) {
	var out []Memory
	cursor := ""
	for {
		page, next, err := w.memory.Scroll(ctx, Filter{Namespace: ns, Types: []Type{Curated, Rule, Profile}}, cursor, 500)
		if err != nil {
			return nil, fmt.Errorf("reading what the curator wrote: %w", err)
		}
		for _, m := range page {
			if SourceVia(m) == ViaCurator {
				out = append(out, m)
			}
		}
		if next == "" {
			return out, nil
		}
		cursor = next
	}
}

// Release ends the withholding of ids of ns (rewritten, or gone); once
// none of ns is left, its removed texts are dropped.
func (w *Withheld) Release(ctx context.Context, ns string, ids ...string) error {
	if w == nil || len(ids) == 0 {
		return nil
	}
	w.mu.RLock()
	var held []string
	for _, id := range ids {
		if _, ok := w.ids[id]; ok {
			held = append(held, id)
		}
	}
	w.mu.RUnlock()
	if len(held) == 0 {
		return nil
	}
	if err := w.store.DeleteWithheld(ctx, ns, held...); err != nil {
		return fmt.Errorf("releasing rewritten memories: %w", err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, id := range held {
		delete(w.ids, id)
	}
	for _, x := range w.ids {
		if x.Namespace == ns {
			return nil
		}
	}
	delete(w.removed, ns)
	return nil
}

// Forget drops everything of namespace ns (erased).
func (w *Withheld) Forget(ctx context.Context, ns string) error {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	for id, x := range w.ids {
		if x.Namespace == ns {
			delete(w.ids, id)
		}
	}
	delete(w.removed, ns)
	w.mu.Unlock()
	return w.store.DeleteWithheld(ctx, ns)
}

// SourceVia is how m came (metadata.source.via); "" when unknown.
func SourceVia(m Memory) string {
	src, _ := m.Metadata[MetaSource].(map[string]any)
	via, _ := src["via"].(string)
	return via
}

// writtenAt is when m was written: a curator's memory's curated_at (to
// the second), else its time.
func writtenAt(m Memory) time.Time {
	if s, ok := m.Metadata["curated_at"].(string); ok {
		if t, err := time.Parse(time.RFC3339, s); err == nil {
			return t
		}
	}
	return m.Time
}

// DerivedFrom reports whether d, written by the curator, may say what r
// said: d was written while r was current, and could have read it.
//   - The profile carries what every run read on to the next: every
//     profile written since r, in the run that wrote r too.
//   - A curated memory or rule distils the turns of one batch: from a raw
//     turn, those whose source span and chats hold it (all written
//     since, when they do not say).
//   - A run is shown the curated memories and profile kept: from one of
//     those, what a later run wrote, and what shares a source turn with
//     it.
func DerivedFrom(d, r Memory) bool {
	if d.ID == r.ID {
		return false
	}
	dw, rw := writtenAt(d).Truncate(time.Second), writtenAt(r).Truncate(time.Second)
	switch {
	case dw.Before(rw):
		return false
	case d.Type == Profile:
		return true
	case r.Type != Raw:
		return dw.After(rw) || sharesSource(d, r)
	}
	src, _ := d.Metadata[MetaSource].(map[string]any)
	from, ferr := time.Parse(time.RFC3339, fmt.Sprint(src["from"]))
	until, uerr := time.Parse(time.RFC3339, fmt.Sprint(src["until"]))
	if ferr != nil || uerr != nil {
		return true
	}
	if rw.Before(from.Truncate(time.Second)) || rw.After(until) {
		return false
	}
	chats, _ := src["chats"].([]any)
	rsrc, _ := r.Metadata[MetaSource].(map[string]any)
	chat, _ := rsrc["chat_id"].(string)
	if len(chats) == 0 || chat == "" {
		return true
	}
	return slices.Contains(chats, any(chat))
}

// sharesSource reports whether a and b name a source turn in common.
func sharesSource(a, b Memory) bool {
	as, _ := a.Metadata["source_ids"].([]any)
	bs, _ := b.Metadata["source_ids"].([]any)
	for _, id := range as {
		if slices.Contains(bs, id) {
			return true
		}
	}
	return false
}
