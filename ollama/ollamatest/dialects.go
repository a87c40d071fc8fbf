package ollamatest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ollama/ollama/api"
	"github.com/stretchr/testify/require"
)

// Dialects is a Server plus the three dialects it does not speak itself:
// /api/generate (NDJSON), /v1/responses (the Responses event stream) and
// /v1/messages (Anthropic's event stream), each answering "Hello from
// Ollama" or the Server's Reply (Anthropic's with a thinking block first).
// It keeps every body it received on the five chat routes.
type Dialects struct {
	*httptest.Server
	// Fake answers every other route.
	Fake *Server
	mu   sync.Mutex
	got  map[string][][]byte
	// responses numbers the Responses API's answers (resp_1, resp_2...).
	responses atomic.Int64
}

// NewDialects starts a Dialects, closed when the test ends.
func NewDialects(t testing.TB) *Dialects {
	d := &Dialects{Fake: New(t), got: map[string][][]byte{}}
	d.Server = httptest.NewServer(http.HandlerFunc(d.serve))
	t.Cleanup(d.Close)
	return d
}

// Last returns the last body received on path, decoded.
func (d *Dialects) Last(t testing.TB, path string) map[string]any {
	t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	require.NotEmpty(t, d.got[path], "nothing reached %s", path)
	var m map[string]any
	require.NoError(t, json.Unmarshal(d.got[path][len(d.got[path])-1], &m))
	return m
}

// Bodies returns every body received on path (the chat routes, the fake's
// own included), in order.
func (d *Dialects) Bodies(path string) [][]byte {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([][]byte(nil), d.got[path]...)
}

func (d *Dialects) keep(path string, body []byte) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.got[path] = append(d.got[path], body)
}

// LastRaw returns the last body received on path as it came, or "".
func (d *Dialects) LastRaw(path string) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.got[path]) == 0 {
		return ""
	}
	return string(d.got[path][len(d.got[path])-1])
}

func (d *Dialects) serve(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/api/generate", "/v1/responses", "/v1/messages":
	case "/api/chat", "/v1/chat/completions":
		body, _ := io.ReadAll(r.Body)
		d.keep(r.URL.Path, body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		proxyTo(d.Fake.URL, w, r)
		return
	default:
		// embeddings, show...: the fake's.
		proxyTo(d.Fake.URL, w, r)
		return
	}
	body, _ := io.ReadAll(r.Body)
	d.keep(r.URL.Path, body)
	a := dialectAnswer{w: w, fl: w.(http.Flusher), body: body, prompt: 9, toks: d.Fake.tokens()}
	_ = json.Unmarshal(body, &a.req)
	a.stream = a.req.Stream != nil && *a.req.Stream
	// The prompt in the model's tokens, cut as Ollama cuts it (its
	// Responses and Anthropic routes take no num_ctx: the default window).
	if msgs := messagesOf(r.URL.Path, body); msgs != nil {
		a.prompt = max(d.Fake.promptTokens(api.ChatRequest{Messages: msgs}), 9)
	}
	a.answer = strings.Join(a.toks, "")
	switch r.URL.Path {
	case "/api/generate":
		a.generate(a.req.Stream == nil || *a.req.Stream)
	case "/v1/responses":
		a.responses(fmt.Sprintf("resp_%d", d.responses.Add(1)))
	case "/v1/messages":
		a.messages()
	}
}

// dialectAnswer is one answer of the fake in a dialect Ollama serves
// itself: Ollama's generate, OpenAI's Responses or Anthropic's Messages.
type dialectAnswer struct {
	w      http.ResponseWriter
	fl     http.Flusher
	body   []byte
	prompt int // the prompt's tokens
	toks   []string
	answer string
	stream bool // stream was asked for (generate streams unless told not)
	req    struct {
		Model  string `json:"model"`
		Stream *bool  `json:"stream"`
	}
}

// event writes one server-sent event and flushes it.
func (a *dialectAnswer) event(typ, data string) {
	fmt.Fprintf(a.w, "event: %s\ndata: %s\n\n", typ, data)
	a.fl.Flush()
}

// generate answers /api/generate, as NDJSON when streaming.
func (a *dialectAnswer) generate(stream bool) {
	w, model := a.w, a.req.Model
	if !stream {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"model":%q,"created_at":"2026-11-22T10:00:00Z","response":%q,"done":true,"done_reason":"stop"}`, model, a.answer)
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	fmt.Fprintf(w, `{"model":%q,"created_at":"2026-11-22T10:00:00Z","response":"","thinking":"let me think","done":false}`+"\n", model)
	for _, tok := range a.toks {
		fmt.Fprintf(w, `{"model":%q,"created_at":"2026-11-22T10:00:00Z","response":%q,"done":false}`+"\n", model, tok)
		a.fl.Flush()
	}
	fmt.Fprintf(w, `{"model":%q,"created_at":"2026-11-22T10:00:01Z","response":"","done":true,"done_reason":"stop"}`+"\n", model)
}

// responses answers /v1/responses as response id, as events when
// streaming.
func (a *dialectAnswer) responses(id string) {
	w, model := a.w, a.req.Model
	final := fmt.Sprintf(`{"id":%q,"object":"response","created_at":1795000000,"status":"completed","model":%q,"output":[{"type":"message","id":"msg_1","status":"completed","role":"assistant","content":[{"type":"output_text","text":%q,"annotations":[]}]}],"usage":{"input_tokens":%d,"output_tokens":3,"total_tokens":%d}}`, id, model, a.answer, a.prompt, a.prompt+3)
	if !a.stream {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, final)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	a.event("response.created", fmt.Sprintf(`{"type":"response.created","sequence_number":0,"response":{"id":%q,"object":"response","status":"in_progress","model":%q,"output":[]}}`, id, model))
	for i, tok := range a.toks {
		a.event("response.output_text.delta", fmt.Sprintf(`{"type":"response.output_text.delta","sequence_number":%d,"item_id":"msg_1","output_index":0,"content_index":0,"delta":%q}`, i+1, tok))
	}
	a.event("response.output_text.done", fmt.Sprintf(`{"type":"response.output_text.done","sequence_number":4,"item_id":"msg_1","output_index":0,"content_index":0,"text":%q}`, a.answer))
	a.event("response.completed", `{"type":"response.completed","sequence_number":5,"response":`+final+`}`)
}

// messages answers /v1/messages, as events when streaming.
func (a *dialectAnswer) messages() {
	w, model := a.w, a.req.Model
	if !a.stream {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"msg_1","type":"message","role":"assistant","model":%q,"content":[{"type":"thinking","thinking":"let me think","signature":""},{"type":"text","text":%q}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":%d,"output_tokens":3}}`, model, a.answer, a.prompt)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	// As Ollama: message_start carries an estimate (a quarter of the
	// request's bytes), message_delta the count.
	a.event("message_start", fmt.Sprintf(`{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":%q,"content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":%d,"output_tokens":1}}}`, model, max(len(a.body)/4, 1)))
	a.event("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}`)
	a.event("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"let me think"}}`)
	a.event("content_block_stop", `{"type":"content_block_stop","index":0}`)
	a.event("content_block_start", `{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}`)
	a.event("ping", `{"type":"ping"}`)
	for _, tok := range a.toks {
		a.event("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":%q}}`, tok))
	}
	a.event("content_block_stop", `{"type":"content_block_stop","index":1}`)
	a.event("message_delta", fmt.Sprintf(`{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"input_tokens":%d,"output_tokens":3}}`, a.prompt))
	a.event("message_stop", `{"type":"message_stop"}`)
}

// messagesOf reads the messages of a Responses or Anthropic request, its
// instructions or system text first; nil for another route.
func messagesOf(path string, body []byte) []api.Message {
	var req struct {
		Instructions string          `json:"instructions"`
		Input        json.RawMessage `json:"input"`
		System       json.RawMessage `json:"system"`
		Messages     []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if json.Unmarshal(body, &req) != nil {
		return nil
	}
	var out []api.Message
	switch path {
	case "/v1/responses":
		if req.Instructions != "" {
			out = append(out, api.Message{Role: "system", Content: req.Instructions})
		}
		var s string
		if json.Unmarshal(req.Input, &s) == nil {
			return append(out, api.Message{Role: "user", Content: s})
		}
		var items []struct {
			Type    string          `json:"type"`
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
			Output  string          `json:"output"`
		}
		_ = json.Unmarshal(req.Input, &items)
		for _, it := range items {
			switch {
			case it.Type == "function_call_output":
				out = append(out, api.Message{Role: "tool", Content: it.Output})
			case it.Role != "":
				out = append(out, api.Message{Role: it.Role, Content: textOf(it.Content)})
			}
		}
	case "/v1/messages":
		if s := textOf(req.System); s != "" {
			out = append(out, api.Message{Role: "system", Content: s})
		}
		for _, m := range req.Messages {
			out = append(out, api.Message{Role: m.Role, Content: textOf(m.Content)})
		}
	default:
		return nil
	}
	return out
}

// proxyTo forwards r to base, streaming the answer back.
func proxyTo(base string, w http.ResponseWriter, r *http.Request) {
	out, _ := http.NewRequestWithContext(r.Context(), r.Method, base+r.URL.RequestURI(), r.Body)
	out.Header = r.Header.Clone()
	res, err := http.DefaultTransport.RoundTrip(out)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer res.Body.Close()
	for k, v := range res.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(res.StatusCode)
	buf := make([]byte, 32<<10)
	for {
		n, err := res.Body.Read(buf)
		w.Write(buf[:n])
		w.(http.Flusher).Flush()
		if err != nil {
			return
		}
	}
}
