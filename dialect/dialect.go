// Package dialect holds the five conversational APIs Ollama serves, one
// type each behind one interface: how a request is parsed and memory
// written into it, how its answer is read as it streams past, which
// record ends that answer, and the shape of an error. A request's dialect
// is chosen once, from its route; nothing outside this package asks which
// dialect it has.
package dialect

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/vera-proxy/vera/memory"
)

// Dialect is one of the conversational APIs Ollama serves.
type Dialect interface {
	// String names the dialect, for metrics and logs.
	String() string
	// Parse decodes a request body. The error is meant for the client.
	Parse(body []byte) (Request, error)
	// SSE reports whether answers stream as Server-Sent Events (else
	// NDJSON).
	SSE() bool
	// Read takes one record of a streamed answer: an NDJSON line, or the
	// data of one SSE event.
	Read(a *Answer, record []byte)
	// ReadWhole takes the body of an answer that was not streamed.
	ReadWhole(a *Answer, body []byte)
	// Final reports whether the data of an SSE event is the answer's last
	// record: the one after which clients take the answer as complete.
	Final(data []byte) bool
	// ErrorBody renders an error in the dialect's own shape.
	ErrorBody(code int, msg string) any
	// ErrorEvent renders msg as the SSE event that ends a broken stream.
	ErrorEvent(msg string) []byte
	// Retarget rewrites a request for another model (tier routing); strip
	// takes a /think prefix off the user's text, and think then asks the
	// model to think where the dialect can say so.
	Retarget(body []byte, model string, strip, think bool) ([]byte, error)
	// StripThinking returns the answer's body with inline <think> blocks
	// taken out (routing.strip_think), or nil when the dialect's answers
	// are not filtered.
	StripThinking(body io.ReadCloser, stream bool) io.ReadCloser
}

// Request is what memory needs from a chat request, whichever dialect it
// came in.
type Request interface {
	ModelName() string
	// Conversation reports whether the request carries a conversation
	// vera works on; one that does not (a load or unload call, a raw
	// prompt...) is forwarded byte for byte.
	Conversation() bool
	// History reports whether the request carries its conversation's
	// history, so that it is a turn of a conversation (generate's prompt
	// is the whole of it).
	History() bool
	// ChainsByID reports whether the request carries no history but
	// names the answer it follows (PreviousResponseID).
	ChainsByID() bool
	MemoryMessages() []memory.Message
	// Options returns num_ctx and the answer's token cap; 0 when unset.
	Options() (numCtx, numPredict int)
	LastUser() string
	FirstUser() string
	ToolLoop() bool
	PreviousResponseID() string
	// WithMemory returns the request to forward with mc's layers in place,
	// or nil when they change nothing (the original bytes then go out).
	WithMemory(mc *memory.Context) any
}

// The five dialects. Each is a value without state.
type (
	// OllamaChat is POST /api/chat.
	OllamaChat struct{ ndjson }
	// OllamaGenerate is POST /api/generate.
	OllamaGenerate struct{ ndjson }
	// OpenAIChat is POST /v1/chat/completions.
	OpenAIChat struct{ sse }
	// OpenAIResponses is POST /v1/responses.
	OpenAIResponses struct{ sse }
	// AnthropicMessages is POST /v1/messages.
	AnthropicMessages struct{ sse }
)

// Every dialect implements the interface.
var (
	_ Dialect = OllamaChat{}
	_ Dialect = OllamaGenerate{}
	_ Dialect = OpenAIChat{}
	_ Dialect = OpenAIResponses{}
	_ Dialect = AnthropicMessages{}
)

func (OllamaChat) String() string        { return "ollama-chat" }
func (OllamaGenerate) String() string    { return "ollama-generate" }
func (OpenAIChat) String() string        { return "openai-chat" }
func (OpenAIResponses) String() string   { return "openai-responses" }
func (AnthropicMessages) String() string { return "anthropic-messages" }

// Parse implements Dialect.
func (OllamaChat) Parse(body []byte) (Request, error) { return nonNil(ParseChatRequest(body)) }

// Parse implements Dialect.
func (OllamaGenerate) Parse(body []byte) (Request, error) { return nonNil(ParseGenerateRequest(body)) }

// Parse implements Dialect.
func (OpenAIChat) Parse(body []byte) (Request, error) { return nonNil(ParseOpenAIRequest(body)) }

// Parse implements Dialect.
func (OpenAIResponses) Parse(body []byte) (Request, error) {
	return nonNil(ParseResponsesRequest(body))
}

// Parse implements Dialect.
func (AnthropicMessages) Parse(body []byte) (Request, error) {
	return nonNil(ParseMessagesRequest(body))
}

// nonNil keeps a failed parse from returning a typed nil inside a
// non-nil Request.
func nonNil[R Request](r R, err error) (Request, error) {
	if err != nil {
		return nil, err
	}
	return r, nil
}

// All lists the five dialects.
func All() []Dialect {
	return []Dialect{OllamaChat{}, OllamaGenerate{}, OpenAIChat{}, OpenAIResponses{}, AnthropicMessages{}}
}

// Of tells the dialect of a request vera does not intercept, for the
// shape of its errors.
func Of(path string) Dialect {
	switch {
	case path == "/v1/messages" || strings.HasPrefix(path, "/v1/messages/"):
		return AnthropicMessages{}
	case strings.HasPrefix(path, "/v1/"):
		return OpenAIChat{}
	}
	return OllamaChat{}
}

// ndjson is what Ollama's own dialects share: NDJSON answers, ended by a
// record with done:true, and {"error":"..."} errors.
type ndjson struct{}

func (ndjson) SSE() bool                       { return false }
func (ndjson) Final([]byte) bool               { return false }
func (ndjson) ErrorBody(_ int, msg string) any { return map[string]string{"error": msg} }

// ErrorEvent implements Dialect: an Ollama route that answers with SSE
// does so as OpenAI's chat completions would.
func (ndjson) ErrorEvent(msg string) []byte { return OpenAIChat{}.ErrorEvent(msg) }

// StripThinking implements Dialect: message.content, or response for
// generate.
func (ndjson) StripThinking(body io.ReadCloser, stream bool) io.ReadCloser {
	return newThinkNDJSON(body, stream)
}

// sse is what the OpenAI and Anthropic dialects share: Server-Sent Events.
type sse struct{}

func (sse) SSE() bool { return true }

// StripThinking implements Dialect: only chat completions answers are
// filtered.
func (sse) StripThinking(io.ReadCloser, bool) io.ReadCloser { return nil }

// StripThinking implements Dialect: the deltas of choices[0].
func (OpenAIChat) StripThinking(body io.ReadCloser, stream bool) io.ReadCloser {
	return newThinkSSE(body, stream)
}

// Final implements Dialect.
func (OpenAIChat) Final(data []byte) bool { return string(bytes.TrimSpace(data)) == "[DONE]" }

// Final implements Dialect.
func (OpenAIResponses) Final(data []byte) bool {
	return bytes.Contains(data, []byte(`"response.completed"`)) && eventType(data) == "response.completed"
}

// Final implements Dialect.
func (AnthropicMessages) Final(data []byte) bool {
	return bytes.Contains(data, []byte(`"message_stop"`)) && eventType(data) == "message_stop"
}

// ErrorBody implements Dialect: OpenAI's error object.
func (sse) ErrorBody(code int, msg string) any {
	return map[string]any{"error": map[string]any{"message": msg, "type": openAIErrorType(code)}}
}

// ErrorBody implements Dialect (https://docs.anthropic.com/en/api/errors).
func (AnthropicMessages) ErrorBody(code int, msg string) any {
	return map[string]any{"type": "error", "error": map[string]any{"type": anthropicErrorType(code), "message": msg}}
}

// ErrorEvent implements Dialect: a chunk that carries the error.
func (d sse) ErrorEvent(msg string) []byte {
	return event("", d.ErrorBody(http.StatusInternalServerError, msg))
}

// ErrorEvent implements Dialect
// (https://docs.anthropic.com/en/api/messages-streaming#error-events).
func (d AnthropicMessages) ErrorEvent(msg string) []byte {
	return event("error", d.ErrorBody(http.StatusInternalServerError, msg))
}

// ErrorEvent implements Dialect: the Responses stream's error event.
func (OpenAIResponses) ErrorEvent(msg string) []byte {
	return event("error", map[string]any{"type": "error", "code": "api_error", "message": msg})
}

// event renders one SSE event.
func event(name string, data any) []byte {
	var rec []byte
	if name != "" {
		rec = append(rec, "event: "+name+"\n"...)
	}
	line, _ := json.Marshal(data)
	rec = append(rec, "data: "...)
	rec = append(rec, line...)
	return append(rec, '\n', '\n')
}

// openAIErrorType is OpenAI's error type for a status.
func openAIErrorType(code int) string {
	switch {
	case code == http.StatusBadRequest:
		return "invalid_request_error"
	case code == http.StatusUnauthorized:
		return "authentication_error"
	case code == http.StatusNotFound:
		return "not_found_error"
	case code == http.StatusTooManyRequests:
		return "rate_limit_error"
	case code >= 500:
		return "api_error"
	default:
		return fmt.Sprintf("http_%d", code)
	}
}

// anthropicErrorType is Anthropic's error type for a status
// (https://docs.anthropic.com/en/api/errors).
func anthropicErrorType(code int) string {
	switch {
	case code == http.StatusBadRequest:
		return "invalid_request_error"
	case code == http.StatusUnauthorized:
		return "authentication_error"
	case code == http.StatusForbidden:
		return "permission_error"
	case code == http.StatusNotFound:
		return "not_found_error"
	case code == http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case code == http.StatusTooManyRequests:
		return "rate_limit_error"
	case code >= 500:
		return "api_error"
	}
	return "invalid_request_error"
}

// eventType reads the "type" of a JSON event without decoding the rest.
func eventType(data []byte) string {
	var e struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(data, &e) != nil {
		return ""
	}
	return e.Type
}

// Marshal encodes a request vera rewrites. Unlike json.Marshal it leaves
// '<', '>' and '&' as they are: what the caller wrote reaches Ollama in
// the caller's characters, not as \u003c escapes.
func Marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte{'\n'}), nil
}
