package proxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// ChatRequest is an Ollama /api/chat request. vera reads and rewrites only
// the messages; every other field, including ones a newer Ollama adds, is
// kept as raw JSON and forwarded unchanged.
type ChatRequest struct {
	Model    string
	Messages []Message
	Stream   *bool // nil: absent, which Ollama takes as true
	Extra    map[string]json.RawMessage
}

// Message is one chat message. Role and Content are what memory works on;
// images, tool calls, thinking and unknown fields stay in Extra.
type Message struct {
	Role    string
	Content string
	Extra   map[string]json.RawMessage
}

// ParseChatRequest decodes an /api/chat body. The error is meant for the
// client: it says what is wrong with the body.
func ParseChatRequest(body []byte) (*ChatRequest, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, errors.New("missing request body")
	}
	var r ChatRequest
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("invalid JSON in request body: %w", err)
	}
	return &r, nil
}

// UnmarshalJSON implements json.Unmarshaler, keeping unknown fields.
func (r *ChatRequest) UnmarshalJSON(b []byte) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	*r = ChatRequest{}
	if err := take(m, "model", &r.Model); err != nil {
		return err
	}
	if err := take(m, "messages", &r.Messages); err != nil {
		return err
	}
	if err := take(m, "stream", &r.Stream); err != nil {
		return err
	}
	if len(m) > 0 {
		r.Extra = m
	}
	return nil
}

// MarshalJSON implements json.Marshaler.
func (r ChatRequest) MarshalJSON() ([]byte, error) {
	m := make(map[string]any, len(r.Extra)+3)
	for k, v := range r.Extra {
		m[k] = v
	}
	m["model"] = r.Model
	if r.Messages != nil {
		m["messages"] = r.Messages
	}
	if r.Stream != nil {
		m["stream"] = *r.Stream
	}
	return json.Marshal(m)
}

// UnmarshalJSON implements json.Unmarshaler, keeping unknown fields.
func (msg *Message) UnmarshalJSON(b []byte) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	*msg = Message{}
	if err := take(m, "role", &msg.Role); err != nil {
		return err
	}
	if err := take(m, "content", &msg.Content); err != nil {
		return err
	}
	if len(m) > 0 {
		msg.Extra = m
	}
	return nil
}

// MarshalJSON implements json.Marshaler.
func (msg Message) MarshalJSON() ([]byte, error) {
	m := make(map[string]any, len(msg.Extra)+2)
	for k, v := range msg.Extra {
		m[k] = v
	}
	m["role"] = msg.Role
	m["content"] = msg.Content
	return json.Marshal(m)
}

// take decodes m[key] into dst and removes it from m; JSON null leaves dst
// at its zero value.
func take(m map[string]json.RawMessage, key string, dst any) error {
	raw, ok := m[key]
	if !ok {
		return nil
	}
	delete(m, key)
	if err := json.Unmarshal(raw, dst); err != nil {
		return fmt.Errorf("field %q: %w", key, err)
	}
	return nil
}

// LastUser returns the content of the last user message, or "".
func (r *ChatRequest) LastUser() string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role == "user" {
			return r.Messages[i].Content
		}
	}
	return ""
}
