package proxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
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
	assert.Regexp(t, `msg="memory failing[^\n]*request_id=[0-9a-f]{16}`, out, "the request's id on its line")
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

func TestMemoryHeadersAndExposure(t *testing.T) {
	up := newFakeOllama(t)
	mem := &fixedMemory{mc: memory.Context{
		System: "x", RuleIDs: []string{"r1"}, Semantic: []memory.Hit{{Memory: memory.Memory{ID: "s1"}}}, RecentIDs: []string{"t1", "t2"},
		RulesTokens: 3, SemanticTokens: 5, RecentTokens: 7,
	}}
	base := startVera(t, up.srv.URL, func(s *Server) { s.Memory = mem })
	res, _ := postChat(t, base, "/api/chat", hiChat)
	assert.Equal(t, "semantic=1; recent=2; rules=1; tokens=15", res.Header.Get("X-Vera-Context"))
	assert.Equal(t, "r1,s1,t1,t2", res.Header.Get("X-Vera-Memories"))
	exposed := strings.Join(res.Header.Values("Access-Control-Expose-Headers"), ",")
	for _, h := range []string{"X-Vera-Context", "X-Vera-Memories", "X-Vera-Tier", "X-Vera-Fallback", "X-Vera-Forgot", "X-Vera-VRAM"} {
		assert.Contains(t, exposed, h)
	}
	assert.NotContains(t, exposed, "*")

	mem.mc = memory.Context{}
	res, _ = postChat(t, base, "/api/chat", hiChat)
	_, sent := res.Header["X-Vera-Memories"]
	assert.False(t, sent, "left out when nothing was injected")

	many := memory.Context{}
	for i := range 60 {
		many.RecentIDs = append(many.RecentIDs, fmt.Sprint(i))
	}
	mem.mc = many
	res, _ = postChat(t, base, "/api/chat", hiChat)
	assert.Len(t, strings.Split(res.Header.Get("X-Vera-Memories"), ","), 50, "the first 50")
}
