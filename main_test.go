package main

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

	"github.com/ollama/ollama/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/memory"
	"github.com/vera-proxy/vera/memory/embedded"
)

// fakeOllama speaks the part of Ollama's API vera uses, embeds with a
// bag-of-words hash, and records every chat it is asked.
type fakeOllama struct {
	*httptest.Server
	mu    sync.Mutex
	chats []api.ChatRequest
}

func newFakeOllama(t *testing.T) *fakeOllama {
	f := &fakeOllama{}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/version", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"version":"0.12.3"}`)
	})
	mux.HandleFunc("GET /api/tags", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"models":[{"name":"llama3.2:latest","model":"llama3.2:latest"},{"name":"nomic-embed-text:latest","model":"nomic-embed-text:latest"}]}`)
	})
	mux.HandleFunc("POST /api/show", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"model_info":{"general.architecture":"llama","llama.context_length":131072}}`)
	})
	mux.HandleFunc("GET /api/ps", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"models":[]}`)
	})
	mux.HandleFunc("POST /api/embed", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Model string   `json:"model"`
			Input []string `json:"input"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, `{"error":"bad request"}`, http.StatusBadRequest)
			return
		}
		for i := range req.Input {
			req.Input[i] = strings.ToLower(req.Input[i])
		}
		vecs, _ := memory.HashEmbedder{}.Embed(r.Context(), req.Input)
		_ = json.NewEncoder(w).Encode(map[string]any{"model": req.Model, "embeddings": vecs})
	})
	mux.HandleFunc("POST /api/chat", func(w http.ResponseWriter, r *http.Request) {
		var req api.ChatRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, `{"error":"bad request"}`, http.StatusBadRequest)
			return
		}
		f.mu.Lock()
		f.chats = append(f.chats, req)
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/x-ndjson")
		for _, tok := range []string{"Hello", " from", " Ollama"} {
			fmt.Fprintf(w, `{"model":"llama3.2","created_at":"2026-11-22T10:00:00Z","message":{"role":"assistant","content":%q},"done":false}`+"\n", tok)
			w.(http.Flusher).Flush()
		}
		io.WriteString(w, `{"model":"llama3.2","created_at":"2026-11-22T10:00:01Z","message":{"role":"assistant","content":""},"done":true,"done_reason":"stop"}`+"\n")
	})
	f.Server = httptest.NewServer(mux)
	t.Cleanup(f.Close)
	return f
}

// lastSystem returns the system message of the last chat vera forwarded,
// or "".
func (f *fakeOllama) lastSystem(t *testing.T) string {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	require.NotEmpty(t, f.chats)
	last := f.chats[len(f.chats)-1]
	if len(last.Messages) > 0 && last.Messages[0].Role == "system" {
		return last.Messages[0].Content
	}
	return ""
}

// inProcess is a vera started by run in this process.
type inProcess struct {
	addr   string
	stop   context.CancelFunc
	done   chan error // run's result
	stderr *syncBuffer
}

// runInProcess starts `vera serve` through run on 127.0.0.1:0 with env
// (after a private config and data dir) and waits for the ready hook. The
// cleanup cancels run's context and waits for it to return.
func runInProcess(t *testing.T, env ...string) *inProcess {
	t.Helper()
	vars := map[string]string{
		"VERA_CONFIG_DIR": t.TempDir(),
		"VERA_DATA_DIR":   t.TempDir(),
		"VERA_LISTEN":     "127.0.0.1:0",
	}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		vars[k] = v
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &inProcess{stop: cancel, done: make(chan error, 1), stderr: &syncBuffer{}}
	ready := make(chan string, 1)
	go func() {
		p.done <- run(ctx, []string{"serve"}, func(k string) string { return vars[k] }, io.Discard, p.stderr,
			func(addr string) { ready <- addr })
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-p.done:
		case <-time.After(30 * time.Second):
			t.Error("run did not return after its context was cancelled")
		}
		if t.Failed() {
			t.Logf("vera's log:\n%s", p.stderr.String())
		}
	})
	select {
	case p.addr = <-ready:
	case err := <-p.done:
		p.done <- err // for the cleanup
		t.Fatalf("run returned before listening: %v\n%s", err, p.stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("vera did not start:\n%s", p.stderr.String())
	}
	return p
}

// chat sends one user message as namespace ns through the official Ollama
// client and returns the answer.
func (p *inProcess) chat(t *testing.T, ns, text string) string {
	t.Helper()
	u, err := url.Parse("http://" + p.addr)
	require.NoError(t, err)
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c := api.NewClient(u, &http.Client{Transport: headerTransport{tr, "X-OpenWebUI-User-Id", ns}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var answer strings.Builder
	err = c.Chat(ctx, &api.ChatRequest{Model: "llama3.2", Messages: []api.Message{{Role: "user", Content: text}}},
		func(r api.ChatResponse) error {
			answer.WriteString(r.Message.Content)
			return nil
		})
	require.NoError(t, err)
	return answer.String()
}

// headerTransport sets one header on every request.
type headerTransport struct {
	base       http.RoundTripper
	key, value string
}

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(h.key, h.value)
	return h.base.RoundTrip(r)
}

// syncBuffer is a log buffer written by vera and read by the test.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestRunInProcessRecallsAndStopsGracefully(t *testing.T) {
	up := newFakeOllama(t)
	data := t.TempDir()
	p := runInProcess(t, "VERA_OLLAMA_URL="+up.URL, "VERA_DATA_DIR="+data)

	assert.Equal(t, "Hello from Ollama", p.chat(t, "alice", "My sister Ana lives in Lisbon."))
	// A new conversation: the turn is stored in the background, so ask
	// until the forwarded system message recalls it.
	require.Eventually(t, func() bool {
		p.chat(t, "alice", "Where does my sister Ana live?")
		return strings.Contains(up.lastSystem(t), "Ana lives in Lisbon")
	}, 15*time.Second, 50*time.Millisecond, "the fact was never recalled")

	// Another namespace sees nothing of alice's.
	p.chat(t, "bob", "Where does my sister Ana live?")
	assert.NotContains(t, up.lastSystem(t), "Lisbon")

	// Cancelling run's context is a graceful stop: run returns nil and
	// the store is closed, with the turn in it.
	p.stop()
	select {
	case err := <-p.done:
		require.NoError(t, err)
		p.done <- err // for the cleanup
	case <-time.After(30 * time.Second):
		t.Fatal("run did not return")
	}
	assert.Contains(t, p.stderr.String(), "msg=stopped")

	db, err := embedded.Open(context.Background(), data)
	require.NoError(t, err, "run closed the store")
	defer db.Close()
	stored := func(ns string) string {
		ms, err := db.Latest(context.Background(), memory.Filter{Namespace: ns}, 100)
		require.NoError(t, err)
		var texts []string
		for _, m := range ms {
			texts = append(texts, m.Text)
		}
		return strings.Join(texts, "\n")
	}
	assert.Contains(t, stored("alice"), "My sister Ana lives in Lisbon.", "the turn is in the store")
	assert.NotContains(t, stored("bob"), "Lisbon", "bob's namespace holds none of alice's turns")
}
