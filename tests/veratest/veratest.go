// Package veratest runs vera for the end-to-end tests (tests/ and
// tests/process/): in this process through app.Run on 127.0.0.1:0, its
// address learnt from the ready hook (Start), or as the built binary for
// what needs a process of its own (Launch, RunCommand, Command). The
// helpers talk to a running vera of either kind as its users do: the
// official clients, the admin routes, /healthz, the files it leaves.
package veratest

import (
	"context"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/app"
)

// Vera is a vera under test: in this process (InProcess) or the built
// binary (Proc).
type Vera interface {
	Address() string // host:port
	Logs() string    // what vera has logged so far
}

// InProcess is a vera started by app.Run in this process.
type InProcess struct {
	Addr   string // host:port
	cancel context.CancelFunc
	done   chan error // Run's result, once
	stderr *SyncBuffer

	stopOnce sync.Once
	err      error // Run's result, after Stop
}

// Start runs `vera serve` through app.Run on 127.0.0.1:0 with env (after
// a private config and data dir), waits for the ready hook and for its
// store to load. The cleanup stops it. app.Run sets gin's mode, a
// global: tests that start vera in-process do not run in parallel.
func Start(t testing.TB, env ...string) *InProcess {
	t.Helper()
	p := StartLoading(t, env...)
	WaitLoaded(t, p)
	return p
}

// StartLoading is Start, returning as soon as vera listens: its store may
// still be loading.
func StartLoading(t testing.TB, env ...string) *InProcess {
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
	p := &InProcess{cancel: cancel, done: make(chan error, 1), stderr: &SyncBuffer{}}
	ready := make(chan string, 1)
	go func() {
		p.done <- app.Run(ctx, []string{"serve"}, func(k string) string { return vars[k] }, io.Discard, p.stderr,
			func(addr string) { ready <- addr })
	}()
	t.Cleanup(func() {
		if !p.Wait() {
			t.Error("app.Run did not return after its context was cancelled")
		}
		if t.Failed() {
			t.Logf("vera's log:\n%s", p.Logs())
		}
	})
	select {
	case p.Addr = <-ready:
	case err := <-p.done:
		p.done <- err // for the cleanup
		t.Fatalf("app.Run returned before listening: %v\n%s", err, p.Logs())
	case <-time.After(30 * time.Second):
		t.Fatalf("vera did not start:\n%s", p.Logs())
	}
	return p
}

// Address is where vera listens.
func (p *InProcess) Address() string { return p.Addr }

// Logs is what vera has logged so far.
func (p *InProcess) Logs() string { return p.stderr.String() }

// Wait cancels Run's context and waits for Run to return; false if it did
// not within 30s.
func (p *InProcess) Wait() bool {
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

// Stop ends vera as a signal would (Run's context cancelled) and requires
// a graceful stop: Run returns nil, with its store closed.
func (p *InProcess) Stop(t *testing.T) {
	t.Helper()
	require.True(t, p.Wait(), "app.Run did not return")
	require.NoError(t, p.err)
}

// SyncBuffer is a log buffer written by vera and read by the test.
type SyncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
