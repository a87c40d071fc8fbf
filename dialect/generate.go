package dialect

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"

	"github.com/vera-proxy/vera/memory"
)

// GenerateRequest is an Ollama /api/generate request: what `ollama run
// MODEL "prompt"` and piped input send. vera reads prompt and system and
// writes system back; every other field is kept raw and forwarded
// unchanged.
type GenerateRequest struct {
	Model   string
	Prompt  string
	System  string
	Raw     bool
	Suffix  string
	Context json.RawMessage // the deprecated context of a previous answer
	Stream  *bool
	Extra   map[string]json.RawMessage

	hasSystem bool
}

// ParseGenerateRequest decodes an /api/generate body. The error is meant
// for the client.
func ParseGenerateRequest(body []byte) (*GenerateRequest, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, errors.New("missing request body")
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, errors.New(describeJSON(err))
	}
	r := &GenerateRequest{}
	_, r.hasSystem = m["system"]
	for key, dst := range map[string]any{
		"model": &r.Model, "prompt": &r.Prompt, "system": &r.System, "raw": &r.Raw,
		"suffix": &r.Suffix, "context": &r.Context, "stream": &r.Stream,
	} {
		if err := take(m, key, dst); err != nil {
			return nil, errors.New(describeJSON(err))
		}
	}
	if len(m) > 0 {
		r.Extra = m
	}
	return r, nil
}

// MarshalJSON implements json.Marshaler.
func (r GenerateRequest) MarshalJSON() ([]byte, error) {
	m := fields(r.Extra, 7)
	m["model"], m["prompt"] = r.Model, r.Prompt
	if r.System != "" || r.hasSystem {
		m["system"] = r.System
	}
	if r.Raw {
		m["raw"] = true
	}
	if r.Suffix != "" {
		m["suffix"] = r.Suffix
	}
	if r.Context != nil {
		m["context"] = r.Context
	}
	if r.Stream != nil {
		m["stream"] = *r.Stream
	}
	return Marshal(m)
}

func (r *GenerateRequest) ModelName() string { return r.Model }

// conversation reports whether the request is one vera works on. A raw
// prompt (the caller templates it), an empty one (a load or unload), a
// code completion (suffix) and a continuation through the deprecated
// context field all pass untouched.
func (r *GenerateRequest) Conversation() bool {
	var ctx []json.RawMessage
	noContext := len(bytes.TrimSpace(r.Context)) == 0 || json.Unmarshal(r.Context, &ctx) == nil && len(ctx) == 0
	return !r.Raw && strings.TrimSpace(r.Prompt) != "" && r.Suffix == "" && noContext
}

func (r *GenerateRequest) MemoryMessages() []memory.Message {
	var out []memory.Message
	if r.System != "" {
		out = append(out, memory.Message{Role: "system", Content: r.System})
	}
	return append(out, memory.Message{Role: "user", Content: r.Prompt})
}

func (r *GenerateRequest) Options() (numCtx, numPredict int) { return requestOptions(r.Extra) }

func (r *GenerateRequest) LastUser() string { return r.Prompt }

// WithMemory puts every layer into system, as generate has no message
// list: the caller's system (or the Modelfile's), systemprompt.md, the
// rules and the semantic memories, then the recent turns as text.
func (r *GenerateRequest) WithMemory(mc *memory.Context) any {
	if unchanged(mc, r.System) {
		return nil
	}
	out := *r
	out.System = joinText(mc.System, recentText(mc.Recent))
	return &out
}

// recentIntro heads the recent turns when they are written as text.
const recentIntro = "The latest exchanges with this user, oldest first:"

// recentText renders the recent layer as text, for dialects whose
// conversation cannot take it as messages.
func recentText(recent []memory.Message) string {
	if len(recent) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString(recentIntro)
	for _, m := range recent {
		if m.Role == "user" {
			b.WriteString("\n\nUser: ")
		} else {
			b.WriteString("\nAssistant: ")
		}
		b.WriteString(m.Content)
	}
	return b.String()
}

// joinText joins the non-empty parts with a blank line.
func joinText(parts ...string) string {
	var keep []string
	for _, p := range parts {
		if p != "" {
			keep = append(keep, p)
		}
	}
	return strings.Join(keep, "\n\n")
}
