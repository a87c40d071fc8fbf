package proxy

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
)

// dialect is one of the conversational APIs Ollama serves. It is
// chosen once, from the route, and everything downstream takes it: how the
// request is parsed and written back, how the answer is read and where it
// ends, and the shape of an error.
type dialect int

const (
	ollamaChat        dialect = iota // POST /api/chat
	ollamaGenerate                   // POST /api/generate
	openAIChat                       // POST /v1/chat/completions
	openAIResponses                  // POST /v1/responses
	anthropicMessages                // POST /v1/messages
)

func (d dialect) String() string {
	return [...]string{"ollama-chat", "ollama-generate", "openai-chat", "openai-responses", "anthropic-messages"}[d]
}

// parse decodes a request body of the dialect. The error is meant for the
// client.
func (d dialect) parse(body []byte) (chatRequest, error) {
	switch d {
	case ollamaGenerate:
		return ParseGenerateRequest(body)
	case openAIChat:
		return ParseOpenAIRequest(body)
	case openAIResponses:
		return ParseResponsesRequest(body)
	case anthropicMessages:
		return ParseMessagesRequest(body)
	}
	return ParseChatRequest(body)
}

// sse reports whether the dialect streams Server-Sent Events (else NDJSON).
func (d dialect) sse() bool { return d != ollamaChat && d != ollamaGenerate }

// dialectOf tells the dialect of a request vera does not intercept, for
// the shape of its errors.
func dialectOf(path string) dialect {
	switch {
	case path == "/v1/messages" || strings.HasPrefix(path, "/v1/messages/"):
		return anthropicMessages
	case strings.HasPrefix(path, "/v1/"):
		return openAIChat
	}
	return ollamaChat
}

// errorBody renders an error in the dialect's own shape.
func (d dialect) errorBody(code int, msg string) any {
	switch d {
	case openAIChat, openAIResponses:
		return map[string]any{"error": map[string]any{"message": msg, "type": openAIErrorType(code)}}
	case anthropicMessages:
		return map[string]any{"type": "error", "error": map[string]any{"type": anthropicErrorType(code), "message": msg}}
	}
	return map[string]string{"error": msg}
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

// sseFinal reports whether the data of an SSE event is the answer's last
// record: the one after which clients take the answer as complete.
func (d dialect) sseFinal(data []byte) bool {
	switch d {
	case openAIChat:
		return string(bytes.TrimSpace(data)) == "[DONE]"
	case openAIResponses:
		return bytes.Contains(data, []byte(`"response.completed"`)) && eventType(data) == "response.completed"
	case anthropicMessages:
		return bytes.Contains(data, []byte(`"message_stop"`)) && eventType(data) == "message_stop"
	}
	return false
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

// marshal encodes a request vera rewrites. Unlike json.Marshal it leaves
// '<', '>' and '&' as they are: what the caller wrote reaches Ollama in
// the caller's characters, not as \u003c escapes.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte{'\n'}), nil
}
