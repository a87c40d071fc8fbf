// Package openwebui imports memories from Open WebUI: it reads a user's
// memories from Open WebUI's own API (GET /api/v1/memories/, what its
// Settings → Personalization → Memory shows) and converts each into a
// curated memory.Memory (`vera memories import --from-open-webui`).
package openwebui

import (
	"net/url"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/vera-proxy/vera/memory"
)

// Memory is one memory as Open WebUI answers it (its MemoryModel). Open
// WebUI keeps its times in epoch seconds.
type Memory struct {
	ID        string
	UserID    string
	Content   string
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Product names where the memories come from, in metadata.source.client
// (what `vera memories show` and the page at /ui/ say a memory came by)
// and metadata.imported_from (as an import from Vera-AI says "vera-ai").
const Product = "open-webui"

// idSpace derives the ids of imported memories. Its value must never
// change: a memory imported before keeps its id, so importing again finds
// it there.
var idSpace = uuid.MustParse("eb5c736b-97f4-459d-ab08-90408f86d90e")

// ID is vera's id for memory id of the Open WebUI at server imported into
// namespace ns: the same at every import. The namespace is part of it, so
// the same memory imported into two namespaces is two memories, not one
// moved.
func ID(server, id, ns string) string {
	return uuid.NewSHA1(idSpace, []byte(server+"\x00"+id+"\x00"+ns)).String()
}

// Server is the address of the Open WebUI at u as an imported memory
// keeps it and messages show it: scheme, host and path, without
// credentials, query or a final slash.
func Server(u *url.URL) string {
	c := url.URL{Scheme: u.Scheme, Host: strings.ToLower(u.Host), Path: strings.TrimRight(u.Path, "/")}
	return c.String()
}

// Convert makes m, a memory of the Open WebUI at server, a curated memory
// of namespace ns, dated when Open WebUI last changed it, saying in
// metadata.source where it came from. ok is false when m holds no text.
func Convert(m Memory, server, ns string) (out memory.Memory, ok bool) {
	text := strings.TrimSpace(m.Content)
	if text == "" {
		return memory.Memory{}, false
	}
	at := m.UpdatedAt
	if at.IsZero() {
		at = m.CreatedAt
	}
	md := memory.WithSource(map[string]any{"imported_from": Product}, memory.Source{Via: memory.ViaImport, Client: Product})
	src := md[memory.MetaSource].(map[string]any)
	src["url"] = server
	src["memory_id"] = m.ID
	if m.UserID != "" {
		src["user_id"] = m.UserID
	}
	if !m.CreatedAt.IsZero() {
		src["created_at"] = m.CreatedAt.UTC().Format(time.RFC3339)
	}
	return memory.Memory{
		ID:        ID(server, m.ID, ns),
		Namespace: ns,
		Type:      memory.Curated,
		Text:      text,
		Time:      at.UTC(),
		Metadata:  md,
	}, true
}

// Report says what an import from Open WebUI did.
type Report struct {
	// From is the Open WebUI's address, without credentials.
	From string `json:"from"`
	// Namespace is where the memories went: the Open WebUI user's id, or
	// the one named.
	Namespace string `json:"namespace"`
	// Read counts the memories Open WebUI answered with.
	Read     int `json:"read"`
	Imported int `json:"imported"`
	// Skipped counts the memories not imported, by reason: "already
	// there" (imported before, perhaps edited since, or the same text
	// there, case and spacing aside), "removed in vera" (imported, then
	// erased there, or forgotten and gone after its 30 days), "empty"
	// (no text).
	Skipped map[string]int `json:"skipped"`
	// Errors lists the memories vera refused (the first 100), by their
	// Open WebUI id; ErrorCount counts them all.
	Errors     []Refused `json:"errors,omitempty"`
	ErrorCount int       `json:"error_count,omitempty"`
}

// Refused is a memory vera would not store, and why.
type Refused struct {
	ID    string `json:"id"`
	Error string `json:"error"`
}

// Reasons a memory is skipped.
const (
	AlreadyThere  = "already there"
	RemovedInVera = "removed in vera"
	Empty         = "empty"
)
