package cloud

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/vera-proxy/vera/dialect"
)

// The request side of the translation: an Ollama /api/chat or
// /api/generate body becomes an OpenAI chat completions body. Everything
// the cloud understands is carried; what it has no equivalent for is left
// out (docs/cloud.md lists those fields).

// The Ollama request is read by package dialect, as the proxy reads it;
// these are the fields it keeps raw that the cloud has a use for.

// ollamaFields are a chat or generate request's.
type ollamaFields struct {
	Images  []string        `json:"images"` // generate
	Tools   json.RawMessage `json:"tools"`
	Format  json.RawMessage `json:"format"`
	Options map[string]any  `json:"options"`
	Think   json.RawMessage `json:"think"`
}

// ollamaMessage is a message with the fields a cloud message carries.
type ollamaMessage struct {
	Role       string
	Content    string
	Images     []string         `json:"images"`
	ToolCalls  []ollamaToolCall `json:"tool_calls"`
	ToolName   string           `json:"tool_name"`
	ToolCallID string           `json:"tool_call_id"`
}

type ollamaToolCall struct {
	ID       string `json:"id,omitempty"`
	Function struct {
		Index     int             `json:"index,omitempty"`
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

// openAIRequest is what goes to the cloud's chat completions.
type openAIRequest struct {
	Model          string          `json:"model"`
	Messages       []openAIMessage `json:"messages"`
	Tools          json.RawMessage `json:"tools,omitempty"`
	ResponseFormat any             `json:"response_format,omitempty"`
	Temperature    any             `json:"temperature,omitempty"`
	TopP           any             `json:"top_p,omitempty"`
	MaxTokens      any             `json:"max_tokens,omitempty"`
	MaxCompletion  any             `json:"max_completion_tokens,omitempty"`
	Stop           any             `json:"stop,omitempty"`
	Seed           any             `json:"seed,omitempty"`
	FrequencyPen   any             `json:"frequency_penalty,omitempty"`
	PresencePen    any             `json:"presence_penalty,omitempty"`
	Reasoning      string          `json:"reasoning_effort,omitempty"`
	Stream         bool            `json:"stream"`
	StreamOptions  any             `json:"stream_options,omitempty"`
}

type openAIMessage struct {
	Role       string           `json:"role"`
	Content    any              `json:"content"`
	ToolCalls  []openAIToolCall `json:"tool_calls,omitempty"`
	ToolCallID string           `json:"tool_call_id,omitempty"`
}

type openAIToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// request is a translated request: the body for the cloud, and whether
// the client wants a stream.
type request struct {
	body   []byte
	stream bool
	model  string // the name the client asked for
}

// translateChat turns an Ollama /api/chat (or, with generate, an
// /api/generate) body into a chat completions body for cloudModel.
// OpenAI's own API (openai) wants max_completion_tokens, which its
// reasoning models require; other providers take max_tokens.
func translateChat(body []byte, cloudModel string, generate, openai bool) (request, error) {
	in, msgs, err := readOllama(body, generate)
	if err != nil {
		return request{}, err
	}
	out := openAIRequest{Model: cloudModel, Stream: in.stream, Tools: toolsFor(in.Tools)}
	if out.Stream {
		out.StreamOptions = map[string]bool{"include_usage": true}
	}
	if out.Messages, err = translateMessages(msgs); err != nil {
		return request{}, err
	}
	if out.ResponseFormat, err = responseFormat(in.Format); err != nil {
		return request{}, err
	}
	o := in.Options
	out.Temperature, out.TopP, out.Seed = o["temperature"], o["top_p"], o["seed"]
	out.FrequencyPen, out.PresencePen = o["frequency_penalty"], o["presence_penalty"]
	if n, ok := o["num_predict"].(float64); ok && n > 0 {
		if openai {
			out.MaxCompletion = int(n)
		} else {
			out.MaxTokens = int(n)
		}
	}
	if stop, ok := o["stop"]; ok {
		out.Stop = stop
	}
	out.Reasoning = reasoningEffort(in.Think)
	b, err := json.Marshal(out)
	if err != nil {
		return request{}, err
	}
	return request{body: b, stream: out.Stream, model: in.model}, nil
}

// ollamaIn is what the cloud reads of an Ollama request.
type ollamaIn struct {
	ollamaFields
	model  string
	stream bool // absent: Ollama streams
}

// readOllama reads a chat (or, with generate, a generate) request as the
// proxy's dialect reads it, with the fields the cloud needs besides, and
// its messages: a generate request's system and prompt become two.
func readOllama(body []byte, generate bool) (ollamaIn, []ollamaMessage, error) {
	var in ollamaIn
	var msgs []ollamaMessage
	if generate {
		r, err := dialect.ParseGenerateRequest(body)
		if err != nil {
			return in, nil, err
		}
		in.model, in.stream = r.Model, r.Stream == nil || *r.Stream
		if err := decodeFields(r.Extra, &in.ollamaFields); err != nil {
			return in, nil, err
		}
		if r.System != "" {
			msgs = append(msgs, ollamaMessage{Role: "system", Content: r.System})
		}
		msgs = append(msgs, ollamaMessage{Role: "user", Content: r.Prompt, Images: in.Images})
		return in, msgs, nil
	}
	r, err := dialect.ParseChatRequest(body)
	if err != nil {
		return in, nil, err
	}
	in.model, in.stream = r.Model, r.Stream == nil || *r.Stream
	if err := decodeFields(r.Extra, &in.ollamaFields); err != nil {
		return in, nil, err
	}
	for i, m := range r.Messages {
		om := ollamaMessage{Role: m.Role, Content: m.Content}
		if err := decodeFields(m.Extra, &om); err != nil {
			return in, nil, fmt.Errorf("messages[%d]: %w", i, err)
		}
		msgs = append(msgs, om)
	}
	return in, msgs, nil
}

// decodeFields decodes the raw fields a request (or message) kept into
// dst.
func decodeFields(extra map[string]json.RawMessage, dst any) error {
	if len(extra) == 0 {
		return nil
	}
	b, err := json.Marshal(extra)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, dst); err != nil {
		return fmt.Errorf("the request is not valid JSON: %w", err)
	}
	return nil
}

// translateMessages carries roles, text, images (as content parts) and
// tool calls with their ids. Ollama's tool calls may have no id: they get
// one, and the tool results after them take the ids of the calls they
// answer, in order.
func translateMessages(msgs []ollamaMessage) ([]openAIMessage, error) {
	out := make([]openAIMessage, 0, len(msgs))
	var open []openAIToolCall // calls not answered yet
	for i, m := range msgs {
		m.Role = strings.ToLower(m.Role) // as Ollama reads roles
		switch m.Role {
		case "system", "user", "assistant", "tool":
		default:
			return nil, fmt.Errorf("messages[%d]: role %q has no equivalent in the cloud's API", i, m.Role)
		}
		om := openAIMessage{Role: m.Role, Content: m.Content}
		if len(m.Images) > 0 {
			parts := []any{}
			if m.Content != "" {
				parts = append(parts, map[string]string{"type": "text", "text": m.Content})
			}
			for _, img := range m.Images {
				parts = append(parts, map[string]any{"type": "image_url", "image_url": map[string]string{"url": dataURL(img)}})
			}
			om.Content = parts
		}
		if len(m.ToolCalls) > 0 {
			if m.Content == "" {
				om.Content = nil
			}
			for k, tc := range m.ToolCalls {
				c := openAIToolCall{ID: tc.ID, Type: "function"}
				if c.ID == "" {
					c.ID = fmt.Sprintf("call_%d_%d", i, k)
				}
				c.Function.Name = tc.Function.Name
				c.Function.Arguments = string(argumentsText(tc.Function.Arguments))
				om.ToolCalls = append(om.ToolCalls, c)
			}
			open = append(open[:0], om.ToolCalls...)
		}
		if m.Role == "tool" {
			om.ToolCallID = answered(&open, m.ToolCallID, m.ToolName)
			if om.ToolCallID == "" {
				// No call to answer: the provider would refuse a tool
				// message without one, so the result goes as the user's.
				label := "Tool result"
				if m.ToolName != "" {
					label += " (" + m.ToolName + ")"
				}
				om.Role, om.Content = "user", label+": "+m.Content
			}
		}
		out = append(out, om)
	}
	return out, nil
}

// answered takes the call a tool result answers off open and returns its
// id: the one with the result's id, else the first of the tool's name,
// else the first one. A result that names an id keeps it.
func answered(open *[]openAIToolCall, id, name string) string {
	at := -1
	for k, c := range *open {
		if (id != "" && c.ID == id) || (id == "" && at < 0 && c.Function.Name == name) {
			at = k
			break
		}
	}
	if at < 0 && id == "" && len(*open) > 0 {
		at = 0
	}
	if at < 0 {
		return id
	}
	id = (*open)[at].ID
	*open = append((*open)[:at], (*open)[at+1:]...)
	return id
}

// argumentsText is a tool call's arguments as the JSON text OpenAI's API
// wants.
func argumentsText(args json.RawMessage) []byte {
	a := strings.TrimSpace(string(args))
	if a == "" || a == "null" {
		return []byte("{}")
	}
	var s string
	if json.Unmarshal(args, &s) == nil {
		return []byte(s) // already text
	}
	return []byte(a)
}

// dataURL makes an Ollama image (base64, no header) a data URL, with the
// media type its first bytes tell.
func dataURL(b64 string) string {
	if strings.HasPrefix(b64, "data:") {
		return b64
	}
	mt := "image/jpeg"
	switch {
	case strings.HasPrefix(b64, "iVBOR"):
		mt = "image/png"
	case strings.HasPrefix(b64, "R0lG"):
		mt = "image/gif"
	case strings.HasPrefix(b64, "UklG"):
		mt = "image/webp"
	}
	return "data:" + mt + ";base64," + b64
}

// responseFormat maps Ollama's format: "json" is JSON mode, an object is
// a JSON schema.
func responseFormat(format json.RawMessage) (any, error) {
	f := strings.TrimSpace(string(format))
	switch {
	case f == "" || f == "null" || f == `""`:
		return nil, nil
	case f == `"json"`:
		return map[string]string{"type": "json_object"}, nil
	case strings.HasPrefix(f, "{"):
		return map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "response", "schema": json.RawMessage(format)}}, nil
	}
	return nil, errors.New(`field "format": want "json" or a JSON schema`)
}

// reasoningEffort maps Ollama's think: true is medium, a level is itself,
// false or nothing leaves the model's default.
func reasoningEffort(think json.RawMessage) string {
	var b bool
	if json.Unmarshal(think, &b) == nil {
		if b {
			return "medium"
		}
		return ""
	}
	var level string
	if json.Unmarshal(think, &level) == nil {
		switch level {
		case "low", "medium", "high":
			return level
		}
	}
	return ""
}

// toolsFor passes Ollama's tools on (they have OpenAI's shape), with the
// empty "properties": null that Ollama's Go client writes for a tool
// without parameters made {} (OpenAI refuses null there).
func toolsFor(r json.RawMessage) json.RawMessage {
	if s := strings.TrimSpace(string(r)); s == "" || s == "null" {
		return nil
	}
	var tools []map[string]any
	if json.Unmarshal(r, &tools) != nil {
		return r
	}
	for _, t := range tools {
		fn, _ := t["function"].(map[string]any)
		if fn == nil {
			continue
		}
		params, _ := fn["parameters"].(map[string]any)
		if params == nil {
			params = map[string]any{"type": "object"}
			fn["parameters"] = params
		}
		if params["properties"] == nil {
			params["properties"] = map[string]any{}
		}
	}
	b, err := json.Marshal(tools)
	if err != nil {
		return r
	}
	return b
}
