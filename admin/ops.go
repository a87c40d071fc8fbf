package admin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"reflect"
	"time"

	"github.com/vera-proxy/vera/memory"
)

// The memory operations the admin routes and the MCP tools share: one
// search, one way to add and to rewrite a memory.

// Search finds memories as chats do (hybrid, the same threshold), scored.
func (m *Memories) Search(ctx context.Context, f memory.Filter, q string, limit int) ([]memory.Hit, error) {
	thr := m.Threshold
	if thr <= 0 {
		thr = 0.5
	}
	query := memory.Query{Filter: f, Text: q, Limit: limit, Threshold: thr}
	if m.Embed != nil {
		if v, err := m.Embed(ctx, []string{q}); err == nil && len(v) == 1 {
			query.Vector = v[0]
		}
	}
	return m.Store.Search(ctx, query)
}

// Latest returns the newest memories matching f.
func (m *Memories) Latest(ctx context.Context, f memory.Filter, limit int) ([]memory.Memory, error) {
	return m.Store.Latest(ctx, f, limit)
}

// Get returns a memory of namespace ns ("": any); memory.ErrNotFound
// when there is none there.
func (m *Memories) Get(ctx context.Context, ns, id string) (memory.Memory, error) {
	got, err := m.Store.Get(ctx, id)
	if err == nil && ns != "" && got.Namespace != ns {
		err = memory.ErrNotFound // another namespace's is not found
	}
	if errors.Is(err, memory.ErrNotFound) {
		return memory.Memory{}, fmt.Errorf("%w: %q", memory.ErrNotFound, id)
	}
	return got, err
}

// Add stores a memory written by hand, counted and embedded. A text over
// MaxTokens is refused with memory.ErrTooLong, and nothing is stored.
func (m *Memories) Add(ctx context.Context, mem memory.Memory) (memory.Memory, error) {
	if err := m.CheckLength(mem.Text); err != nil {
		return memory.Memory{}, err
	}
	out, err := m.store(ctx, mem)
	if err == nil {
		m.History.Record(ctx, actor(ctx), memory.Created, out)
	}
	return out, err
}

// store counts, embeds and stores mem.
func (m *Memories) store(ctx context.Context, mem memory.Memory) (memory.Memory, error) {
	ms := []memory.Memory{mem}
	m.prepare(ctx, ms)
	if err := m.Store.Upsert(ctx, ms...); err != nil {
		return memory.Memory{}, err
	}
	return ms[0], nil
}

// actor is who changes memories under ctx: the admin API unless told.
func actor(ctx context.Context) string { return memory.ActorOf(ctx, memory.ViaAdmin) }

// Rewrite stores a changed memory (embedded again) and takes its old form
// out of the conversations that carry it. A new text over MaxTokens is
// refused with memory.ErrTooLong; the text the memory already has is not,
// so a memory stored before the cap can still be hidden, restored or
// marked.
func (m *Memories) Rewrite(ctx context.Context, mem memory.Memory) (memory.Memory, error) {
	old, gerr := m.Store.Get(ctx, mem.ID)
	if err := m.CheckLength(mem.Text); err != nil {
		if gerr != nil || old.Text != mem.Text {
			return memory.Memory{}, err
		}
	}
	mem.Vector = nil
	out, err := m.store(ctx, mem)
	if err != nil {
		return out, err
	}
	m.withdraw("", mem.ID)
	action := memory.Edited
	switch {
	case gerr != nil:
		action = memory.Created
	case old.Type != memory.Forgotten && mem.Type == memory.Forgotten:
		action = memory.Hidden
	case old.Type == memory.Forgotten && mem.Type != memory.Forgotten:
		action = memory.Restored
	}
	if gerr == nil && action == memory.Edited && old.Text == out.Text && reflect.DeepEqual(old.Metadata, out.Metadata) {
		return out, nil // nothing changed: nothing to record
	}
	m.History.Record(ctx, actor(ctx), action, out)
	switch {
	case action == memory.Hidden:
		m.removed(ctx, old)
	case gerr == nil && old.Text != mem.Text:
		// Rewritten by hand: it is the person's own now.
		if err := m.Withheld.Release(ctx, mem.Namespace, time.Time{}, mem.ID); err != nil {
			slog.Warn("releasing a memory rewritten by hand", "namespace", mem.Namespace, "error", err)
		}
	}
	return out, nil
}

// removed withholds what the curator wrote from r (forgotten or erased,
// as it was before). It is out of chats even when keeping that on disk
// fails, which is logged.
func (m *Memories) removed(ctx context.Context, r memory.Memory) {
	if _, err := m.Withheld.Removed(ctx, r); err != nil {
		slog.Warn("withholding what a removed memory lives on in", "namespace", r.Namespace, "error", err)
	}
}

// Erase erases memory id: from the store, the durable queue if its turn
// still waits there, the writer on its way, the conversations (those that
// told it are forgotten), its usage. What the curator wrote from it is
// withheld first, so a retried erase still does; its history records the
// erasure.
func (m *Memories) Erase(ctx context.Context, id string) error {
	was, gerr := m.Store.Get(ctx, id)
	if gerr == nil {
		if was.Type == memory.Forgotten {
			// Withheld when it was forgotten: its text is kept (in
			// memory) for the rewrite, should one still be due.
			m.Withheld.Note(was.Namespace, was)
		} else {
			m.removed(ctx, was)
		}
	}
	if m.Forget != nil {
		m.Forget(id)
	}
	if m.Queue != nil {
		if err := m.Queue.Done(ctx, id); err != nil {
			return httpError(http.StatusServiceUnavailable, "the local queue: "+err.Error())
		}
	}
	if err := m.Store.Delete(ctx, id); err != nil {
		return httpError(http.StatusServiceUnavailable, "writing the store: "+err.Error())
	}
	if m.Conversations != nil {
		m.Conversations.Erase("", id)
	}
	if err := m.Usage.Forget(ctx, "", id); err != nil {
		return httpError(http.StatusServiceUnavailable, "the usage counts: "+err.Error())
	}
	if gerr != nil {
		return nil // never stored (still queued): it has no history
	}
	m.History.Record(ctx, actor(ctx), memory.Erased, was)
	if err := m.Withheld.Release(ctx, was.Namespace, time.Time{}, id); err != nil {
		slog.Warn("an erased memory was withheld", "namespace", was.Namespace, "error", err)
	}
	return nil
}

// Withholds reports whether memory id is withheld from chats until it is
// rewritten.
func (m *Memories) Withholds(id string) bool { return m.Withheld.Is(id) }

// CheckLength returns memory.ErrTooLong, wrapped with the figures, when
// text is over MaxTokens: what a person or an agent writes is refused, not
// cut behind their back.
func (m *Memories) CheckLength(text string) error {
	return memory.CheckLength(m.Tokens, text, m.MaxTokens)
}

// prepare counts the tokens of memories added or edited by hand and, when
// the embedder answers, gives them vectors.
func (m *Memories) prepare(ctx context.Context, ms []memory.Memory) {
	for i := range ms {
		memory.Classify(&ms[i])
		if m.Tokens != nil {
			ms[i].Tokens = m.Tokens.Count(ms[i].Text)
		}
	}
	if m.Embed == nil {
		return
	}
	texts := make([]string, len(ms))
	for i, mm := range ms {
		texts[i] = mm.Text
	}
	if vs, err := m.Embed(ctx, texts); err == nil && len(vs) == len(ms) {
		for i := range ms {
			ms[i].Vector = vs[i]
		}
	}
}
