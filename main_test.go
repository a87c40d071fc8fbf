package main

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ollama/ollama/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/admin"
	"github.com/vera-proxy/vera/memory"
	"github.com/vera-proxy/vera/memory/embedded"
	"github.com/vera-proxy/vera/ollama/ollamatest"
)

// inProcess is a vera started by run in this process.
type inProcess struct {
	addr   string
	cancel context.CancelFunc
	done   chan error // run's result, once
	stderr *syncBuffer

	stopOnce sync.Once
	err      error // run's result, after stop
}

// runInProcess starts `vera serve` through run on 127.0.0.1:0 with env
// (after a private config and data dir) and waits for the ready hook. The
// cleanup stops it. run sets gin's mode, a global: tests that start vera
// in-process do not run in parallel.
func runInProcess(t testing.TB, env ...string) *inProcess {
	t.Helper()
	return startInProcess(t, false, env...)
}

// startInProcess is runInProcess, returning as soon as vera listens when
// noWait is set: its store may still be loading.
func startInProcess(t testing.TB, noWait bool, env ...string) *inProcess {
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
	p := &inProcess{cancel: cancel, done: make(chan error, 1), stderr: &syncBuffer{}}
	ready := make(chan string, 1)
	go func() {
		p.done <- run(ctx, []string{"serve"}, func(k string) string { return vars[k] }, io.Discard, p.stderr,
			func(addr string) { ready <- addr })
	}()
	t.Cleanup(func() {
		if !p.wait() {
			t.Error("run did not return after its context was cancelled")
		}
		if t.Failed() {
			t.Logf("vera's log:\n%s", p.logs())
		}
	})
	select {
	case p.addr = <-ready:
	case err := <-p.done:
		p.done <- err // for the cleanup
		t.Fatalf("run returned before listening: %v\n%s", err, p.logs())
	case <-time.After(30 * time.Second):
		t.Fatalf("vera did not start:\n%s", p.logs())
	}
	if !noWait {
		waitLoaded(t, p.addr)
	}
	return p
}

// waitLoaded waits until the vera at addr has loaded its store's index
// (it listens at once, and answers chats without memory until then).
func waitLoaded(t testing.TB, addr string) {
	t.Helper()
	require.Eventually(t, func() bool {
		var h admin.Health
		return admin.GetJSON(context.Background(), http.DefaultClient, "http://"+addr+"/healthz", &h) == nil && h.Status != "loading"
	}, 30*time.Second, 5*time.Millisecond, "vera's store did not load")
}

// wait cancels run's context and waits for run to return; false if it did
// not within 30s.
func (p *inProcess) wait() bool {
	returned := true
	p.stopOnce.Do(func() {
		p.cancel()
		select {
		case p.err = <-p.done:
		case <-time.After(30 * time.Second):
			returned = false
		}
	})
	return returned
}

// stop ends vera as a signal would (run's context cancelled) and requires a
// graceful stop: run returns nil, with its store closed.
func (p *inProcess) stop(t *testing.T) {
	t.Helper()
	require.True(t, p.wait(), "run did not return")
	require.NoError(t, p.err)
}

// logs is what vera has logged so far.
func (p *inProcess) logs() string { return p.stderr.String() }

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

// headerTransport, chat, user, systemOf and recallsEventually are
// ollamatest's client helpers, on this file's vera.
type headerTransport = ollamatest.HeaderTransport

func chat(t *testing.T, p *inProcess, ns string, off bool, msgs ...api.Message) string {
	t.Helper()
	return ollamatest.Chat(t, p.addr, ns, off, msgs...)
}

func user(s string) api.Message { return ollamatest.User(s) }

func systemOf(r api.ChatRequest) string { return ollamatest.SystemOf(r) }

func recallsEventually(t *testing.T, p *inProcess, up *ollamatest.Server, ns, question, want string) {
	t.Helper()
	up.RecallsEventually(t, p.addr, ns, question, want)
}

func openStore(t *testing.T, dir string) *embedded.DB {
	t.Helper()
	db, err := embedded.Open(context.Background(), dir)
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	return db
}

func mustParse(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	require.NoError(t, err)
	return u
}

func TestRunInProcessRecallsAndStopsGracefully(t *testing.T) {
	up := ollamatest.New(t)
	data := t.TempDir()
	p := runInProcess(t, "VERA_OLLAMA_URL="+up.URL, "VERA_DATA_DIR="+data)

	assert.Equal(t, "Hello from Ollama", chat(t, p, "alice", false, user("My sister Ana lives in Lisbon.")))
	// A new conversation: the turn is stored in the background, so ask
	// until the forwarded system message recalls it.
	recallsEventually(t, p, up, "alice", "Where does my sister Ana live?", "Ana lives in Lisbon")

	// Another namespace sees nothing of alice's.
	chat(t, p, "bob", false, user("Where does my sister Ana live?"))
	assert.NotContains(t, systemOf(up.LastChat(t)), "Lisbon")

	// Cancelling run's context is a graceful stop: run returns nil and
	// the store is closed, with the turn in it.
	p.stop(t)
	assert.Contains(t, p.logs(), "msg=stopped")

	db := openStore(t, data)
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
