package proxy

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// lockedBuffer is a log sink safe for the handler's goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func TestOwnRoutesComeBeforeOllamasAndShareTheMiddleware(t *testing.T) {
	var mu sync.Mutex
	var forwarded []string
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		forwarded = append(forwarded, r.URL.Path)
		mu.Unlock()
		_, _ = io.WriteString(w, `{"from":"ollama"}`)
	}))
	t.Cleanup(up.Close)
	var logs lockedBuffer
	s := New(mustURL(t, up.URL), NewTransport(time.Second), slog.New(slog.NewJSONHandler(&logs, nil)))
	s.Own = func(e *gin.Engine) {
		e.GET("/healthz", func(c *gin.Context) { c.String(http.StatusOK, "vera") })
		e.GET("/boom", func(*gin.Context) { panic("boom") })
	}
	base := httpServer(t, s)

	get := func(path string) (int, string) {
		t.Helper()
		res, err := http.Get(base + path)
		require.NoError(t, err)
		defer res.Body.Close()
		body, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		return res.StatusCode, string(body)
	}
	code, body := get("/healthz")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "vera", body, "vera's own route answers")

	code, body = get("/boom")
	assert.Equal(t, http.StatusInternalServerError, code, "the panic is recovered")
	var e map[string]string
	require.NoError(t, json.Unmarshal([]byte(body), &e), body)
	assert.Equal(t, "internal error: boom", e["error"])

	code, body = get("/api/tags")
	assert.Equal(t, http.StatusOK, code)
	assert.JSONEq(t, `{"from":"ollama"}`, body, "the rest still goes to Ollama")

	mu.Lock()
	assert.Equal(t, []string{"/api/tags"}, forwarded)
	mu.Unlock()
	assert.Contains(t, logs.String(), `"path":"/healthz"`, "own routes are logged like the rest")
}
