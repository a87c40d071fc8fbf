package dialect

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"

	"github.com/vera-proxy/vera/memory"
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
		return nil, errors.New(describeJSON(err))
	}
	return &r, nil
}

// describeJSON says what is wrong with a request body in the request's
// terms (JSON's types and the field's name), never in Go's.
func describeJSON(err error) string {
	msg := err.Error()
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		i := strings.Index(msg, "json: cannot unmarshal")
		if i < 0 {
			i = len(msg)
		}
		field := ""
		if te.Field != "" {
			field = fmt.Sprintf("field %q: ", te.Field)
		}
		return "invalid request body: " + msg[:i] + field + fmt.Sprintf("want %s, got %s", jsonKind(te.Type), te.Value)
	case errors.As(err, &se):
		return fmt.Sprintf("invalid JSON in request body at byte %d: %s", se.Offset, strings.TrimPrefix(se.Error(), "json: "))
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "invalid JSON in request body: it ends too early"
	}
	return "invalid JSON in request body: " + strings.TrimPrefix(msg, "json: ")
}

// jsonKind names a Go type as the JSON type that decodes into it.
func jsonKind(t reflect.Type) string {
	if t == nil {
		return "another type"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return "a string"
		}
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	}
	return "another type"
}

// UnmarshalJSON implements json.Unmarshaler, keeping unknown fields.
func (r *ChatRequest) UnmarshalJSON(b []byte) error {
	*r = ChatRequest{}
	var err error
	r.Extra, err = decodeChat(b, &r.Model, &r.Messages, &r.Stream)
	return err
}

// MarshalJSON implements json.Marshaler.
func (r ChatRequest) MarshalJSON() ([]byte, error) {
	return encodeChat(r.Extra, r.Model, r.Messages, r.Stream)
}

// decodeChat decodes the fields vera reads from a chat request body (both
// APIs share them) and returns the others, raw.
func decodeChat[M any](b []byte, model *string, messages *[]M, stream **bool) (map[string]json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	if err := take(m, "model", model); err != nil {
		return nil, err
	}
	if err := take(m, "messages", messages); err != nil {
		return nil, err
	}
	if err := take(m, "stream", stream); err != nil {
		return nil, err
	}
	if len(m) == 0 {
		return nil, nil
	}
	return m, nil
}

// encodeChat is decodeChat's inverse.
func encodeChat[M any](extra map[string]json.RawMessage, model string, messages []M, stream *bool) ([]byte, error) {
	m := fields(extra, 3)
	m["model"] = model
	if messages != nil {
		m["messages"] = messages
	}
	if stream != nil {
		m["stream"] = *stream
	}
	return Marshal(m)
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
	m := fields(msg.Extra, 2)
	m["role"] = msg.Role
	m["content"] = msg.Content
	return Marshal(m)
}

// fields returns a map of a request's (or message's) fields vera does not
// read, with room for the n it writes back.
func fields(extra map[string]json.RawMessage, n int) map[string]any {
	m := make(map[string]any, len(extra)+n)
	for k, v := range extra {
		m[k] = v
	}
	return m
}

// take decodes m[key] into dst and removes it from m; JSON null leaves dst
// at its zero value.
//
// Keys match in any case, as Ollama (Go's encoding/json) reads them: a
// "System" the caller sent must not stay beside the "system" vera writes
// and win over it upstream.
func take(m map[string]json.RawMessage, key string, dst any) error {
	raw, ok := m[key]
	for k, v := range m {
		if k != key && strings.EqualFold(k, key) {
			if !ok {
				raw, ok = v, true
			}
			delete(m, k)
		}
	}
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

func (r *ChatRequest) ModelName() string { return r.Model }

func (r *ChatRequest) MemoryMessages() []memory.Message {
	out := make([]memory.Message, len(r.Messages))
	for i, m := range r.Messages {
		out[i] = memory.Message{Role: m.Role, Content: m.Content}
	}
	return out
}

func (r *ChatRequest) Options() (numCtx, numPredict int) { return requestOptions(r.Extra) }

func (r *ChatRequest) WithMemory(mc *memory.Context) any {
	first := ""
	if len(r.Messages) > 0 {
		first = r.Messages[0].Content
	}
	if unchanged(mc, first) {
		return nil
	}
	out := *r
	out.Messages = make([]Message, 0, len(r.Messages)+len(mc.Recent)+1)
	if mc.System != "" {
		sys := Message{Role: "system", Content: mc.System}
		if mc.SystemReplaces > 0 && len(r.Messages) > 0 {
			sys.Extra = r.Messages[0].Extra
		}
		out.Messages = append(out.Messages, sys)
	}
	for _, m := range mc.Recent {
		out.Messages = append(out.Messages, Message{Role: m.Role, Content: m.Content})
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
				own[i].Content = b + own[i].Content
			}
			user++
		}
	}
	return &out
}

// unchanged reports whether the memory layers leave a request as it is:
// nothing injected, and the system message (whose text is first) kept.
func unchanged(mc *memory.Context, first string) bool {
	if len(mc.Recent) > 0 || len(mc.Blocks) > 0 || mc.KeepFrom > 0 {
		return false
	}
	switch {
	case mc.SystemReplaces == 0 && mc.System == "":
		return true
	case mc.SystemReplaces == 1 && mc.System == first:
		return true
	}
	return false
}

func (r *ChatRequest) Conversation() bool { return len(r.Messages) > 0 }
