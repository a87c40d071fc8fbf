package memory

import (
	"strings"
	"time"
)

// Source is where a memory came from (metadata.source): how it came (Via:
// chat, command, curator, admin, mcp, import), and what is known of the
// request that wrote it. A curated memory, rule or profile also names the
// chats of the turns it was distilled from and their time span, kept
// after those turns are deleted.
type Source struct {
	Via       string
	Dialect   string
	ChatID    string
	Client    string
	Model     string
	RequestID string
	Chats     []string
	From      time.Time
	Until     time.Time
}

// Ways a memory comes.
const (
	ViaChat    = "chat"
	ViaCommand = "command"
	ViaCurator = "curator"
	ViaAdmin   = "admin"
	ViaMCP     = "mcp"
	ViaImport  = "import"
)

// MetaSource is the metadata key of a memory's Source.
const MetaSource = "source"

// Meta is s as metadata.source holds it: only what is known.
func (s Source) Meta() map[string]any {
	m := map[string]any{"via": s.Via}
	for k, v := range map[string]string{"dialect": s.Dialect, "chat_id": s.ChatID, "client": s.Client, "model": s.Model, "request_id": s.RequestID} {
		if v != "" {
			m[k] = v
		}
	}
	if len(s.Chats) > 0 {
		chats := make([]any, len(s.Chats))
		for i, c := range s.Chats {
			chats[i] = c
		}
		m["chats"] = chats
	}
	if !s.From.IsZero() {
		m["from"] = s.From.UTC().Format(time.RFC3339)
	}
	if !s.Until.IsZero() {
		m["until"] = s.Until.UTC().Format(time.RFC3339)
	}
	return m
}

// WithSource returns md with s as its source (a copy: md is not changed).
func WithSource(md map[string]any, s Source) map[string]any {
	out := make(map[string]any, len(md)+1)
	for k, v := range md {
		out[k] = v
	}
	out[MetaSource] = s.Meta()
	return out
}

// maxClient bounds the client name kept from a User-Agent.
const maxClient = 64

// ClientOf is the product and version a User-Agent names first
// ("ollama/0.24.0 (amd64 linux) Go/go1.26" → "ollama/0.24.0"; an SDK that
// puts the version in a word of its own, "OpenAI/Go 3.96.0", keeps it), at
// most maxClient bytes of printable ASCII; "" for none.
func ClientOf(userAgent string) string {
	words := strings.Fields(userAgent)
	if len(words) == 0 {
		return ""
	}
	first := words[0]
	if len(words) > 1 && !strings.ContainsAny(first, "0123456789") && words[1][0] >= '0' && words[1][0] <= '9' {
		first += " " + words[1]
	}
	var b strings.Builder
	for _, r := range first {
		if r < ' ' || r > '~' || b.Len() >= maxClient {
			break
		}
		b.WriteRune(r)
	}
	return b.String()
}
