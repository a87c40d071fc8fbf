package memory

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Type tells a raw turn from a curated memory or a rule.
type Type string

const (
	Raw     Type = "raw"
	Curated Type = "curated"
	// Rule is a curator rule: it joins its namespace's system layer, and
	// is never searched as a memory.
	Rule Type = "rule"
	// Profile is a short portrait of a namespace's user that the curator
	// keeps (or the user edits): the newest opens the namespace's part of
	// the system layer, and it is never searched as a memory.
	Profile Type = "profile"
	// Forgotten is a memory hidden but kept: never injected, never
	// searched by chats, listed by the admin API and restorable. Its
	// former type is in Metadata["forgotten_from"].
	Forgotten Type = "forgotten"
)

// Valid reports whether t is one of the known types.
func (t Type) Valid() bool {
	return t == Raw || t == Curated || t == Rule || t == Profile || t == Forgotten
}

// Hide makes m forgotten, keeping what it was and when it was hidden so
// that Restore can undo it.
func (m *Memory) Hide(now time.Time) {
	if m.Type == Forgotten {
		return
	}
	md := make(map[string]any, len(m.Metadata)+2)
	for k, v := range m.Metadata {
		md[k] = v
	}
	md["forgotten_from"], md["forgotten_at"] = string(m.Type), now.UTC().Format(time.RFC3339)
	m.Type, m.Metadata = Forgotten, md
}

// Restore undoes Hide; it reports false when m is not forgotten.
func (m *Memory) Restore() bool {
	if m.Type != Forgotten {
		return false
	}
	was, _ := m.Metadata["forgotten_from"].(string)
	if !Type(was).Valid() || Type(was) == Forgotten {
		was = string(Curated)
	}
	md := make(map[string]any, len(m.Metadata))
	for k, v := range m.Metadata {
		if k != "forgotten_from" && k != "forgotten_at" {
			md[k] = v
		}
	}
	if len(md) == 0 {
		md = nil
	}
	m.Type, m.Metadata = Type(was), md
	return true
}

// Memory is one stored memory: a raw turn or a curated memory. Text is what
// is embedded and searched: the exchange itself, in "User: ...\nAssistant:
// ..." form, never with a timestamp line.
type Memory struct {
	ID        string         `json:"id"`
	Namespace string         `json:"namespace"`
	Type      Type           `json:"type"`
	Text      string         `json:"text"`
	Time      time.Time      `json:"timestamp"`
	Model     string         `json:"model,omitempty"`
	Metadata  map[string]any `json:"metadata,omitempty"`
	// Vector is the embedding of Text; nil until the embedder has produced
	// one. Stores never return it from searches.
	Vector []float32 `json:"-"`
	// Tokens is the cl100k_base token count of Text, kept so the context
	// builder need not count it again on every chat. 0 means unknown.
	Tokens int `json:"-"`
}

// Filter selects memories.
type Filter struct {
	Namespace string // required
	Types     []Type // empty: all
	Since     time.Time
	Until     time.Time // exclusive; zero: no bound
	// NoVector selects only memories still waiting for their embedding.
	NoVector bool
}

// Query is a hybrid search: by vector similarity and by lexical match.
type Query struct {
	Filter
	// Vector, when set, ranks memories by cosine similarity; only those at
	// or above Threshold count.
	Vector    []float32
	Threshold float64
	// Text, when set, ranks memories by BM25 over text.Terms(Text).
	Text  string
	Limit int
	// Around, above 0, lets a raw turn's lexical score take in this share
	// of its neighbours' (the raw turns just before and after it, within
	// half an hour): the embedded store re-ranks its lexical side's best
	// and their neighbours so, each taking in its neighbours among them
	// (a turn that neither ranks nor neighbours one is not lifted, nor
	// lends); Qdrant ignores it.
	Around float64
	// Context, above 0, asks a Contextual store for the turns around the
	// first Context hits (in BestFirst's order) that are raw turns, in
	// their Hit.Context; other stores ignore it. A memory changed or
	// removed while the search reads its rows is left out, as a hit or as
	// a neighbour: the hits after it move up, and the last of the first
	// Context then comes without its context.
	Context int
}

// Hit is a search result. Score is the fused rank score (higher is better);
// Cosine and Lexical are the two sides' own scores, 0 when that side did
// not find the memory (Lexical with Query.Around includes the neighbours'
// share: a turn without the query's words can have one).
type Hit struct {
	Memory
	Score   float64
	Cosine  float64
	Lexical float64
	// Context, with Query.Context, holds the raw turns of the namespace
	// just before and just after this one (a raw turn) in time, within
	// ExchangeWindow, oldest first.
	Context []Memory
}

// BestFirst orders hits as the builder ranks them: by score, and of two
// that score alike, the newer first (likelier true now).
func BestFirst(x, y Hit) int {
	if c := cmp.Compare(y.Score, x.Score); c != 0 {
		return c
	}
	return y.Time.Compare(x.Time)
}

// Store keeps memories. Both backends (embedded and Qdrant) implement it and
// pass the same contract suite (memory/storetest).
type Store interface {
	// Upsert writes memories by ID: a new ID is added, an existing one is
	// replaced (so retried writes never duplicate). A memory without a
	// vector is still searchable lexically.
	Upsert(ctx context.Context, ms ...Memory) error
	// SetVectors sets the vector of each memory whose stored text still
	// equals m.Text, leaving everything else as it is (the backfill must
	// not undo an edit made while it was embedding). Unknown IDs are
	// ignored.
	SetVectors(ctx context.Context, ms ...Memory) error
	// Search returns the best hits of q, best first.
	Search(ctx context.Context, q Query) ([]Hit, error)
	// Latest returns the newest memories matching f, newest first.
	Latest(ctx context.Context, f Filter, limit int) ([]Memory, error)
	// Scroll pages through the memories matching f in a stable order, the
	// store's cheapest: for walking a whole namespace, where the order does
	// not matter. An empty cursor starts at the beginning; an empty next
	// cursor means the end.
	Scroll(ctx context.Context, f Filter, cursor string, limit int) (page []Memory, next string, err error)
	// List pages through the memories matching f in order o (by time, then
	// by ID): what a person browsing them sees. A page goes on from its
	// cursor's place in that order, so paging never skips nor repeats a
	// memory, even while memories are written (one written behind the
	// place comes on a later page; one before it, not). An empty cursor
	// starts at the beginning; an empty next cursor means the end; a
	// cursor that is not one of o's is ErrBadCursor.
	List(ctx context.Context, f Filter, o Order, cursor string, limit int) (page []Memory, next string, err error)
	// Get returns one memory, with its vector (possibly normalised: only
	// its direction counts), or ErrNotFound.
	Get(ctx context.Context, id string) (Memory, error)
	// Delete removes memories by ID; unknown IDs are ignored.
	Delete(ctx context.Context, ids ...string) error
	// Count counts the memories matching f.
	Count(ctx context.Context, f Filter) (int, error)
	// Namespaces lists the namespaces that hold memories.
	Namespaces(ctx context.Context) ([]string, error)
	// Close releases the store.
	Close() error
}

// Order is the order List pages in.
type Order int

const (
	// NewestFirst is the newest memory first, and of equal times the
	// greater ID.
	NewestFirst Order = iota
	// OldestFirst is the oldest first, and of equal times the lesser ID.
	OldestFirst
)

// String names the order as the admin API does: newest or oldest.
func (o Order) String() string {
	if o == OldestFirst {
		return "oldest"
	}
	return "newest"
}

// Compare orders a and b as o lists them: negative when a comes first.
// Only their Time and ID count.
func (o Order) Compare(a, b Memory) int {
	c := a.Time.Compare(b.Time)
	if c == 0 {
		c = strings.Compare(a.ID, b.ID)
	}
	if o == NewestFirst {
		return -c
	}
	return c
}

// Cursor is List's next cursor for a page that ends on m: m's place in o.
// Callers treat it as opaque.
func (o Order) Cursor(m Memory) string {
	place := o.String() + " " + m.Time.UTC().Format(time.RFC3339Nano) + " " + m.ID
	return base64.RawURLEncoding.EncodeToString([]byte(place))
}

// Place reads a cursor of o back into the place it names: a Memory with
// only Time and ID, which the next page comes after. It is ErrBadCursor
// when o's Cursor did not give it (another order's included).
func (o Order) Place(cursor string) (Memory, error) {
	bad := fmt.Errorf("%w: %q is not a cursor of a list %s first", ErrBadCursor, cursor, o)
	b, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil {
		return Memory{}, bad
	}
	parts := strings.SplitN(string(b), " ", 3)
	if len(parts) != 3 || parts[0] != o.String() || parts[2] == "" {
		return Memory{}, bad
	}
	t, err := time.Parse(time.RFC3339Nano, parts[1])
	if err != nil {
		return Memory{}, bad
	}
	return Memory{ID: parts[2], Time: t.UTC()}, nil
}

// Settler is a store that also keeps the durable queue (the embedded
// store): Settle stores memories taken from the queue and takes done off
// it in one transaction, which need not reach the disk before the call
// returns, since the queue holds the memories until it does.
type Settler interface {
	Settle(ctx context.Context, ms []Memory, done []string) error
}

// Queue is the durable local outbox of finished turns: a turn is committed
// here before anything else happens to it, and leaves only once the store
// holds it. Memories keep their ID through the queue, so a retried write
// replaces rather than duplicates.
type Queue interface {
	Enqueue(ctx context.Context, ms ...Memory) error
	// Pending returns up to limit queued memories, oldest first.
	Pending(ctx context.Context, limit int) ([]Memory, error)
	Done(ctx context.Context, ids ...string) error
	// Len counts the queued memories.
	Len(ctx context.Context) (int, error)
}

var (
	// ErrNotFound: no memory with that ID.
	ErrNotFound = errors.New("memory not found")
	// ErrUnavailable: the store or embedder cannot be reached right now;
	// the caller answers without memory and retries later.
	ErrUnavailable = errors.New("memory unavailable")
	// ErrLoading: the store is still loading the index searches run on
	// (after a start); the caller answers without memory for now.
	ErrLoading = errors.New("the memory index is still loading")
	// ErrBadCursor: a page's cursor that no page gave.
	ErrBadCursor = errors.New("bad cursor")
)

// SearchAhead is a store that can start a search's lexical side before
// the query's vector is known: the builder starts it, then embeds the
// question (a round trip to the embedding model) while it runs.
type SearchAhead interface {
	// SearchAhead starts q's lexical side (q.Vector is not read) and
	// returns what finishes the search once the question's vector is
	// known (nil: lexical only), as Search would with that vector.
	SearchAhead(ctx context.Context, q Query) func(vector []float32) ([]Hit, error)
}

// Contextual is a store whose Search fills Hit.Context for Query.Context's
// hits, as the builder's own lookups of them would (in one read, rather
// than two a hit), and returns its hits in BestFirst's order.
type Contextual interface {
	// FillsContext marks the store; it does nothing.
	FillsContext()
}

// Earliest is a store that finds the oldest memories matching a filter as
// cheaply as the newest: the turn right after a hit is the oldest of the
// turns after it.
type Earliest interface {
	// Earliest returns the oldest memories matching f, oldest first.
	Earliest(ctx context.Context, f Filter, limit int) ([]Memory, error)
}

// Progress is how far a store that loads in the background has come.
type Progress struct {
	Loaded int `json:"loaded"` // memories indexed so far
	Total  int `json:"total"`  // memories to index
}

// Err is the error of a search made while the load is under way.
func (p Progress) Err() error {
	return fmt.Errorf("%w (%d of %d memories)", ErrLoading, p.Loaded, p.Total)
}

// Loader is a store that starts at once and loads its index in the
// background: until it is done, searches return ErrLoading.
type Loader interface {
	// Loading reports the load's progress, and whether it is still under
	// way.
	Loading() (Progress, bool)
}

// Validate checks what every store requires of a memory.
func (m *Memory) Validate() error {
	switch {
	case m.ID == "":
		return errors.New("memory without id")
	case m.Namespace == "":
		return fmt.Errorf("memory %s: empty namespace", m.ID)
	case !m.Type.Valid():
		return fmt.Errorf("memory %s: type %q is not raw, curated, rule, profile or forgotten", m.ID, m.Type)
	case m.Time.IsZero():
		return fmt.Errorf("memory %s: no timestamp", m.ID)
	}
	return nil
}

// NewID returns a fresh memory ID: a UUID version 7, so IDs sort roughly by
// creation time and Qdrant accepts them as point IDs.
func NewID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	ms := uint64(time.Now().UnixMilli())
	binary.BigEndian.PutUint64(b[0:8], ms<<16|uint64(b[6])<<8|uint64(b[7]))
	b[6] = 0x70 | b[6]&0x0f
	b[8] = 0x80 | b[8]&0x3f
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
