package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/ollama/ollama/api"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/memory"
)

// dialectUpstream is the fake Ollama plus the three dialects it does not
// speak itself: /api/generate (NDJSON), /v1/responses (the Responses event
// stream) and /v1/messages (Anthropic's event stream), each answering
// "Hello from Ollama" (Anthropic's with a thinking block first). It keeps
// every body it received per route.
type dialectUpstream struct {
	*httptest.Server
	fake *fakeOllama
	mu   sync.Mutex
	got  map[string][][]byte
}

func newDialectUpstream(t *testing.T) *dialectUpstream {
	d := &dialectUpstream{fake: newFakeOllama(t), got: map[string][][]byte{}}
	d.Server = httptest.NewServer(http.HandlerFunc(d.serve))
	t.Cleanup(d.Close)
	return d
}

// last returns the last body received on path, decoded.
func (d *dialectUpstream) last(t *testing.T, path string) map[string]any {
	t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	require.NotEmpty(t, d.got[path], "nothing reached %s", path)
	var m map[string]any
	require.NoError(t, json.Unmarshal(d.got[path][len(d.got[path])-1], &m))
	return m
}

func (d *dialectUpstream) lastRaw(path string) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.got[path]) == 0 {
		return ""
	}
	return string(d.got[path][len(d.got[path])-1])
}

func (d *dialectUpstream) serve(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/api/generate", "/v1/responses", "/v1/messages":
	default:
		// /api/chat, /v1/chat/completions, embeddings, show...: the fake's.
		proxyTo(d.fake.URL, w, r)
		return
	}
	body, _ := io.ReadAll(r.Body)
	d.mu.Lock()
	d.got[r.URL.Path] = append(d.got[r.URL.Path], body)
	d.mu.Unlock()
	var req struct {
		Model  string `json:"model"`
		Stream *bool  `json:"stream"`
	}
	_ = json.Unmarshal(body, &req)
	fl := w.(http.Flusher)
	toks := []string{"Hello", " from", " Ollama"}
	switch r.URL.Path {
	case "/api/generate":
		if req.Stream != nil && !*req.Stream {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"model":%q,"created_at":"2026-11-22T10:00:00Z","response":"Hello from Ollama","done":true,"done_reason":"stop"}`, req.Model)
			return
		}
		w.Header().Set("Content-Type", "application/x-ndjson")
		fmt.Fprintf(w, `{"model":%q,"created_at":"2026-11-22T10:00:00Z","response":"","thinking":"let me think","done":false}`+"\n", req.Model)
		for _, tok := range toks {
			fmt.Fprintf(w, `{"model":%q,"created_at":"2026-11-22T10:00:00Z","response":%q,"done":false}`+"\n", req.Model, tok)
			fl.Flush()
		}
		fmt.Fprintf(w, `{"model":%q,"created_at":"2026-11-22T10:00:01Z","response":"","done":true,"done_reason":"stop"}`+"\n", req.Model)
	case "/v1/responses":
		final := fmt.Sprintf(`{"id":"resp_1","object":"response","created_at":1795000000,"status":"completed","model":%q,"output":[{"type":"message","id":"msg_1","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Hello from Ollama","annotations":[]}]}],"usage":{"input_tokens":9,"output_tokens":3,"total_tokens":12}}`, req.Model)
		if req.Stream == nil || !*req.Stream {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, final)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		event := func(typ, data string) {
			fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ, data)
			fl.Flush()
		}
		event("response.created", fmt.Sprintf(`{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","status":"in_progress","model":%q,"output":[]}}`, req.Model))
		for i, tok := range toks {
			event("response.output_text.delta", fmt.Sprintf(`{"type":"response.output_text.delta","sequence_number":%d,"item_id":"msg_1","output_index":0,"content_index":0,"delta":%q}`, i+1, tok))
		}
		event("response.output_text.done", `{"type":"response.output_text.done","sequence_number":4,"item_id":"msg_1","output_index":0,"content_index":0,"text":"Hello from Ollama"}`)
		event("response.completed", `{"type":"response.completed","sequence_number":5,"response":`+final+`}`)
	case "/v1/messages":
		if req.Stream == nil || !*req.Stream {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"id":"msg_1","type":"message","role":"assistant","model":%q,"content":[{"type":"thinking","thinking":"let me think","signature":""},{"type":"text","text":"Hello from Ollama"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":9,"output_tokens":3}}`, req.Model)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		event := func(typ, data string) {
			fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ, data)
			fl.Flush()
		}
		event("message_start", fmt.Sprintf(`{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":%q,"content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":9,"output_tokens":1}}}`, req.Model))
		event("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}`)
		event("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"let me think"}}`)
		event("content_block_stop", `{"type":"content_block_stop","index":0}`)
		event("content_block_start", `{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}`)
		event("ping", `{"type":"ping"}`)
		for _, tok := range toks {
			event("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":%q}}`, tok))
		}
		event("content_block_stop", `{"type":"content_block_stop","index":1}`)
		event("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":3}}`)
		event("message_stop", `{"type":"message_stop"}`)
	}
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

func mustParse(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	require.NoError(t, err)
	return u
}

func anthropicClient(p *proc, ns string) anthropic.Client {
	return anthropic.NewClient(
		aoption.WithBaseURL("http://"+p.addr+"/"),
		aoption.WithAPIKey("ollama"),
		aoption.WithHeader("X-OpenWebUI-User-Id", ns),
		aoption.WithMaxRetries(0),
	)
}

// A fact told on any dialect is recalled on every other, through each
// dialect's official client; namespaces stay apart; thinking is not stored.
func TestMemoryAcrossDialects(t *testing.T) {
	up := newDialectUpstream(t)
	data := t.TempDir()
	p := startVera(t, "VERA_OLLAMA_URL="+up.URL, "VERA_DATA_DIR="+data)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// /api/generate, streamed, through the official Ollama client (what
	// `ollama run MODEL "prompt"` sends).
	generate := func(ns, prompt string) string {
		c := api.NewClient(mustParse(t, "http://"+p.addr), &http.Client{Transport: headerTransport{http.Header{"X-Openwebui-User-Id": {ns}}}})
		var out strings.Builder
		require.NoError(t, c.Generate(ctx, &api.GenerateRequest{Model: "llama3.2", Prompt: prompt}, func(r api.GenerateResponse) error {
			out.WriteString(r.Response)
			return nil
		}))
		return out.String()
	}
	// /v1/responses, streamed, through openai-go's Responses API.
	respond := func(ns, input string) string {
		c := openAIClient(p, ns)
		stream := c.Responses.NewStreaming(ctx, responses.ResponseNewParams{
			Model: "llama3.2", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(input)},
		})
		var out strings.Builder
		for stream.Next() {
			if e := stream.Current(); e.Type == "response.output_text.delta" {
				out.WriteString(e.Delta)
			}
		}
		require.NoError(t, stream.Err())
		return out.String()
	}
	// /v1/messages, streamed, through the official Anthropic Go client.
	message := func(ns, text string) string {
		c := anthropicClient(p, ns)
		stream := c.Messages.NewStreaming(ctx, anthropic.MessageNewParams{
			Model: "llama3.2", MaxTokens: 256,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(text))},
		})
		var out strings.Builder
		for stream.Next() {
			if d, ok := stream.Current().AsAny().(anthropic.ContentBlockDeltaEvent); ok {
				if td, ok := d.Delta.AsAny().(anthropic.TextDelta); ok {
					out.WriteString(td.Text)
				}
			}
		}
		require.NoError(t, stream.Err())
		return out.String()
	}

	assert.Equal(t, "Hello from Ollama", generate("alice", "My sister lives in Lisbon."))
	assert.Equal(t, "Hello from Ollama", message("alice", "My dog is called Biscuit."))
	assert.Equal(t, "Hello from Ollama", respond("alice", "I drive a red Fiat Panda."))

	// Each fact is recalled on the other dialects (memory lands
	// asynchronously: retry until it does).
	recalled := func(ask func() string, got func() string, want string) {
		t.Helper()
		require.Eventually(t, func() bool { ask(); return strings.Contains(got(), want) }, 10*time.Second, 50*time.Millisecond, "%q not recalled", want)
	}
	recalled(func() string { return respond("alice", "Where does my sister live?") },
		func() string { s, _ := up.last(t, "/v1/responses")["instructions"].(string); return s }, "Lisbon")
	recalled(func() string { return generate("alice", "What is my dog called?") },
		func() string { s, _ := up.last(t, "/api/generate")["system"].(string); return s }, "Biscuit")
	recalled(func() string { return message("alice", "What car do I drive?") },
		func() string { return fmt.Sprint(up.last(t, "/v1/messages")["system"]) }, "Fiat")
	chat(t, p, "alice", false, user("Where does my sister live, and what car do I drive?"))
	assert.Contains(t, systemOf(up.fake.lastChat(t)), "Lisbon", "/api/chat recalls what /api/generate was told")

	// Another namespace sees none of it, on any dialect.
	respond("bob", "Where does my sister live? What is my dog called? What car do I drive?")
	generate("bob", "Where does my sister live? What is my dog called? What car do I drive?")
	message("bob", "Where does my sister live? What is my dog called? What car do I drive?")
	for _, path := range []string{"/v1/responses", "/api/generate", "/v1/messages"} {
		for _, secret := range []string{"Lisbon", "Biscuit", "Fiat"} {
			assert.NotContains(t, up.lastRaw(path), secret, "bob on %s", path)
		}
	}

	stop(t, p)
	db := openStore(t, data)
	page, _, err := db.Scroll(context.Background(), memory.Filter{Namespace: "alice"}, "", 100)
	require.NoError(t, err)
	var texts []string
	for _, m := range page {
		texts = append(texts, m.Text)
		assert.NotContains(t, m.Text, "let me think", "thinking is never stored")
	}
	for _, want := range []string{"User: My sister lives in Lisbon.\nAssistant: Hello from Ollama", "User: My dog is called Biscuit.\nAssistant: Hello from Ollama", "User: I drive a red Fiat Panda.\nAssistant: Hello from Ollama"} {
		n := 0
		for _, txt := range texts {
			if txt == want {
				n++
			}
		}
		assert.Equal(t, 1, n, "%q stored once", want)
	}
}

// Load and unload calls, and what vera must not touch, pass byte for byte
// on every dialect, and nothing is stored.
func TestDialectsPassUntouched(t *testing.T) {
	up := newDialectUpstream(t)
	data := t.TempDir()
	p := startVera(t, "VERA_OLLAMA_URL="+up.URL, "VERA_DATA_DIR="+data)
	for _, tc := range []struct{ path, body string }{
		{"/api/generate", `{"model":"llama3.2","prompt":"","keep_alive":0}`},
		{"/api/generate", `{"model":"llama3.2"}`},
		{"/api/generate", `{"model":"llama3.2","prompt":"<|im_start|>user\nhi","raw":true}`},
		{"/api/generate", `{"model":"llama3.2","prompt":"func main() {","suffix":"}"}`},
		{"/api/generate", `{"model":"llama3.2","prompt":"and then?","context":[1,2,3]}`},
		{"/v1/responses", `{"model":"llama3.2","input":[]}`},
		{"/v1/messages", `{"model":"llama3.2","max_tokens":1,"messages":[]}`},
	} {
		res, err := http.Post("http://"+p.addr+tc.path, "application/json", strings.NewReader(tc.body))
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		assert.Equal(t, tc.body, up.lastRaw(tc.path), "byte for byte")
	}
	stop(t, p)
	n, err := openStore(t, data).Count(context.Background(), memory.Filter{Namespace: "default"})
	require.NoError(t, err)
	assert.Zero(t, n, "nothing stored")
}

// Bad input gets a 400 in the dialect's own shape.
func TestDialectErrorShapes(t *testing.T) {
	up := newDialectUpstream(t)
	p := startVera(t, "VERA_OLLAMA_URL="+up.URL)
	post := func(path, body string) map[string]any {
		res, err := http.Post("http://"+p.addr+path, "application/json", strings.NewReader(body))
		require.NoError(t, err)
		defer res.Body.Close()
		assert.Equal(t, http.StatusBadRequest, res.StatusCode, path)
		var m map[string]any
		require.NoError(t, json.NewDecoder(res.Body).Decode(&m))
		return m
	}
	assert.IsType(t, "", post("/api/generate", `{"model":`)["error"])
	e := post("/v1/responses", `{"model":"m","input":5}`)["error"].(map[string]any)
	assert.Equal(t, "invalid_request_error", e["type"])
	m := post("/v1/messages", `{"model":"m","messages":"hi"}`)
	assert.Equal(t, "error", m["type"])
	assert.Equal(t, "invalid_request_error", m["error"].(map[string]any)["type"])
	assert.NotContains(t, fmt.Sprint(m), "Go value")
}
