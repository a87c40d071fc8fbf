package dialect

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/vera-proxy/vera/memory"
)

// MessagesRequest is an Anthropic Messages API request (/v1/messages),
// which Ollama serves for Claude-style clients. system is a string or a
// list of text blocks; each message's content is a string or a list of
// blocks (text, image, tool_use, tool_result, thinking...). vera reads the
// text, writes memory into system and the recent turns as messages before
// the caller's; the caller's own messages go out as they came.
type MessagesRequest struct {
	Model    string
	System   json.RawMessage
	Messages []anthropicMessage
	Stream   *bool
	Extra    map[string]json.RawMessage

	systemText string
}

// anthropicMessage is one message; a caller's goes out exactly as it came
// (raw), fields vera does not know included. text is what memory reads of
// it.
type anthropicMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	text    string
	raw     json.RawMessage
	// results: a user message that carries tool results (any text beside
	// them, such as an agent's reminders, is not the user's question).
	results bool
}

// UnmarshalJSON implements json.Unmarshaler, keeping the message's bytes.
func (m *anthropicMessage) UnmarshalJSON(b []byte) error {
	type plain anthropicMessage
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*m = anthropicMessage(p)
	m.raw = append(json.RawMessage(nil), b...)
	return nil
}

// MarshalJSON implements json.Marshaler: a caller's message as it came, a
// message vera writes as role and content.
func (m anthropicMessage) MarshalJSON() ([]byte, error) {
	if m.raw != nil {
		return m.raw, nil
	}
	type plain anthropicMessage
	return Marshal(plain(m))
}

// ParseMessagesRequest decodes a /v1/messages body. The error is meant for
// the client.
func ParseMessagesRequest(body []byte) (*MessagesRequest, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, errors.New("missing request body")
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, errors.New(describeJSON(err))
	}
	r := &MessagesRequest{}
	for key, dst := range map[string]any{"model": &r.Model, "system": &r.System, "messages": &r.Messages, "stream": &r.Stream} {
		if err := take(m, key, dst); err != nil {
			return nil, errors.New(describeJSON(err))
		}
	}
	var err error
	if r.systemText, err = partsText(r.System, "text"); err != nil {
		return nil, fmt.Errorf("system: %w", err)
	}
	for i := range r.Messages {
		msg := &r.Messages[i]
		if msg.text, err = partsText(msg.Content, "text"); err != nil {
			return nil, fmt.Errorf("messages[%d].content: %w", i, err)
		}
		msg.results = msg.Role == "user" && hasToolResult(msg.Content)
	}
	if len(m) > 0 {
		r.Extra = m
	}
	return r, nil
}

// MarshalJSON implements json.Marshaler.
func (r MessagesRequest) MarshalJSON() ([]byte, error) {
	m := fields(r.Extra, 4)
	m["model"] = r.Model
	if r.System != nil {
		m["system"] = r.System
	}
	if r.Messages != nil {
		m["messages"] = r.Messages
	}
	if r.Stream != nil {
		m["stream"] = *r.Stream
	}
	return Marshal(m)
}

func (r *MessagesRequest) ModelName() string { return r.Model }

func (r *MessagesRequest) Conversation() bool { return len(r.Messages) > 0 }

func (r *MessagesRequest) MemoryMessages() []memory.Message {
	out := make([]memory.Message, 0, len(r.Messages)+1)
	if strings.TrimSpace(r.systemText) != "" {
		out = append(out, memory.Message{Role: "system", Content: r.systemText})
	}
	for _, m := range r.Messages {
		role := m.Role
		if m.results {
			role = "tool"
		}
		out = append(out, memory.Message{Role: role, Content: m.text})
	}
	return out
}

func (r *MessagesRequest) Options() (numCtx, numPredict int) {
	return 0, answerCap(r.Extra, "max_tokens")
}

// lastUser is the text of the last user message that has some. A user
// message that carries only tool results continues an agent's tool loop:
// the turn is the question that started it.
func (r *MessagesRequest) LastUser() string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if m := r.Messages[i]; m.Role == "user" && !m.results {
			return m.text
		}
	}
	return ""
}

// WithMemory writes the system layer into system and the recent turns as
// messages before the caller's (they end with an answer, so the caller's
// first user message still follows an assistant one). A system given as
// blocks keeps its blocks (and their cache_control); vera's part is one
// more text block.
func (r *MessagesRequest) WithMemory(mc *memory.Context) any {
	if unchanged(mc, r.systemText) {
		return nil
	}
	out := *r
	if sys := bytes.TrimSpace(r.System); len(sys) > 0 && sys[0] == '[' && mc.SystemReplaces > 0 && strings.HasPrefix(mc.System, r.systemText) {
		var blocks []json.RawMessage
		if json.Unmarshal(sys, &blocks) == nil {
			added := strings.TrimLeft(strings.TrimPrefix(mc.System, r.systemText), "\n")
			if added != "" {
				b, _ := Marshal(map[string]string{"type": "text", "text": added})
				blocks = append(blocks, b)
			}
			out.System, _ = Marshal(blocks)
		}
	} else if mc.System != "" {
		out.System, _ = Marshal(mc.System)
	}
	out.Messages = make([]anthropicMessage, 0, len(r.Messages)+len(mc.Recent))
	for _, m := range mc.Recent {
		content, _ := Marshal(m.Content)
		out.Messages = append(out.Messages, anthropicMessage{Role: m.Role, Content: content})
	}
	n := len(out.Messages)
	lead, from, user := keptFrom(len(r.Messages), 0, mc.KeepFrom, func(i int) bool { return r.Messages[i].Role == "user" && !r.Messages[i].results })
	out.Messages = append(out.Messages, r.Messages[:lead]...)
	out.Messages = append(out.Messages, r.Messages[from:]...)
	for i := n; i < len(out.Messages) && len(mc.Blocks) > 0; i++ {
		m := &out.Messages[i]
		if m.Role != "user" || m.results {
			continue
		}
		if b := blockAt(mc.Blocks, user); b != "" {
			m.Content = prefixContent(m.Content, b, "text")
			if m.raw != nil {
				m.raw = withField(m.raw, "content", m.Content)
			}
		}
		user++
	}
	return &out
}
