package proxy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/ollama/ollama/api"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/memory"
)

func TestMain(m *testing.M) {
	gin.SetMode(gin.ReleaseMode)
	os.Exit(m.Run())
}

// fakeOllama speaks Ollama's wire format. Its hooks let a test hold a stream
// open, kill it, or watch what arrived.
type fakeOllama struct {
	t   *testing.T
	srv *httptest.Server

	// tokens are streamed, one NDJSON record each, by /api/chat and
	// /api/generate; then a done:true record.
	tokens []string
	// thinking, when set, is streamed before the tokens as message.thinking.
	thinking []string
	// delay sleeps between records.
	delay time.Duration
	// gate, when set, is received from after the first record: the stream
	// waits there until the test lets it go.
	gate chan struct{}
	// dieAfter > 0 aborts the connection after that many records.
	dieAfter int
	// onCancel receives once when a streaming request's context ends before
	// the stream does.
	onCancel chan struct{}
	// system is llama3.2's Modelfile SYSTEM, in /api/show.
	system string

	mu       sync.Mutex
	lastHost string
	lastHdr  http.Header
	lastBody []byte
}

func newFakeOllama(t *testing.T) *fakeOllama {
	f := &fakeOllama{t: t, tokens: []string{"Hel", "lo", " there", "."}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/chat", f.chat)
	mux.HandleFunc("POST /api/generate", f.generate)
	mux.HandleFunc("GET /api/version", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, map[string]string{"version": "0.12.3"})
	})
	mux.HandleFunc("GET /api/tags", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, map[string]any{"models": []map[string]any{
			{"name": "llama3.2:latest", "model": "llama3.2:latest", "size": 2019393189, "digest": "a80c4f17acd5"},
			{"name": "nomic-embed-text:latest", "model": "nomic-embed-text:latest", "size": 274302450, "digest": "0a109f422b47"},
		}})
	})
	mux.HandleFunc("GET /api/ps", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, map[string]any{"models": []map[string]any{
			{"name": "llama3.2:latest", "model": "llama3.2:latest", "size": 3300000000, "size_vram": 3300000000},
		}})
	})
	mux.HandleFunc("POST /api/show", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Model string `json:"model"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		if req.Model != "llama3.2" {
			writeJSON(w, 404, map[string]string{"error": fmt.Sprintf("model '%s' not found", req.Model)})
			return
		}
		writeJSON(w, 200, map[string]any{
			"modelfile": "FROM llama3.2", "template": "{{ .Prompt }}", "system": f.system,
			"details":    map[string]any{"family": "llama", "parameter_size": "3.2B"},
			"model_info": map[string]any{"llama.context_length": 131072},
		})
	})
	mux.HandleFunc("POST /api/embed", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Model string `json:"model"`
			Input any    `json:"input"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		writeJSON(w, 200, map[string]any{"model": req.Model, "embeddings": [][]float32{{0.1, 0.2, 0.3}}})
	})
	mux.HandleFunc("POST /api/pull", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-ndjson")
		for _, rec := range []string{
			`{"status":"pulling manifest"}`,
			`{"status":"pulling a80c4f17acd5","digest":"sha256:a80c4f17acd5","total":100,"completed":50}`,
			`{"status":"pulling a80c4f17acd5","digest":"sha256:a80c4f17acd5","total":100,"completed":100}`,
			`{"status":"success"}`,
		} {
			fmt.Fprintln(w, rec)
			w.(http.Flusher).Flush()
		}
	})
	mux.HandleFunc("DELETE /api/delete", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Model string `json:"model"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		if req.Model != "llama3.2" {
			writeJSON(w, 404, map[string]string{"error": fmt.Sprintf("model '%s' not found", req.Model)})
			return
		}
		w.WriteHeader(200)
	})
	mux.HandleFunc("POST /api/copy", func(w http.ResponseWriter, r *http.Request) {
		f.remember(r)
		w.WriteHeader(200)
	})
	mux.HandleFunc("POST /api/blobs/{digest}", func(w http.ResponseWriter, r *http.Request) {
		h := sha256.New()
		if _, err := io.Copy(h, r.Body); err != nil {
			writeJSON(w, 400, map[string]string{"error": err.Error()})
			return
		}
		if got := "sha256:" + hex.EncodeToString(h.Sum(nil)); got != r.PathValue("digest") {
			writeJSON(w, 400, map[string]string{"error": "digest mismatch, expected \"" + r.PathValue("digest") + "\", got \"" + got + "\""})
			return
		}
		w.WriteHeader(201)
	})
	mux.HandleFunc("HEAD /api/blobs/{digest}", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(404) })
	mux.HandleFunc("/{$}", func(w http.ResponseWriter, r *http.Request) {
		f.remember(r)
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if origin := r.Header.Get("Origin"); strings.HasPrefix(origin, "http://localhost") {
			w.Header().Set("Access-Control-Allow-Origin", origin)
		}
		if r.Method == http.MethodHead {
			w.Header().Set("Content-Length", "17")
			return
		}
		io.WriteString(w, "Ollama is running")
	})
	mux.HandleFunc("POST /v1/chat/completions", f.openAIChat)
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

// remember reads r's body and keeps it, with r's host and headers, for
// last.
func (f *fakeOllama) remember(r *http.Request) []byte {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lastHost, f.lastHdr, f.lastBody = r.Host, r.Header.Clone(), body
	return body
}

func (f *fakeOllama) last() (string, http.Header, []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lastHost, f.lastHdr, f.lastBody
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

type streamReq struct {
	Model  string `json:"model"`
	Stream *bool  `json:"stream"`
}

func (f *fakeOllama) chat(w http.ResponseWriter, r *http.Request) {
	f.stream(w, r, func(field, text string) map[string]any {
		return map[string]any{"message": map[string]string{"role": "assistant", field: text}}
	})
}

func (f *fakeOllama) generate(w http.ResponseWriter, r *http.Request) {
	f.stream(w, r, func(field, text string) map[string]any {
		if field == "content" {
			field = "response"
		}
		return map[string]any{field: text}
	})
}

// stream answers like Ollama: NDJSON records flushed one by one, or one JSON
// object for stream:false.
func (f *fakeOllama) stream(w http.ResponseWriter, r *http.Request, rec func(field, text string) map[string]any) {
	body := f.remember(r)
	var req streamReq
	if err := json.Unmarshal(body, &req); err != nil {
		writeJSON(w, 400, map[string]string{"error": err.Error()})
		return
	}
	if req.Model == "missing" {
		writeJSON(w, 404, map[string]string{"error": `model "missing" not found, try pulling it first`})
		return
	}
	base := func(m map[string]any, done bool) map[string]any {
		m["model"], m["created_at"], m["done"] = req.Model, "2026-11-22T10:00:00Z", done
		if done {
			m["done_reason"], m["eval_count"] = "stop", len(f.tokens)
		}
		return m
	}
	if req.Stream != nil && !*req.Stream {
		writeJSON(w, 200, base(rec("content", strings.Join(f.tokens, "")), true))
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	var records []map[string]any
	for _, s := range f.thinking {
		records = append(records, base(rec("thinking", s), false))
	}
	for _, s := range f.tokens {
		records = append(records, base(rec("content", s), false))
	}
	records = append(records, base(rec("content", ""), true))
	enc := json.NewEncoder(w)
	for i, m := range records {
		if f.dieAfter > 0 && i == f.dieAfter {
			panic(http.ErrAbortHandler) // the connection is cut, no final chunk
		}
		_ = enc.Encode(m)
		w.(http.Flusher).Flush()
		if i == 0 && f.gate != nil {
			select {
			case <-f.gate:
			case <-r.Context().Done():
			}
		}
		if f.delay > 0 {
			time.Sleep(f.delay)
		}
		if r.Context().Err() != nil {
			if f.onCancel != nil {
				f.onCancel <- struct{}{}
			}
			return
		}
	}
}

// openAIChat answers as Ollama's /v1/chat/completions does: Server-Sent
// Events flushed one by one (a last chunk with finish_reason, then
// [DONE]), or one chat.completion object when stream is not true.
func (f *fakeOllama) openAIChat(w http.ResponseWriter, r *http.Request) {
	body := f.remember(r)
	var req streamReq
	if err := json.Unmarshal(body, &req); err != nil {
		writeJSON(w, 400, map[string]any{"error": map[string]string{"message": err.Error(), "type": "invalid_request_error"}})
		return
	}
	if req.Model == "missing" {
		writeJSON(w, 404, map[string]any{"error": map[string]string{"message": `model "missing" not found, try pulling it first`, "type": "api_error"}})
		return
	}
	if req.Stream == nil || !*req.Stream {
		writeJSON(w, 200, map[string]any{
			"id": "chatcmpl-1", "object": "chat.completion", "model": req.Model,
			"choices": []map[string]any{{"index": 0, "message": map[string]string{"role": "assistant", "content": strings.Join(f.tokens, "")}, "finish_reason": "stop"}},
		})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	for i, s := range f.tokens {
		if f.dieAfter > 0 && i == f.dieAfter {
			panic(http.ErrAbortHandler)
		}
		fmt.Fprintf(w, "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":%q}}]}\n\n", s)
		w.(http.Flusher).Flush()
		if i == 0 && f.gate != nil {
			select {
			case <-f.gate:
			case <-r.Context().Done():
				return
			}
		}
	}
	io.WriteString(w, "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n")
	io.WriteString(w, "data: [DONE]\n\n")
}

// recorder collects recorded turns. With gate set, Record waits for it
// (or for ctx) before it reports the turn committed.
type recorder struct {
	mu    sync.Mutex
	turns []memory.Turn
	gate  chan struct{}
}

func (r *recorder) Record(ctx context.Context, t memory.Turn) error {
	if r.gate != nil {
		select {
		case <-r.gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.turns = append(r.turns, t)
	return nil
}

func (r *recorder) all() []memory.Turn {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]memory.Turn(nil), r.turns...)
}

// vera starts vera's handler in front of upstream and returns its URL.
func startVera(t *testing.T, upstream string, configure func(*Server)) string {
	t.Helper()
	u, err := url.Parse(upstream)
	require.NoError(t, err)
	s := New(u, NewTransport(time.Minute), slog.New(slog.DiscardHandler))
	if configure != nil {
		configure(s)
	}
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	return srv.URL
}

// startServedVera is startVera plus a channel that receives each time the
// handler returns. Record runs after the answer went out, so a client
// reading a sized answer may finish before it: tests wait on the handler.
func startServedVera(t *testing.T, upstream string, configure func(*Server)) (string, <-chan struct{}) {
	t.Helper()
	s := New(mustURL(t, upstream), NewTransport(time.Minute), nil)
	configure(s)
	served := make(chan struct{}, 1)
	h := s.Handler()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() { served <- struct{}{} }()
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, served
}

// newClient returns the official Ollama client for base, on a transport of
// its own so tests do not share connections.
func newClient(t *testing.T, base string) *api.Client {
	t.Helper()
	u, err := url.Parse(base)
	require.NoError(t, err)
	tr := &http.Transport{MaxIdleConnsPerHost: 16}
	t.Cleanup(tr.CloseIdleConnections)
	return api.NewClient(u, &http.Client{Transport: tr})
}

func ptr[T any](v T) *T { return &v }

// waitFor fails the test if ch does not deliver within a generous bound; it
// guards against hangs, it does not measure speed.
func waitFor[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	require.NoError(t, err)
	return u
}

func httpServer(t *testing.T, h interface{ Handler() http.Handler }) string {
	t.Helper()
	srv := httptest.NewServer(h.Handler())
	t.Cleanup(srv.Close)
	return srv.URL
}

// postChat sends body to path with headers (name, value pairs).
func postChat(t *testing.T, base, path, body string, headers ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+path, strings.NewReader(body))
	require.NoError(t, err)
	for i := 0; i < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return res, string(b)
}

const hiChat = `{"model":"llama3.2","messages":[{"role":"user","content":"hi"}]}`
