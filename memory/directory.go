package memory

import (
	"cmp"
	"context"
	"maps"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"
)

// Seen is who a namespace's user is, as their client last said (Open
// WebUI's X-OpenWebUI-User-Name and -Email), and when they last chatted.
type Seen struct {
	Namespace string    `json:"namespace"`
	Name      string    `json:"name"`
	Email     string    `json:"email"`
	LastSeen  time.Time `json:"last_seen"`
}

// SeenStore keeps what a Directory learns.
type SeenStore interface {
	SaveSeen(ctx context.Context, seen ...Seen) error
	LoadSeen(ctx context.Context) ([]Seen, error)
	DeleteSeen(ctx context.Context, ns string) error
}

// Directory remembers who each namespace is: a chat whose turn is stored
// notes it in memory at no cost (a request that stores nothing, such as
// a load call, must not: anyone could fill the directory with made-up
// namespaces), and Flush writes what changed (the caller flushes now and
// then, and on close). GET /namespaces lists only the namespaces that
// hold memories, with what the directory knows of them.
type Directory struct {
	// Max bounds the namespaces held in memory: past it, the eighth
	// least recently seen are let go (a namespace that still holds
	// memories is listed without its name until it chats again); 0:
	// 65536.
	Max int

	store SeenStore

	mu     sync.Mutex
	loaded bool
	seen   map[string]Seen
	dirty  map[string]bool
}

// NewDirectory returns a directory kept in store.
func NewDirectory(store SeenStore) *Directory {
	return &Directory{store: store, seen: map[string]Seen{}, dirty: map[string]bool{}}
}

// maxSeenField bounds a name or an email kept, in bytes; defaultMaxSeen
// is Directory.Max's default.
const (
	maxSeenField   = 256
	defaultMaxSeen = 1 << 16
)

// clean makes a header value fit to keep and show: Open WebUI
// percent-encodes a name that is not ASCII ("Jos%C3%A9"), and a value that
// is not valid UTF-8, holds a control or bidirectional-override character
// (it could rewrite a terminal or reorder what a page shows), or is too
// long is not kept.
func clean(s string) string {
	s = strings.TrimSpace(s)
	if u, err := url.PathUnescape(s); err == nil {
		s = u
	}
	if !utf8.ValidString(s) || len(s) > maxSeenField {
		return ""
	}
	for _, r := range s {
		if unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) {
			return ""
		}
	}
	return s
}

// Note records that ns chatted at at, under name and email when its client
// sent them (an empty one keeps what is known). The caller notes only a
// namespace that stores the chat.
func (d *Directory) Note(ns, name, email string, at time.Time) {
	if d == nil || ns == "" {
		return
	}
	name, email = clean(name), clean(email)
	d.mu.Lock()
	defer d.mu.Unlock()
	s := d.seen[ns]
	changed := s.Namespace == "" || name != "" && name != s.Name || email != "" && email != s.Email || at.Sub(s.LastSeen) > time.Minute
	s.Namespace = ns
	if name != "" {
		s.Name = name
	}
	if email != "" {
		s.Email = email
	}
	if at.After(s.LastSeen) {
		s.LastSeen = at.UTC()
	}
	d.seen[ns] = s
	if changed {
		d.dirty[ns] = true
	}
	d.bound()
}

// bound lets the least recently seen eighth go once the directory holds
// more than Max namespaces: a sort every Max/8 new namespaces, O(log n)
// for each. d.mu is held.
func (d *Directory) bound() {
	limit := cmp.Or(d.Max, defaultMaxSeen)
	if len(d.seen) <= limit {
		return
	}
	all := slices.SortedFunc(maps.Values(d.seen), func(a, b Seen) int { return a.LastSeen.Compare(b.LastSeen) })
	for _, s := range all[:len(all)-limit+limit/8] {
		delete(d.seen, s.Namespace)
		delete(d.dirty, s.Namespace)
	}
}

// Flush writes what changed since the last flush; what failed is written
// at the next.
func (d *Directory) Flush(ctx context.Context) error {
	if d == nil {
		return nil
	}
	d.mu.Lock()
	var out []Seen
	for ns := range d.dirty {
		out = append(out, d.seen[ns])
	}
	d.dirty = map[string]bool{}
	d.mu.Unlock()
	if len(out) == 0 {
		return nil
	}
	if err := d.store.SaveSeen(ctx, out...); err != nil {
		d.mu.Lock()
		for _, s := range out {
			d.dirty[s.Namespace] = true
		}
		d.mu.Unlock()
		return err
	}
	return nil
}

// Forget drops what the directory knows of ns (its memories were
// forgotten).
func (d *Directory) Forget(ctx context.Context, ns string) error {
	if d == nil {
		return nil
	}
	d.mu.Lock()
	delete(d.seen, ns)
	delete(d.dirty, ns)
	d.mu.Unlock()
	return d.store.DeleteSeen(ctx, ns)
}

// All returns every namespace the directory knows, by namespace.
func (d *Directory) All(ctx context.Context) (map[string]Seen, error) {
	if d == nil {
		return map[string]Seen{}, nil
	}
	d.mu.Lock()
	loaded := d.loaded
	d.mu.Unlock()
	if !loaded {
		stored, err := d.store.LoadSeen(ctx)
		if err != nil {
			return nil, err
		}
		d.mu.Lock()
		for _, s := range stored {
			if cur, ok := d.seen[s.Namespace]; ok {
				// Noted since start: newer, except what it did not say.
				if cur.Name == "" {
					cur.Name = s.Name
				}
				if cur.Email == "" {
					cur.Email = s.Email
				}
				d.seen[s.Namespace] = cur
				continue
			}
			d.seen[s.Namespace] = s
		}
		d.loaded = true
		d.bound()
		d.mu.Unlock()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return maps.Clone(d.seen), nil
}
