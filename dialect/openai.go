package dialect

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/vera-proxy/vera/memory"
)

// OpenAIRequest is a /v1/chat/completions request, as clients send it to
// Ollama's OpenAI-compatible endpoint. As with ChatRequest, vera reads and
// rewrites only the messages; every other field is kept as raw JSON.
type OpenAIRequest struct {
	Model    string
	Messages []OpenAIMessage
	Stream   *bool // nil: absent, which OpenAI takes as false
	Extra    map[string]json.RawMessage
}

// OpenAIMessage is one OpenAI chat message. Content is kept raw: it is a
// string, an array of parts (text, image_url, input_audio...) or null (an
// assistant message carrying only tool calls), and it is forwarded exactly
// as it came unless vera writes the message itself.
type OpenAIMessage struct {
	Role    string
	Content json.RawMessage
	Extra   map[string]json.RawMessage

	plain  string // Content's text, read once by ParseOpenAIRequest
	parsed bool
}

// ParseOpenAIRequest decodes a /v1/chat/completions body. The error is meant
// for the client.
func ParseOpenAIRequest(body []byte) (*OpenAIRequest, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, errors.New("missing request body")
	}
	var r OpenAIRequest
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, errors.New(describeJSON(err))
	}
	for i := range r.Messages {
		m := &r.Messages[i]
		var err error
		if m.plain, err = m.text(); err != nil {
			return nil, fmt.Errorf("messages[%d].content: %w", i, err)
		}
		m.parsed = true
	}
	return &r, nil
}

// UnmarshalJSON implements json.Unmarshaler, keeping unknown fields.
func (r *OpenAIRequest) UnmarshalJSON(b []byte) error {
	*r = OpenAIRequest{}
	var err error
	r.Extra, err = decodeChat(b, &r.Model, &r.Messages, &r.Stream)
	return err
}

// MarshalJSON implements json.Marshaler.
func (r OpenAIRequest) MarshalJSON() ([]byte, error) {
	return encodeChat(r.Extra, r.Model, r.Messages, r.Stream)
}

// UnmarshalJSON implements json.Unmarshaler, keeping unknown fields.
func (msg *OpenAIMessage) UnmarshalJSON(b []byte) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	*msg = OpenAIMessage{}
	if err := take(m, "role", &msg.Role); err != nil {
		return err
	}
	if c, ok := m["content"]; ok {
		msg.Content = c
		delete(m, "content")
	}
	if len(m) > 0 {
		msg.Extra = m
	}
	return nil
}

// MarshalJSON implements json.Marshaler.
func (msg OpenAIMessage) MarshalJSON() ([]byte, error) {
	m := fields(msg.Extra, 2)
	m["role"] = msg.Role
	if msg.Content != nil {
		m["content"] = msg.Content
	}
	return Marshal(m)
}

// contentPart is the part of an OpenAI content part vera reads.
type contentPart struct {
	Type string  `json:"type"`
	Text *string `json:"text"`
}

// text returns what memory sees of the message: the string content, or the
// text parts of an array joined by newlines (images and audio are not
// text). A content of any other shape is an error.
func (msg OpenAIMessage) text() (string, error) {
	c := bytes.TrimSpace(msg.Content)
	if len(c) == 0 || string(c) == "null" {
		return "", nil
	}
	switch c[0] {
	case '"':
		var s string
		err := json.Unmarshal(c, &s)
		return s, err
	case '[':
		var parts []contentPart
		if err := json.Unmarshal(c, &parts); err != nil {
			return "", fmt.Errorf("want a string or an array of content parts: %w", err)
		}
		var texts []string
		for _, p := range parts {
			if p.Text != nil && (p.Type == "text" || p.Type == "") {
				texts = append(texts, *p.Text)
			}
		}
		return strings.Join(texts, "\n"), nil
	}
	return "", errors.New("want a string or an array of content parts")
}

// Text returns the message's text content (see text); malformed content
// reads as empty, which ParseOpenAIRequest has already refused.
func (msg OpenAIMessage) Text() string {
	if msg.parsed {
		return msg.plain
	}
	s, _ := msg.text()
	return s
}

// stringContent encodes s as a JSON string content.
func stringContent(s string) json.RawMessage {
	b, _ := Marshal(s)
	return b
}

// The chat interface: what vera's memory needs from a chat request,
// whichever API it came through.

func (r *OpenAIRequest) ModelName() string { return r.Model }

func (r *OpenAIRequest) MemoryMessages() []memory.Message {
	out := make([]memory.Message, len(r.Messages))
	for i, m := range r.Messages {
		out[i] = memory.Message{Role: m.Role, Content: m.Text()}
	}
	return out
}

// options reports the answer's token cap. OpenAI requests cannot set the
// context window (Ollama's compatibility layer has no num_ctx), so it
// always comes from the model.
func (r *OpenAIRequest) Options() (numCtx, numPredict int) {
	return 0, answerCap(r.Extra, "max_completion_tokens", "max_tokens")
}

// answerCap reads the answer's token cap from the first of keys set to a
// positive integer; 0 when none is.
func answerCap(extra map[string]json.RawMessage, keys ...string) int {
	for _, k := range keys {
		var n int
		if raw, ok := extra[k]; ok && json.Unmarshal(raw, &n) == nil && n > 0 {
			return n
		}
	}
	return 0
}

func (r *OpenAIRequest) LastUser() string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role == "user" {
			return r.Messages[i].Text()
		}
	}
	return ""
}

func (r *OpenAIRequest) WithMemory(mc *memory.Context) any {
	first := ""
	if len(r.Messages) > 0 {
		first = r.Messages[0].Text()
	}
	if unchanged(mc, first) {
		return nil
	}
	out := *r
	out.Messages = make([]OpenAIMessage, 0, len(r.Messages)+len(mc.Recent)+1)
	if mc.System != "" {
		sys := OpenAIMessage{Role: "system", Content: stringContent(mc.System)}
		if mc.SystemReplaces > 0 && len(r.Messages) > 0 {
			sys.Extra = r.Messages[0].Extra
		}
		out.Messages = append(out.Messages, sys)
	}
	for _, m := range mc.Recent {
		out.Messages = append(out.Messages, OpenAIMessage{Role: m.Role, Content: stringContent(m.Content)})
	}
	// A conversation's plan replaces as many system messages as its first
	// turn had; a later turn with fewer gets a new plan (Sources differ),
	// but never an out-of-range slice.
	replaced := min(mc.SystemReplaces, len(r.Messages))
	lead, from, user := keptFrom(len(r.Messages), replaced, mc.KeepFrom, func(i int) bool { return r.Messages[i].Role == "user" })
	out.Messages = append(out.Messages, r.Messages[replaced:lead]...)
	out.Messages = append(out.Messages, r.Messages[from:]...)
	if len(mc.Blocks) > 0 {
		own := out.Messages[len(out.Messages)-len(r.Messages)+from:]
		for i := range own {
			if own[i].Role != "user" {
				continue
			}
			if b := blockAt(mc.Blocks, user); b != "" {
				own[i].Content = prefixContent(own[i].Content, b, "text")
			}
			user++
		}
	}
	return &out
}

func (r *OpenAIRequest) Conversation() bool { return len(r.Messages) > 0 }
