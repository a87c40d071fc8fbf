package memory

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"time"

	"github.com/vera-proxy/vera/text"
)

// Service is the memory operations the admin API and the MCP tools
// share: one search, one way to add, rewrite and erase a memory. It holds
// the store, the durable queue (a deleted memory must not arrive later
// from it), and the embedder for what is added or edited by hand (nil:
// lexical only).
type Service struct {
	Store  Store
	Queue  Queue
	Embed  func(ctx context.Context, texts []string) ([][]float32, error)
	Tokens *text.Tokenizer
	// MaxTokens caps the text of a memory added or edited
	// (max_turn_tokens); 0 means DefaultMaxTurnTokens.
	MaxTokens int
	// Forget and ForgetNamespace tell the writer (Writer) not to
	// store what is deleted, should it be on its way; nil: nothing is.
	Forget          func(ids ...string)
	ForgetNamespace func(ns string)
	// Conversations are the running conversations a deleted, hidden or
	// edited memory is taken out of; nil: none.
	Conversations Withdrawer
	// Threshold is the vector score a search hit needs, as in chats
	// (layers.semantic_score_threshold); 0 means 0.5.
	Threshold float64
	// Directory tells who each namespace is (GET /namespaces); nil: only
	// what the store holds.
	Directory *Directory
	// Usage tells how often each memory was injected; nil: not counted.
	Usage *Usage
	// History records every change; nil: none is.
	History *History
	// Withheld keeps out of chats what the curator wrote from a memory
	// since forgotten or erased; nil: nothing is.
	Withheld *Withheld
}

// Withdrawer takes memories out of the conversations whose kept prompt
// carries them (with ns and no ids, every memory of the namespace), and
// tells how many conversations will rebuild; Erase, for memories erased,
// also forgets the conversations that told them.
type Withdrawer interface {
	Withdraw(ns string, ids ...string) int
	Erase(ns string, ids ...string) int
}

// Withdraw takes memories out of the conversations that carry them, when
// there are any, or out of the plans kept in the store.
func (m *Service) Withdraw(ns string, ids ...string) {
	if m.Conversations != nil {
		m.Conversations.Withdraw(ns, ids...)
		return
	}
	// No conversations here (`vera memories` on the store, vera stopped):
	// the plans kept in the store that carry them go, or the next start
	// would send them again.
	if ps, ok := m.Store.(PlanStore); ok && (ns != "" || len(ids) > 0) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := ps.DropPlans(ctx, ns, ids...); err != nil {
			slog.Warn("dropping the kept plans that carry changed memories", "error", err)
		}
	}
}

// Search finds memories as chats do (hybrid, the same threshold), scored.
func (m *Service) Search(ctx context.Context, f Filter, q string, limit int) ([]Hit, error) {
	thr := m.Threshold
	if thr <= 0 {
		thr = 0.5
	}
	query := Query{Filter: f, Text: q, Limit: limit, Threshold: thr}
	if m.Embed != nil {
		if v, err := m.Embed(ctx, []string{q}); err == nil && len(v) == 1 {
			query.Vector = v[0]
		}
	}
	return m.Store.Search(ctx, query)
}

// Latest returns the newest memories matching f.
func (m *Service) Latest(ctx context.Context, f Filter, limit int) ([]Memory, error) {
	return m.Store.Latest(ctx, f, limit)
}

// Get returns a memory of namespace ns ("": any); ErrNotFound
// when there is none there.
func (m *Service) Get(ctx context.Context, ns, id string) (Memory, error) {
	got, err := m.Store.Get(ctx, id)
	if err == nil && ns != "" && got.Namespace != ns {
		err = ErrNotFound // another namespace's is not found
	}
	if errors.Is(err, ErrNotFound) {
		return Memory{}, fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	return got, err
}

// Add stores a memory written by hand, counted and embedded. A text over
// MaxTokens is refused with ErrTooLong, and nothing is stored.
func (m *Service) Add(ctx context.Context, mem Memory) (Memory, error) {
	if err := m.CheckLength(mem.Text); err != nil {
		return Memory{}, err
	}
	out, err := m.store(ctx, mem)
	if err == nil {
		m.History.Record(ctx, actor(ctx), Created, out)
	}
	return out, err
}

// store counts, embeds and stores mem.
func (m *Service) store(ctx context.Context, mem Memory) (Memory, error) {
	ms := []Memory{mem}
	m.Prepare(ctx, ms)
	if err := m.Store.Upsert(ctx, ms...); err != nil {
		return Memory{}, err
	}
	return ms[0], nil
}

// actor is who changes memories under ctx: the admin API unless told.
func actor(ctx context.Context) string { return ActorOf(ctx, ViaAdmin) }

// Rewrite stores a changed memory (embedded again) and takes its old form
// out of the conversations that carry it. A new text over MaxTokens is
// refused with ErrTooLong; the text the memory already has is not,
// so a memory stored before the cap can still be hidden, restored or
// marked.
func (m *Service) Rewrite(ctx context.Context, mem Memory) (Memory, error) {
	old, gerr := m.Store.Get(ctx, mem.ID)
	if err := m.CheckLength(mem.Text); err != nil {
		if gerr != nil || old.Text != mem.Text {
			return Memory{}, err
		}
	}
	mem.Vector = nil
	out, err := m.store(ctx, mem)
	if err != nil {
		return out, err
	}
	m.Withdraw("", mem.ID)
	action := Edited
	switch {
	case gerr != nil:
		action = Created
	case old.Type != Forgotten && mem.Type == Forgotten:
		action = Hidden
	case old.Type == Forgotten && mem.Type != Forgotten:
		action = Restored
	}
	if gerr == nil && action == Edited && old.Text == out.Text && reflect.DeepEqual(old.Metadata, out.Metadata) {
		return out, nil // nothing changed: nothing to record
	}
	m.History.Record(ctx, actor(ctx), action, out)
	switch {
	case action == Hidden:
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
func (m *Service) removed(ctx context.Context, r Memory) {
	if _, err := m.Withheld.Removed(ctx, r); err != nil {
		slog.Warn("withholding what a removed memory lives on in", "namespace", r.Namespace, "error", err)
	}
}

// Erase erases memory id: from the store, the durable queue if its turn
// still waits there, the writer on its way, the conversations (those that
// told it are forgotten), its usage. What the curator wrote from it is
// withheld first, so a retried erase still does; its history records the
// erasure.
func (m *Service) Erase(ctx context.Context, id string) error {
	was, gerr := m.Store.Get(ctx, id)
	if gerr == nil {
		if was.Type == Forgotten {
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
			return unavailable{"the local queue", err}
		}
	}
	if err := m.Store.Delete(ctx, id); err != nil {
		return unavailable{"writing the store", err}
	}
	if m.Conversations != nil {
		m.Conversations.Erase("", id)
	}
	if err := m.Usage.Forget(ctx, "", id); err != nil {
		return unavailable{"the usage counts", err}
	}
	if gerr != nil {
		return nil // never stored (still queued): it has no history
	}
	m.History.Record(ctx, actor(ctx), Erased, was)
	if err := m.Withheld.Release(ctx, was.Namespace, time.Time{}, id); err != nil {
		slog.Warn("an erased memory was withheld", "namespace", was.Namespace, "error", err)
	}
	return nil
}

// Withholds reports whether memory id is withheld from chats until it is
// rewritten.
func (m *Service) Withholds(id string) bool { return m.Withheld.Is(id) }

// CheckLength returns ErrTooLong, wrapped with the figures, when
// text is over MaxTokens: what a person or an agent writes is refused, not
// cut behind their back.
func (m *Service) CheckLength(text string) error {
	return CheckLength(m.Tokens, text, m.MaxTokens)
}

// Prepare counts the tokens of memories added or edited by hand and, when
// the embedder answers, gives them vectors.
func (m *Service) Prepare(ctx context.Context, ms []Memory) {
	for i := range ms {
		Classify(&ms[i])
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

// Receipt is what an erased namespace held, by kind: each memory type,
// the turns still queued, the conversation plans; and when.
type Receipt struct {
	Namespace string         `json:"namespace"`
	Erased    map[string]int `json:"erased"`
	At        time.Time      `json:"at"`
}

// EraseNamespace erases every memory of ns (every type, and the turns
// still queued), its conversation plans and its row in /namespaces.
func (m *Service) EraseNamespace(ctx context.Context, ns string) (Receipt, error) {
	r := Receipt{Namespace: ns, Erased: map[string]int{"queued": 0, "plans": 0}}
	for _, t := range []Type{Raw, Curated, Rule, Profile, Forgotten} {
		r.Erased[string(t)] = 0
	}
	if m.ForgetNamespace != nil {
		m.ForgetNamespace(ns)
	}
	if err := m.Directory.Forget(ctx, ns); err != nil {
		return r, unavailable{"the namespaces seen", err}
	}
	if m.Queue != nil {
		queued, err := m.Queue.Pending(ctx, 1<<20)
		if err != nil {
			return r, unavailable{"the local queue", err}
		}
		var ids []string
		for _, q := range queued {
			if q.Namespace == ns {
				ids = append(ids, q.ID)
			}
		}
		if err := m.Queue.Done(ctx, ids...); err != nil {
			return r, unavailable{"the local queue", err}
		}
		r.Erased["queued"] = len(ids)
	}
	for {
		page, _, err := m.Store.Scroll(ctx, Filter{Namespace: ns}, "", 500)
		if err != nil {
			return r, unavailable{"reading the store", err}
		}
		if len(page) == 0 {
			break
		}
		ids := make([]string, len(page))
		for i, mem := range page {
			ids[i] = mem.ID
			r.Erased[string(mem.Type)]++
		}
		if err := m.Store.Delete(ctx, ids...); err != nil {
			return r, unavailable{"writing the store", err}
		}
	}
	if m.Conversations != nil {
		r.Erased["plans"] = m.Conversations.Erase(ns)
	}
	if err := m.Usage.Forget(ctx, ns); err != nil {
		return r, unavailable{"the usage counts", err}
	}
	if err := m.History.Forget(ctx, ns); err != nil {
		return r, unavailable{"the history", err}
	}
	if err := m.Withheld.Forget(ctx, ns); err != nil {
		return r, unavailable{"the withheld memories", err}
	}
	r.At = time.Now().UTC()
	return r, nil
}

// unavailable is a failure of one part the service keeps memories in (the
// store, the local queue, the usage counts...): its message names the
// part, and it is ErrUnavailable.
type unavailable struct {
	part string
	err  error
}

func (u unavailable) Error() string        { return u.part + ": " + u.err.Error() }
func (u unavailable) Unwrap() error        { return u.err }
func (u unavailable) Is(target error) bool { return target == ErrUnavailable }
