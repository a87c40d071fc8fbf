// Package ollamatest provides a fake Ollama for tests, as net/http/httptest
// provides servers: it speaks the part of Ollama's API vera uses (version,
// tags, show, ps, embed, chat and the OpenAI-compatible chat completions),
// refuses browser origins as Ollama does, streams its answers with flushes,
// records what it was asked, and embeds with a bag-of-words hash so that
// recall can be tested without a model.
// NewDialects adds the dialects answered by a separate handler in these
// tests: /api/generate, /v1/responses and /v1/messages.
package ollamatest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ollama/ollama/api"
	"github.com/stretchr/testify/require"
	"github.com/vera-proxy/vera/text"
)

// Server is a fake Ollama. Every chat answers "Hello from Ollama" in three
// streamed tokens; a test can hold a stream open after its first token with
// Gate. It records every chat request it receives, and embeds with a
// bag-of-words hash (after mapping a few synonyms, so that vector search can
// find what lexical search cannot).
type Server struct {
	*httptest.Server

	// Gate, when set before a chat, holds each chat stream after its first
	// token until Gate is closed; Started receives one value per held
	// stream.
	Gate    chan struct{}
	Started chan struct{}
	// EmbedDown makes /api/embed answer 404, as Ollama does when the
	// embedding model is not pulled.
	EmbedDown atomic.Bool
	// Embeds counts /api/embed requests.
	Embeds atomic.Int64
	// Curate answers the curator's requests (chats with a format); set it
	// before vera starts. Nil answers an empty plan.
	Curate func(api.ChatRequest) string
	// Whole, when set, answers each chat asked for without streaming
	// (stream:false) on /api/chat: its text, or with a status other than
	// 200, Ollama's error; the chats it answers are not among LastChat's.
	// Nil answers as a streamed chat would, in one object.
	Whole func(api.ChatRequest) (string, int)
	// Reply, when set, gives the answer of each chat, in every dialect,
	// in place of "Hello from Ollama".
	Reply func() string
	// CallTool, when set and it returns a function's name, makes a chat on
	// /api/chat or /v1/chat/completions answer with a call to that
	// function (arguments {"city":"Lisbon"}) instead of text.
	CallTool func() string
	// ContextLength is every model's context window in /api/show; 0
	// means 131072. Set it before vera starts.
	ContextLength int
	// Scale, when set, makes the fake's model count a prompt in its own
	// tokens, Scale of them for each cl100k token, and cut what does not
	// fit its window as Ollama does (window.go): /api/chat reports
	// prompt_eval_count, and Cuts lists every cut.
	Scale float64
	// Origins are the browser origins allowed beside Ollama's defaults,
	// as OLLAMA_ORIGINS sets them (patterns with at most one *; "*"
	// allows all): a request with any other Origin is answered 403 (see
	// RefuseOrigins). Set it before the requests it should govern.
	Origins []string

	// Loaded tracks the models in memory, as Ollama would: a chat loads
	// its model, a generate with an empty prompt loads it too, and
	// keep_alive 0 unloads it (unless Sticky says it stays). /api/ps
	// reports them with their Sizes (MB). Trace lists the calls, in order.
	Sizes  map[string]int64
	Sticky map[string]bool

	mu     sync.Mutex
	loaded map[string]bool
	trace  []string
	embeds []string // every text embedded
	chats  []api.ChatRequest
	cuts   []Cut
	v1     []OpenAIChat // /v1/chat/completions requests
}

// OpenAIChat is the part of a /v1/chat/completions request the tests read.
type OpenAIChat struct {
	Model    string `json:"model"`
	Stream   bool   `json:"stream"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	StreamOptions struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

var synonyms = strings.NewReplacer("sibling", "sister", "reside", "live")

// New starts a fake Ollama, closed when the test ends.
func New(t testing.TB) *Server {
	f := &Server{Started: make(chan struct{}, 16)}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/version", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"version":"0.12.3"}`)
	})
	mux.HandleFunc("GET /api/tags", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"models":[{"name":"llama3.2:latest","model":"llama3.2:latest","digest":"a80c4f17acd55265feec403c7aef86be0c25983ab279d83f3bcd3abbcb5b8b72"},{"name":"nomic-embed-text:latest","model":"nomic-embed-text:latest","digest":"0a109f422b47e3a30ba2b10eca18548e944e8a23073ee3f3e947efcf3c45e59f"}]}`)
	})
	mux.HandleFunc("POST /api/embed", f.embed)
	mux.HandleFunc("POST /api/show", func(w http.ResponseWriter, r *http.Request) {
		window := f.ContextLength
		if window == 0 {
			window = 131072
		}
		fmt.Fprintf(w, `{"parameters":"stop \"<|eot_id|>\"","model_info":{"general.architecture":"llama","llama.context_length":%d}}`, window)
	})
	mux.HandleFunc("GET /api/ps", f.ps)
	mux.HandleFunc("POST /api/generate", f.generate)
	mux.HandleFunc("POST /api/chat", f.chat)
	mux.HandleFunc("POST /v1/chat/completions", f.chatCompletions)
	f.Server = httptest.NewServer(RefuseOrigins(mux, func() []string { return f.Origins }))
	t.Cleanup(f.Close)
	return f
}

// defaultOrigins are the origins Ollama allows without OLLAMA_ORIGINS
// (envconfig.AllowedOrigins). Kept apart from vera's own copy, so that a
// test compares vera with Ollama, not vera with itself.
var defaultOrigins = []string{
	"http://localhost", "https://localhost", "http://localhost:*", "https://localhost:*",
	"http://127.0.0.1", "https://127.0.0.1", "http://127.0.0.1:*", "https://127.0.0.1:*",
	"http://0.0.0.0", "https://0.0.0.0", "http://0.0.0.0:*", "https://0.0.0.0:*",
	"app://*", "file://*", "tauri://*", "vscode-webview://*", "vscode-file://*",
}

// RefuseOrigins wraps h as Ollama guards its API (gin-contrib/cors with
// envconfig.AllowedOrigins): a request with an Origin that is neither its
// own Host's (same-origin) nor allowed by Ollama's default origins or the
// patterns extra returns (OLLAMA_ORIGINS; extra may be nil) is answered 403
// with an empty body. Requests without an Origin pass.
func RefuseOrigins(h http.Handler, extra func() []string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		if origin == "" || origin == "http://"+r.Host || origin == "https://"+r.Host {
			h.ServeHTTP(w, r)
			return
		}
		var more []string
		if extra != nil {
			more = extra()
		}
		for _, p := range slices.Concat(more, defaultOrigins) {
			if originMatches(strings.ToLower(strings.TrimSpace(p)), origin) {
				h.ServeHTTP(w, r)
				return
			}
		}
		w.WriteHeader(http.StatusForbidden)
	})
}

// originMatches matches an origin as gin-contrib/cors does: "*" matches
// all, a pattern with one * its prefix and suffix, any other the whole.
func originMatches(pattern, origin string) bool {
	prefix, suffix, wild := strings.Cut(pattern, "*")
	if !wild {
		return pattern == origin
	}
	return strings.HasPrefix(origin, prefix) && strings.HasSuffix(origin, suffix)
}

// LastChat returns the last chat request received (the curator's are not counted).
func (f *Server) LastChat(t testing.TB) api.ChatRequest {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	require.NotEmpty(t, f.chats)
	return f.chats[len(f.chats)-1]
}

// LastV1 returns the last /v1/chat/completions request received.
func (f *Server) LastV1(t testing.TB) OpenAIChat {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	require.NotEmpty(t, f.v1)
	return f.v1[len(f.v1)-1]
}

// Embedded returns every text embedded so far, in order.
func (f *Server) Embedded() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.embeds...)
}

// ChatCount is the number of chat requests received (the curator's are not counted).
func (f *Server) ChatCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.chats)
}

func (f *Server) embed(w http.ResponseWriter, r *http.Request) {
	f.Embeds.Add(1)
	var req struct {
		Model string   `json:"model"`
		Input []string `json:"input"`
	}
	_ = json.NewDecoder(r.Body).Decode(&req)
	if f.EmbedDown.Load() {
		http.Error(w, `{"error":"model \"nomic-embed-text\" not found, try pulling it first"}`, http.StatusNotFound)
		return
	}
	f.mu.Lock()
	f.embeds = append(f.embeds, req.Input...)
	f.mu.Unlock()
	for i := range req.Input {
		req.Input[i] = synonyms.Replace(strings.ToLower(req.Input[i]))
	}
	vecs, _ := text.HashEmbedder{}.Embed(r.Context(), req.Input)
	_ = json.NewEncoder(w).Encode(map[string]any{"model": req.Model, "embeddings": vecs})
}

func (f *Server) chat(w http.ResponseWriter, r *http.Request) {
	var req api.ChatRequest
	_ = json.NewDecoder(r.Body).Decode(&req)
	if len(req.Format) == 0 {
		f.note("chat " + req.Model)
		f.load(req.Model, req.KeepAlive)
	}
	if len(req.Format) > 0 { // a structured-output request: the curator's
		answer := `{"new_curated_turns":[],"permanent_rules":[],"deletions":[],"summary":""}`
		if f.Curate != nil {
			answer = f.Curate(req)
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"model": req.Model, "created_at": "2026-11-22T10:00:00Z",
			"message": map[string]string{"role": "assistant", "content": answer}, "done": true, "done_reason": "stop"})
		return
	}
	prompt := f.promptTokens(req)
	if req.Stream != nil && !*req.Stream {
		f.whole(w, req, prompt)
		return
	}
	f.mu.Lock()
	f.chats = append(f.chats, req)
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-ndjson")
	if name := f.toolCall(); name != "" {
		fmt.Fprintf(w, `{"model":%q,"created_at":"2026-11-22T10:00:00Z","message":{"role":"assistant","content":"","tool_calls":[{"function":{"name":%q,"arguments":{"city":"Lisbon"}}}]},"done":false}`+"\n", req.Model, name)
		fmt.Fprintf(w, `{"model":%q,"created_at":"2026-11-22T10:00:01Z","message":{"role":"assistant","content":""},"done":true,"done_reason":"stop"}`+"\n", req.Model)
		return
	}
	for i, tok := range f.tokens() {
		fmt.Fprintf(w, `{"model":%q,"created_at":"2026-11-22T10:00:00Z","message":{"role":"assistant","content":%q},"done":false}`+"\n", req.Model, tok)
		w.(http.Flusher).Flush()
		if i == 0 && f.Gate != nil {
			f.Started <- struct{}{}
			<-f.Gate
		}
	}
	count := ""
	if prompt > 0 {
		count = fmt.Sprintf(`,"prompt_eval_count":%d`, prompt)
	}
	fmt.Fprintf(w, `{"model":%q,"created_at":"2026-11-22T10:00:01Z","message":{"role":"assistant","content":""},"done":true,"done_reason":"stop"%s}`+"\n", req.Model, count)
}

// whole answers a chat asked for without streaming: one object.
func (f *Server) whole(w http.ResponseWriter, req api.ChatRequest, prompt int) {
	text, code := strings.Join(f.tokens(), ""), http.StatusOK
	if f.Whole != nil {
		text, code = f.Whole(req)
	} else {
		f.mu.Lock()
		f.chats = append(f.chats, req)
		f.mu.Unlock()
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	if code != http.StatusOK {
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": text})
		return
	}
	out := map[string]any{"model": req.Model, "created_at": "2026-11-22T10:00:00Z",
		"message": map[string]string{"role": "assistant", "content": text}, "done": true, "done_reason": "stop"}
	if prompt > 0 {
		out["prompt_eval_count"] = prompt
	}
	_ = json.NewEncoder(w).Encode(out)
}

// chatCompletions is Ollama's OpenAI-compatible endpoint: SSE chunks then
// [DONE], or one chat.completion object.
func (f *Server) chatCompletions(w http.ResponseWriter, r *http.Request) {
	var req OpenAIChat
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, `{"error":{"message":"invalid JSON","type":"invalid_request_error"}}`, http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.v1 = append(f.v1, req)
	f.mu.Unlock()
	var msgs []api.Message
	for _, m := range req.Messages {
		msgs = append(msgs, api.Message{Role: m.Role, Content: textOf(m.Content)})
	}
	// Ollama's OpenAI routes take no num_ctx: the default window.
	prompt := max(f.promptTokens(api.ChatRequest{Messages: msgs}), 9)
	toks := f.tokens()
	if name := f.toolCall(); name != "" {
		call := fmt.Sprintf(`[{"index":0,"id":"call_1","type":"function","function":{"name":%q,"arguments":"{\"city\":\"Lisbon\"}"}}]`, name)
		if !req.Stream {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"id":"chatcmpl-7","object":"chat.completion","created":1795000000,"model":%q,"choices":[{"index":0,"message":{"role":"assistant","content":"","tool_calls":%s},"finish_reason":"tool_calls"}]}`, req.Model, call)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "data: {\"id\":\"chatcmpl-7\",\"object\":\"chat.completion.chunk\",\"created\":1795000000,\"model\":%q,\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"tool_calls\":%s},\"finish_reason\":\"tool_calls\"}]}\n\n", req.Model, call)
		io.WriteString(w, "data: [DONE]\n\n")
		return
	}
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"chatcmpl-7","object":"chat.completion","created":1795000000,"model":%q,"choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"stop"}],"usage":{"prompt_tokens":%d,"completion_tokens":3,"total_tokens":%d}}`, req.Model, strings.Join(toks, ""), prompt, prompt+3)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	for _, tok := range toks {
		fmt.Fprintf(w, "data: {\"id\":\"chatcmpl-7\",\"object\":\"chat.completion.chunk\",\"created\":1795000000,\"model\":%q,\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":%q},\"finish_reason\":null}]}\n\n", req.Model, tok)
		w.(http.Flusher).Flush()
	}
	fmt.Fprintf(w, "data: {\"id\":\"chatcmpl-7\",\"object\":\"chat.completion.chunk\",\"created\":1795000000,\"model\":%q,\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":\"stop\"}]}\n\n", req.Model)
	if req.StreamOptions.IncludeUsage {
		// Ollama sends usage only when asked, in a chunk of its own.
		fmt.Fprintf(w, "data: {\"id\":\"chatcmpl-7\",\"object\":\"chat.completion.chunk\",\"created\":1795000000,\"model\":%q,\"choices\":[],\"usage\":{\"prompt_tokens\":%d,\"completion_tokens\":3,\"total_tokens\":%d}}\n\n", req.Model, prompt, prompt+3)
	}
	io.WriteString(w, "data: [DONE]\n\n")
}

// textOf reads a message content that is a string or an array of parts
// (text, input_text, output_text, or a tool result's content).
func textOf(raw json.RawMessage) string {
	var s string
	if len(raw) == 0 || json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Text    string          `json:"text"`
		Content json.RawMessage `json:"content"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return string(raw)
	}
	var out []string
	for _, p := range parts {
		if p.Text != "" {
			out = append(out, p.Text)
		} else if len(p.Content) > 0 {
			out = append(out, textOf(p.Content))
		}
	}
	return strings.Join(out, "\n\n")
}

// tokens is a chat's answer, in the pieces it is streamed in.
func (f *Server) tokens() []string {
	if f.Reply == nil {
		return []string{"Hello", " from", " Ollama"}
	}
	r := f.Reply()
	if a, b, ok := strings.Cut(r, " "); ok {
		return []string{a, " " + b}
	}
	return []string{r}
}

func (f *Server) toolCall() string {
	if f.CallTool == nil {
		return ""
	}
	return f.CallTool()
}

// Load and unload calls (an empty prompt) for the models Loaded tracks.
func (f *Server) generate(w http.ResponseWriter, r *http.Request) {
	var req api.GenerateRequest
	_ = json.NewDecoder(r.Body).Decode(&req)
	reason := "load"
	if req.KeepAlive != nil && req.KeepAlive.Duration == 0 {
		reason = "unload"
	}
	f.note(reason + " " + req.Model)
	f.load(req.Model, req.KeepAlive)
	fmt.Fprintf(w, `{"model":%q,"created_at":"2026-11-22T10:00:00Z","response":"","done":true,"done_reason":%q}`, req.Model, reason)
}

func (f *Server) load(model string, keepAlive *api.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.loaded == nil {
		f.loaded = map[string]bool{}
	}
	if keepAlive != nil && keepAlive.Duration == 0 {
		if !f.Sticky[model] {
			delete(f.loaded, model)
		}
		return
	}
	f.loaded[model] = true
}

func (f *Server) ps(w http.ResponseWriter, r *http.Request) {
	f.note("ps")
	f.mu.Lock()
	var models []map[string]any
	for m := range f.loaded {
		size := f.Sizes[m] << 20
		models = append(models, map[string]any{"name": m, "model": m, "size": size, "size_vram": size})
	}
	f.mu.Unlock()
	_ = json.NewEncoder(w).Encode(map[string]any{"models": models})
}

func (f *Server) note(s string) {
	f.mu.Lock()
	f.trace = append(f.trace, s)
	f.mu.Unlock()
}

// Preload marks models as loaded, as if they had answered before.
func (f *Server) Preload(models ...string) {
	for _, m := range models {
		f.load(m, nil)
	}
}

// Trace returns the calls that change or read what is loaded, in order:
// "chat M", "load M", "unload M", "ps".
func (f *Server) Trace() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.trace...)
}

// ResetTrace forgets the calls so far.
func (f *Server) ResetTrace() {
	f.mu.Lock()
	f.trace = nil
	f.mu.Unlock()
}
