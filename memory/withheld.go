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
// rewrite. It returns the ids it withheld: a memory withheld already is
// withheld again, from now, so that a rewrite under way, which did not
// know of this removal, does not release it. What it withholds is out of
// chats at once; keeping it on disk may fail (the error says so), and
// then it is withheld until vera stops.
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
	// What was written from a withheld memory may say what it said too:
	// the closure.
	now := time.Now().UTC()
	var add []Withhold
	from := removed
	for len(from) > 0 {
		var next []Memory
		for _, d := range derived {
			if gone[d.ID] {
				continue
			}
			for _, r := range from {
				if DerivedFrom(d, r) {
					add = append(add, Withhold{ID: d.ID, Namespace: ns, Because: r.ID, At: now})
					gone[d.ID], next = true, append(next, d)
					break
				}
			}
		}
		from = next
	}
	w.mu.Lock()
	ids := make([]string, len(add))
	for i, x := range add {
		w.ids[x.ID], ids[i] = x, x.ID
	}
	w.mu.Unlock()
	w.Note(ns, removed...)
	if len(ids) > 0 && w.Withdraw != nil {
		w.Withdraw(ids...)
	}
	var serr error
	if len(add) > 0 {
		if err := w.store.AddWithheld(context.WithoutCancel(ctx), add...); err != nil {
			serr = fmt.Errorf("keeping on disk what is withheld (it is withheld until vera stops): %w", err)
		}
	}
	if w.pending(ns) && w.Rewrite != nil {
		w.Rewrite(ns)
	}
	return ids, serr
}

// Note keeps the text of removed, for the rewrite of ns's withheld
// memories, when some are.
func (w *Withheld) Note(ns string, removed ...Memory) {
	if w == nil || !w.pending(ns) {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, r := range removed {
		if r.Text != "" && !slices.Contains(w.removed[ns], r.Text) {
			w.removed[ns] = append(w.removed[ns], r.Text)
		}
	}
	if n := len(w.removed[ns]); n > maxRemovedTexts {
		w.removed[ns] = w.removed[ns][n-maxRemovedTexts:]
	}
}

// pending reports whether ns has withheld memories.
func (w *Withheld) pending(ns string) bool {
	w.mu.RLock()
	defer w.mu.RUnlock()
	for _, x := range w.ids {
		if x.Namespace == ns {
			return true
		}
	}
	return false
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

// Release ends the withholding of ids of ns that were withheld at or
// before asOf (rewritten from what was known then; zero: any time), or
// are gone. Once none of ns is left, its removed texts are dropped.
func (w *Withheld) Release(ctx context.Context, ns string, asOf time.Time, ids ...string) error {
	if w == nil || len(ids) == 0 {
		return nil
	}
	w.mu.Lock()
	var held []string
	for _, id := range ids {
		if x, ok := w.ids[id]; ok && (asOf.IsZero() || !x.At.After(asOf)) {
			held = append(held, id)
			delete(w.ids, id)
		}
	}
	left := false
	for _, x := range w.ids {
		left = left || x.Namespace == ns
	}
	if !left {
		delete(w.removed, ns)
	}
	w.mu.Unlock()
	if len(held) == 0 {
		return nil
	}
	if err := w.store.DeleteWithheld(context.WithoutCancel(ctx), ns, held...); err != nil {
		return fmt.Errorf("keeping on disk that rewritten memories are no longer withheld: %w", err)
	}
	return nil
}

// Namespaces lists the namespaces with withheld memories.
func (w *Withheld) Namespaces() []string {
	if w == nil {
		return nil
	}
	w.mu.RLock()
	defer w.mu.RUnlock()
	var out []string
	for _, x := range w.ids {
		if !slices.Contains(out, x.Namespace) {
			out = append(out, x.Namespace)
		}
	}
	return out
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

// MetaSeen is the metadata key of the ids a curator run showed its model
// (the curated memories of its sample, the profile) on each memory the run
// wrote.
const MetaSeen = "seen"

// DerivedFrom reports whether d, written by the curator, may say what r
// said: d was written while r was current, and could have read it.
//   - A memory written from the same turns as r (a common source id), or
//     by a run that was shown r (d's "seen" ids), may.
//   - From a raw turn: the curated memories and rules whose source span
//     and chats hold it, and every profile written since (a profile
//     carries what each run read on to the next).
//   - From a curated memory or the profile: every profile written since
//     (in r's run too); curated memories and rules only as above. A
//     memory written before runs said what they were shown: all those
//     written after r, as a run may have been shown it.
//   - From a rule (never shown to the curator): as above only, and the
//     profile of the run that wrote it.
func DerivedFrom(d, r Memory) bool {
	if d.ID == r.ID {
		return false
	}
	dw, rw := writtenAt(d).Truncate(time.Second), writtenAt(r).Truncate(time.Second)
	if dw.Before(rw) {
		return false
	}
	if sharesSource(d, r) || slices.Contains(idsOf(d.Metadata[MetaSeen]), r.ID) {
		return true
	}
	switch {
	case r.Type == Rule:
		return d.Type == Profile && dw.Equal(rw)
	case d.Type == Profile:
		return true
	case r.Type != Raw:
		_, told := d.Metadata[MetaSeen]
		return !told && dw.After(rw)
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
	chats := idsOf(src["chats"])
	rsrc, _ := r.Metadata[MetaSource].(map[string]any)
	chat, _ := rsrc["chat_id"].(string)
	if len(chats) == 0 || chat == "" {
		return true
	}
	return slices.Contains(chats, chat)
}

// idsOf reads a list of strings from metadata (decoded JSON or as
// written).
func idsOf(v any) []string {
	switch l := v.(type) {
	case []string:
		return l
	case []any:
		out := make([]string, 0, len(l))
		for _, x := range l {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// sharesSource reports whether a and b name a source turn in common.
func sharesSource(a, b Memory) bool {
	bs := idsOf(b.Metadata["source_ids"])
	for _, id := range idsOf(a.Metadata["source_ids"]) {
		if slices.Contains(bs, id) {
			return true
		}
	}
	return false
}
