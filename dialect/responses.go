package dialect

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/vera-proxy/vera/memory"
)

// ResponsesRequest is an OpenAI Responses API request (/v1/responses), as
// newer OpenAI SDK code sends it. input is a string or a list of items
// (messages, function calls and their outputs, ...); vera reads the
// messages' text and writes memory into instructions. Everything else,
// input included, is forwarded as it came.
type ResponsesRequest struct {
	Model        string
	Instructions string
	Input        json.RawMessage
	Stream       *bool
	Extra        map[string]json.RawMessage

	items           []responsesItem // input's messages, read once
	hasInstructions bool
}

// responsesItem is the part of an input item memory reads.
type responsesItem struct {
	Type    string          `json:"type"`
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	text    string
}

// ParseResponsesRequest decodes a /v1/responses body. The error is meant
// for the client.
func ParseResponsesRequest(body []byte) (*ResponsesRequest, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, errors.New("missing request body")
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, errors.New(describeJSON(err))
	}
	r := &ResponsesRequest{}
	_, r.hasInstructions = m["instructions"]
	for key, dst := range map[string]any{"model": &r.Model, "instructions": &r.Instructions, "stream": &r.Stream} {
		if err := take(m, key, dst); err != nil {
			return nil, errors.New(describeJSON(err))
		}
	}
	if raw, ok := m["input"]; ok {
		r.Input = raw
		delete(m, "input")
		if err := r.readInput(); err != nil {
			return nil, err
		}
	}
	if len(m) > 0 {
		r.Extra = m
	}
	return r, nil
}

// readInput reads input's messages: a string is one user message.
func (r *ResponsesRequest) readInput() error {
	in := bytes.TrimSpace(r.Input)
	switch {
	case len(in) == 0 || string(in) == "null":
		return nil
	case in[0] == '"':
		var s string
		if err := json.Unmarshal(in, &s); err != nil {
			return errors.New(describeJSON(err))
		}
		r.items = []responsesItem{{Type: "message", Role: "user", text: s}}
		return nil
	case in[0] != '[':
		return errors.New(`field "input": want a string or an array of items`)
	}
	if err := json.Unmarshal(in, &r.items); err != nil {
		return fmt.Errorf(`field "input": %s`, describeJSON(err))
	}
	for i := range r.items {
		it := &r.items[i]
		if it.Role == "" || (it.Type != "" && it.Type != "message") {
			continue // a function call, its output, reasoning...
		}
		var err error
		if it.text, err = partsText(it.Content, "input_text", "output_text", "text"); err != nil {
			return fmt.Errorf("input[%d].content: %w", i, err)
		}
	}
	return nil
}

// partsText reads a content that is a string or a list of typed parts,
// joining the text of the parts of the given types.
func partsText(raw json.RawMessage, types ...string) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	if raw[0] == '"' {
		var s string
		err := json.Unmarshal(raw, &s)
		return s, err
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", errors.New("want a string or an array of content parts")
	}
	var texts []string
	for _, p := range parts {
		for _, t := range types {
			if p.Type == t {
				texts = append(texts, p.Text)
			}
		}
	}
	return strings.Join(texts, "\n"), nil
}

// MarshalJSON implements json.Marshaler.
func (r ResponsesRequest) MarshalJSON() ([]byte, error) {
	m := fields(r.Extra, 4)
	m["model"] = r.Model
	if r.Instructions != "" || r.hasInstructions {
		m["instructions"] = r.Instructions
	}
	if r.Input != nil {
		m["input"] = r.Input
	}
	if r.Stream != nil {
		m["stream"] = *r.Stream
	}
	return Marshal(m)
}

func (r *ResponsesRequest) ModelName() string { return r.Model }

// conversation: the input holds at least one message. Input of only
// function call outputs continues a tool loop begun in an earlier request
// (previous_response_id): it goes out as it came.
func (r *ResponsesRequest) Conversation() bool {
	if len(r.items) > 0 && r.PreviousResponseID() != "" {
		return true // a later turn, or a tool loop's step, chained by id
	}
	for _, it := range r.items {
		if it.Role != "" && (it.Type == "" || it.Type == "message") {
			return true
		}
	}
	return false
}

// MemoryMessages lists instructions as the system message, then input's
// messages. The input's own system and developer messages stay where they
// are: only instructions is replaced.
func (r *ResponsesRequest) MemoryMessages() []memory.Message {
	var out []memory.Message
	if r.Instructions != "" {
		out = append(out, memory.Message{Role: "system", Content: r.Instructions})
	}
	for _, it := range r.items {
		switch it.Role {
		case "user", "assistant":
			out = append(out, memory.Message{Role: it.Role, Content: it.text})
		case "system", "developer":
			out = append(out, memory.Message{Role: "developer", Content: it.text})
		}
	}
	return out
}

func (r *ResponsesRequest) Options() (numCtx, numPredict int) {
	return 0, answerCap(r.Extra, "max_output_tokens")
}

func (r *ResponsesRequest) LastUser() string {
	for i := len(r.items) - 1; i >= 0; i-- {
		if r.items[i].Role == "user" {
			return r.items[i].text
		}
	}
	return ""
}

// WithMemory writes every layer into instructions: the caller's
// instructions, systemprompt.md, the rules, the semantic memories and the
// recent turns as text. input goes out as it came.
func (r *ResponsesRequest) WithMemory(mc *memory.Context) any {
	if unchanged(mc, r.Instructions) {
		return nil
	}
	out := *r
	out.Instructions = joinText(mc.System, recentText(mc.Recent))
	if len(mc.Blocks) > 0 || mc.KeepFrom > 0 {
		out.Input = r.inputWith(mc)
	}
	return &out
}

// inputWith returns the input with each memory block at the start of its
// user message, and without the items a compaction leaves out.
func (r *ResponsesRequest) inputWith(mc *memory.Context) json.RawMessage {
	in := bytes.TrimSpace(r.Input)
	if len(in) > 0 && in[0] == '"' {
		return stringContent(blockAt(mc.Blocks, 0) + r.items[0].text)
	}
	raw := rawParts(in)
	if len(raw) != len(r.items) {
		return r.Input
	}
	lead, from, user := keptFrom(len(r.items), 0, mc.KeepFrom, func(i int) bool { return r.items[i].Role == "user" })
	for i, it := range r.items[from:] {
		if it.Role != "user" {
			continue
		}
		if b := blockAt(mc.Blocks, user); b != "" {
			raw[from+i] = withField(raw[from+i], "content", prefixContent(it.Content, b, "input_text"))
		}
		user++
	}
	raw = append(raw[:lead:lead], raw[from:]...)
	out, err := Marshal(raw)
	if err != nil {
		return r.Input
	}
	return out
}
