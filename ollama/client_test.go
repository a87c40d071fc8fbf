package ollama

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ollama/ollama/api"
	"github.com/ollama/ollama/types/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeOllama answers Ollama's routes with handlers a test sets, and keeps
// what arrived. Answers are built from the official api package's types,
// so they are Ollama's real JSON.
type fakeOllama struct {
	srv *httptest.Server

	mu     sync.Mutex
	routes map[string]http.HandlerFunc
	calls  map[string]int
	bodies map[string][]byte
	urls   map[string]*url.URL
}

func newFake(t *testing.T) *fakeOllama {
	t.Helper()
	f := &fakeOllama{routes: map[string]http.HandlerFunc{}, calls: map[string]int{}, bodies: map[string][]byte{}, urls: map[string]*url.URL{}}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Method + " " + r.URL.Path
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.calls[key]++
		f.bodies[key] = body
		f.urls[key] = r.URL
		h := f.routes[key]
		f.mu.Unlock()
		if h == nil {
			writeJSON(w, http.StatusNotFound, map[string]string{"error": "404 page not found"})
			return
		}
		h(w, r)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeOllama) on(route string, h http.HandlerFunc) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.routes[route] = h
}

// answer makes route answer status with v as JSON.
func (f *fakeOllama) answer(route string, status int, v any) {
	f.on(route, func(w http.ResponseWriter, r *http.Request) { writeJSON(w, status, v) })
}

func (f *fakeOllama) count(route string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[route]
}

// body decodes what route last received into v.
func (f *fakeOllama) body(t *testing.T, route string, v any) {
	t.Helper()
	f.mu.Lock()
	b := f.bodies[route]
	f.mu.Unlock()
	require.NoError(t, json.Unmarshal(b, v), "%s", b)
}

func (f *fakeOllama) client(t *testing.T) *Client {
	t.Helper()
	u, err := url.Parse(f.srv.URL)
	require.NoError(t, err)
	return New(u, NewTransport(5*time.Second))
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// deadURL is an address where connecting is refused: its port stays
// bound, never listened on, until t ends, so that no other test's server
// is handed it (ollamatest.DeadAddr, which this package's tests cannot
// import: it imports this package).
func deadURL(t *testing.T) *url.URL {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	require.NoError(t, err)
	t.Cleanup(func() { _ = syscall.Close(fd) })
	require.NoError(t, syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}))
	sa, err := syscall.Getsockname(fd)
	require.NoError(t, err)
	return &url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)}
}

var llamaDetails = api.ModelDetails{Format: "gguf", Family: "llama", Families: []string{"llama"}, ParameterSize: "3.2B", QuantizationLevel: "Q4_K_M"}

func TestVersion(t *testing.T) {
	f := newFake(t)
	f.answer("GET /api/version", http.StatusOK, map[string]string{"version": "0.12.6"})
	v, err := f.client(t).Version(context.Background())
	require.NoError(t, err)
	assert.Equal(t, "0.12.6", v)
}

func TestErrorsCarryStatusAndMessage(t *testing.T) {
	tests := []struct {
		name    string
		status  int
		body    string
		code    int
		message string
		notFnd  bool
	}{
		{"ollama's error", http.StatusNotFound, `{"error":"model \"nope\" not found, try pulling it first"}`, 404, `model "nope" not found, try pulling it first`, true},
		{"server error", http.StatusInternalServerError, `{"error":"llama runner process has terminated: signal: killed"}`, 500, "llama runner process has terminated: signal: killed", false},
		{"a gateway's page", http.StatusBadGateway, "<html>bad gateway</html>\n", 502, "<html>bad gateway</html>", false},
		{"an error record in a 200", http.StatusOK, `{"error":"an error was encountered while running the model"}`, 200, "an error was encountered while running the model", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t)
			f.on("POST /api/show", func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tt.status)
				_, _ = io.WriteString(w, tt.body)
			})
			_, err := f.client(t).Show(context.Background(), "nope")
			var se *StatusError
			require.ErrorAs(t, err, &se)
			assert.Equal(t, tt.code, se.StatusCode)
			assert.Equal(t, tt.message, se.Message)
			assert.Equal(t, "POST", se.Method)
			assert.Equal(t, "/api/show", se.Path)
			assert.Contains(t, err.Error(), fmt.Sprintf("POST /api/show: %d %s", tt.code, http.StatusText(tt.code)))
			assert.Contains(t, err.Error(), tt.message)
			assert.Equal(t, tt.notFnd, IsNotFound(err))
		})
	}
}

func TestNotAnOllamaAnswer(t *testing.T) {
	f := newFake(t)
	f.on("GET /api/version", func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "<html>hello</html>") })
	_, err := f.client(t).Version(context.Background())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "GET /api/version: not an Ollama answer")
	var syn *json.SyntaxError
	assert.ErrorAs(t, err, &syn, "the cause is kept")
}

func TestConnectionRefused(t *testing.T) {
	c := New(deadURL(t), NewTransport(time.Second))
	ctx := context.Background()
	calls := map[string]func() error{
		"version": func() error { _, err := c.Version(ctx); return err },
		"tags":    func() error { _, err := c.Tags(ctx); return err },
		"ps":      func() error { _, err := c.PS(ctx); return err },
		"show":    func() error { _, err := c.Show(ctx, "llama3.2"); return err },
		"embed":   func() error { _, err := c.Embed(ctx, "nomic-embed-text", []string{"x"}); return err },
		"chat": func() error {
			_, err := c.Chat(ctx, ChatRequest{Model: "llama3.2", Messages: []Message{{Role: "user", Content: "hi"}}})
			return err
		},
		"generate": func() error { _, err := c.Generate(ctx, GenerateRequest{Model: "llama3.2", Prompt: "hi"}); return err },
		"load":     func() error { return c.Load(ctx, "llama3.2") },
		"unload":   func() error { return c.Unload(ctx, "llama3.2") },
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			err := call()
			require.Error(t, err)
			assert.True(t, errors.Is(err, syscall.ECONNREFUSED), "the cause is kept: %v", err)
			var se *StatusError
			assert.False(t, errors.As(err, &se), "no status without an answer")
		})
	}
}

func TestBasePathAndQueryAreKept(t *testing.T) {
	// Ollama behind a gateway, under a path, with its key in the query.
	f := newFake(t)
	f.answer("GET /ollama/api/version", http.StatusOK, map[string]string{"version": "0.12.6"})
	u, err := url.Parse(f.srv.URL + "/ollama?api_key=k3y")
	require.NoError(t, err)
	v, err := New(u, nil).Version(context.Background())
	require.NoError(t, err)
	assert.Equal(t, "0.12.6", v)
	f.mu.Lock()
	defer f.mu.Unlock()
	assert.Equal(t, "k3y", f.urls["GET /ollama/api/version"].Query().Get("api_key"))
}

func TestTags(t *testing.T) {
	f := newFake(t)
	at := time.Date(2025, 5, 1, 10, 0, 0, 0, time.UTC)
	f.answer("GET /api/tags", http.StatusOK, api.ListResponse{Models: []api.ListModelResponse{
		{Name: "nomic-embed-text:latest", Model: "nomic-embed-text:latest", ModifiedAt: at, Size: 274302450, Digest: "0a109f42", Details: api.ModelDetails{Family: "nomic-bert"}},
		{Name: "llama3.2:latest", Model: "llama3.2:latest", ModifiedAt: at, Size: 2019393189, Digest: "a80c4f17", Details: llamaDetails},
	}})
	tags, err := f.client(t).Tags(context.Background())
	require.NoError(t, err)
	require.Len(t, tags, 2)
	assert.Equal(t, "llama3.2:latest", tags[0].Name, "sorted by name")
	assert.Equal(t, int64(2019393189), tags[0].Size)
	assert.Equal(t, "3.2B", tags[0].Details.ParameterSize)
	assert.True(t, at.Equal(tags[0].ModifiedAt))
	assert.Equal(t, "nomic-embed-text:latest", tags[1].Name)
}

func TestPS(t *testing.T) {
	f := newFake(t)
	exp := time.Date(2025, 5, 1, 10, 5, 0, 0, time.UTC)
	f.answer("GET /api/ps", http.StatusOK, api.ProcessResponse{Models: []api.ProcessModelResponse{
		{Name: "llama3.2:latest", Model: "llama3.2:latest", Size: 3e9, SizeVRAM: 2.5e9, Details: llamaDetails, ExpiresAt: exp, ContextLength: 8192},
	}})
	ps, err := f.client(t).PS(context.Background())
	require.NoError(t, err)
	require.Len(t, ps, 1)
	assert.Equal(t, "llama3.2:latest", ps[0].Name)
	assert.Equal(t, 8192, ps[0].ContextLength)
	assert.Equal(t, int64(2.5e9), ps[0].SizeVRAM)
	assert.True(t, exp.Equal(ps[0].ExpiresAt))
	assert.Equal(t, "llama", ps[0].Details.Family)
}

func TestShow(t *testing.T) {
	f := newFake(t)
	f.answer("POST /api/show", http.StatusOK, api.ShowResponse{
		Parameters: "num_ctx                        16384\nstop                           \"<|eot_id|>\"",
		System:     "You are a pirate.",
		Template:   "{{ .Prompt }}",
		Details:    llamaDetails,
		ModelInfo: map[string]any{
			"general.architecture": "llama", "llama.context_length": 131072, "llama.embedding_length": 3072,
		},
		Capabilities: []model.Capability{model.CapabilityCompletion, model.CapabilityTools},
	})
	s, err := f.client(t).Show(context.Background(), "llama3.2")
	require.NoError(t, err)
	var req api.ShowRequest
	f.body(t, "POST /api/show", &req)
	assert.Equal(t, "llama3.2", req.Model)

	assert.Equal(t, 16384, s.NumCtx())
	assert.Equal(t, 131072, s.ContextLength())
	assert.Equal(t, "You are a pirate.", s.System)
	assert.Equal(t, "Q4_K_M", s.Details.QuantizationLevel)
	assert.Equal(t, []string{"completion", "tools"}, s.Capabilities)
	assert.True(t, s.HasCapability("tools"))
	assert.False(t, s.HasCapability("embedding"))
}

func TestShowParsing(t *testing.T) {
	tests := []struct {
		name    string
		params  string
		info    map[string]any
		numCtx  int
		trained int
	}{
		{"none", "", nil, 0, 0},
		{"num_ctx among others", "temperature 0.7\nnum_ctx 8192\nstop \"</s>\"", nil, 8192, 0},
		{"aligned as Ollama prints it", "num_ctx                        32768", nil, 32768, 0},
		{"not a number", "num_ctx lots", nil, 0, 0},
		{"zero", "num_ctx 0", nil, 0, 0},
		{"negative", "num_ctx -1", nil, 0, 0},
		{"a longer name", "num_ctx_extra 4", nil, 0, 0},
		{"by architecture", "", map[string]any{"general.architecture": "gemma3", "gemma3.context_length": 131072.0, "gemma3.vision.context_length": 1024.0}, 0, 131072},
		{"without architecture", "", map[string]any{"qwen2.context_length": 32768.0}, 0, 32768},
		{"architecture without its key", "", map[string]any{"general.architecture": "x", "y.context_length": 2048.0}, 0, 2048},
		{"not a number", "", map[string]any{"llama.context_length": "lots"}, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := ShowResponse{Parameters: tt.params, ModelInfo: tt.info}
			assert.Equal(t, tt.numCtx, s.NumCtx())
			assert.Equal(t, tt.trained, s.ContextLength())
		})
	}
}

func FuzzShowResponse(f *testing.F) {
	f.Add([]byte(`{"parameters":"num_ctx 8192","model_info":{"general.architecture":"llama","llama.context_length":131072}}`))
	f.Add([]byte(`{"model_info":{"a.context_length":-5,"b.context_length":1e300}}`))
	f.Add([]byte(`{"parameters":"num_ctx 99999999999999999999"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var s ShowResponse
		if json.Unmarshal(b, &s) != nil {
			return
		}
		if s.NumCtx() < 0 || s.ContextLength() < 0 {
			t.Fatalf("negative window from %s", b)
		}
	})
}

func TestEmbed(t *testing.T) {
	f := newFake(t)
	f.answer("POST /api/embed", http.StatusOK, api.EmbedResponse{Model: "nomic-embed-text", Embeddings: [][]float32{{0.1, 0.2}, {0.3, 0.4}}})
	c := f.client(t)
	v, err := c.Embed(context.Background(), "nomic-embed-text", []string{"a", "b"})
	require.NoError(t, err)
	assert.Equal(t, [][]float32{{0.1, 0.2}, {0.3, 0.4}}, v)
	var req api.EmbedRequest
	f.body(t, "POST /api/embed", &req)
	assert.Equal(t, "nomic-embed-text", req.Model)
	assert.Equal(t, []any{"a", "b"}, req.Input)
	require.NotNil(t, req.Truncate)
	assert.True(t, *req.Truncate)

	t.Run("no texts, no request", func(t *testing.T) {
		v, err := c.Embed(context.Background(), "nomic-embed-text", nil)
		require.NoError(t, err)
		assert.Nil(t, v)
		assert.Equal(t, 1, f.count("POST /api/embed"))
	})
	t.Run("a vector short", func(t *testing.T) {
		_, err := c.Embed(context.Background(), "nomic-embed-text", []string{"a", "b", "c"})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "2 vectors for 3 texts")
	})
}

func TestChat(t *testing.T) {
	f := newFake(t)
	f.answer("POST /api/chat", http.StatusOK, api.ChatResponse{
		Model: "qwen2.5:7b", CreatedAt: time.Now(), Message: api.Message{Role: "assistant", Content: `{"ok":true}`},
		Done: true, DoneReason: "stop", Metrics: api.Metrics{PromptEvalCount: 31, EvalCount: 5, TotalDuration: 2 * time.Second},
	})
	schema := json.RawMessage(`{"type":"object","properties":{"ok":{"type":"boolean"}}}`)
	res, err := f.client(t).Chat(context.Background(), ChatRequest{
		Model:    "qwen2.5:7b",
		Messages: []Message{{Role: "system", Content: "Answer in JSON."}, {Role: "user", Content: "ok?"}},
		Format:   schema,
		Options:  Options{"temperature": 0.1, "num_ctx": 8192},
	})
	require.NoError(t, err)
	assert.Equal(t, `{"ok":true}`, res.Message.Content)
	assert.Equal(t, "assistant", res.Message.Role)
	assert.True(t, res.Done)
	assert.Equal(t, "stop", res.DoneReason)
	assert.Equal(t, 31, res.PromptEvalCount)
	assert.Equal(t, 2*time.Second, res.TotalDuration)

	var req api.ChatRequest
	f.body(t, "POST /api/chat", &req)
	assert.Equal(t, "qwen2.5:7b", req.Model)
	require.NotNil(t, req.Stream)
	assert.False(t, *req.Stream, "not streamed")
	assert.JSONEq(t, string(schema), string(req.Format))
	assert.Equal(t, map[string]any{"temperature": 0.1, "num_ctx": 8192.0}, req.Options)
	require.Len(t, req.Messages, 2)
	assert.Equal(t, api.Message{Role: "system", Content: "Answer in JSON."}, req.Messages[0])
	assert.Equal(t, "ok?", req.Messages[1].Content)
	assert.Nil(t, req.KeepAlive, "Ollama's default keep-alive")
}

func TestGenerate(t *testing.T) {
	f := newFake(t)
	f.answer("POST /api/generate", http.StatusOK, api.GenerateResponse{
		Model: "llama3.2", CreatedAt: time.Now(), Response: "Paris.", Done: true, DoneReason: "stop",
		Metrics: api.Metrics{EvalCount: 3},
	})
	keep := 10 * time.Minute
	res, err := f.client(t).Generate(context.Background(), GenerateRequest{
		Model: "llama3.2", Prompt: "Capital of France?", System: "Be brief.", Options: Options{"num_predict": 16}, KeepAlive: &keep,
	})
	require.NoError(t, err)
	assert.Equal(t, "Paris.", res.Response)
	assert.Equal(t, "stop", res.DoneReason)
	assert.Equal(t, 3, res.EvalCount)

	var req api.GenerateRequest
	f.body(t, "POST /api/generate", &req)
	assert.Equal(t, "Capital of France?", req.Prompt)
	assert.Equal(t, "Be brief.", req.System)
	require.NotNil(t, req.Stream)
	assert.False(t, *req.Stream)
	require.NotNil(t, req.KeepAlive)
	assert.Equal(t, keep, req.KeepAlive.Duration)
	assert.Equal(t, 16.0, req.Options["num_predict"])
}

func TestLoadAndUnload(t *testing.T) {
	tests := []struct {
		name   string
		call   func(*Client) error
		reason string
		// keepAlive is the raw keep_alive sent; "" when absent.
		keepAlive string
	}{
		{"load", func(c *Client) error { return c.Load(context.Background(), "llama3.2") }, "load", ""},
		{"unload", func(c *Client) error { return c.Unload(context.Background(), "llama3.2") }, "unload", "0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t)
			f.answer("POST /api/generate", http.StatusOK, api.GenerateResponse{Model: "llama3.2", CreatedAt: time.Now(), Done: true, DoneReason: tt.reason})
			require.NoError(t, tt.call(f.client(t)))

			var raw map[string]json.RawMessage
			f.body(t, "POST /api/generate", &raw)
			assert.JSONEq(t, `"llama3.2"`, string(raw["model"]))
			assert.JSONEq(t, `""`, string(raw["prompt"]), "an empty prompt, sent")
			assert.JSONEq(t, `false`, string(raw["stream"]))
			assert.Equal(t, tt.keepAlive, string(raw["keep_alive"]))

			// As Ollama reads it: keep_alive 0 unloads at once.
			var req api.GenerateRequest
			f.body(t, "POST /api/generate", &req)
			assert.Empty(t, req.Prompt)
			if tt.keepAlive != "" {
				require.NotNil(t, req.KeepAlive)
				assert.Zero(t, req.KeepAlive.Duration)
			} else {
				assert.Nil(t, req.KeepAlive)
			}
		})
	}
	t.Run("model not pulled", func(t *testing.T) {
		f := newFake(t)
		f.answer("POST /api/generate", http.StatusNotFound, map[string]string{"error": `model "nope" not found, try pulling it first`})
		err := f.client(t).Load(context.Background(), "nope")
		assert.True(t, IsNotFound(err), "%v", err)
	})
}

func TestKeepAliveForever(t *testing.T) {
	f := newFake(t)
	f.answer("POST /api/generate", http.StatusOK, api.GenerateResponse{Done: true, DoneReason: "load"})
	forever := -time.Nanosecond
	_, err := f.client(t).Generate(context.Background(), GenerateRequest{Model: "llama3.2", KeepAlive: &forever})
	require.NoError(t, err)
	var req api.GenerateRequest
	f.body(t, "POST /api/generate", &req)
	require.NotNil(t, req.KeepAlive)
	assert.Greater(t, req.KeepAlive.Duration, 100*365*24*time.Hour, "Ollama keeps it loaded")
}
