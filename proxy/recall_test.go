package proxy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/memory"
)

// flakyMemory fails while fail is set.
type flakyMemory struct{ fail atomic.Bool }

func (m *flakyMemory) Recall(context.Context, memory.Request) *memory.Context {
	if m.fail.Load() {
		return &memory.Context{Err: errors.New("store: disk I/O error")}
	}
	return &memory.Context{}
}

func TestMemoryFailureIsLoggedOnce(t *testing.T) {
	up := newFakeOllama(t)
	var logs syncBuffer
	mem := &flakyMemory{}
	mem.fail.Store(true)
	s := New(mustURL(t, up.srv.URL), NewTransport(time.Minute), slog.New(slog.NewTextHandler(&logs, nil)))
	s.Memory = mem
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	send := func() {
		res, err := http.Post(srv.URL+"/api/chat", "application/json",
			strings.NewReader(`{"model":"llama3.2","messages":[{"role":"user","content":"hi"}]}`))
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		require.Equal(t, http.StatusOK, res.StatusCode, "a memory failure never fails a chat")
	}
	for range 3 {
		send()
	}
	mem.fail.Store(false)
	send()
	send()
	mem.fail.Store(true)
	send()
	out := logs.String()
	assert.Equal(t, 2, strings.Count(out, "memory failing"), out)
	assert.Equal(t, 1, strings.Count(out, "memory recovered"), out)
	assert.Contains(t, out, "disk I/O error")
}

// syncBuffer is a bytes.Buffer safe for a logger and a test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
