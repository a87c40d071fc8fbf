package proxy

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/memory"
)

func TestPanicAfterAnswerStartedAbortsConnection(t *testing.T) {
	up := newFakeOllama(t)
	base := startVera(t, up.srv.URL, func(s *Server) { s.Recorder = panicRecorder{} })
	// The recorder panics once the answer is complete, before its end went
	// out: the connection must be aborted, not ended cleanly, and nothing
	// else written.
	res, err := http.Post(base+"/api/chat", "application/json",
		strings.NewReader(`{"model":"llama3.2","messages":[{"role":"user","content":"hi"}]}`))
	require.NoError(t, err)
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)
	assert.Equal(t, 4, strings.Count(string(body), "\n"), "only the upstream's records, without the held end")
	assert.NotContains(t, string(body), `"done":true`)
}

func TestPanicBeforeAnswerIs500(t *testing.T) {
	s := New(mustURL(t, "http://127.0.0.1:1"), NewTransport(time.Second), nil)
	e := s.Handler().(*gin.Engine)
	e.GET("/boom", func(*gin.Context) { panic("boom") })
	base := httpServer(t, e)
	res, err := http.Get(base + "/boom")
	require.NoError(t, err)
	defer res.Body.Close()
	assert.Equal(t, http.StatusInternalServerError, res.StatusCode)
	var body map[string]string
	require.NoError(t, json.NewDecoder(res.Body).Decode(&body))
	assert.Equal(t, "internal error: boom", body["error"])
}

type panicRecorder struct{}

// The request's log line carries the cause of an error it was answered
// with.
func TestErrorCauseOnTheLogLine(t *testing.T) {
	var logs strings.Builder
	var mu sync.Mutex
	s := New(mustURL(t, "http://127.0.0.1:1"), NewTransport(time.Second), slog.New(slog.NewTextHandler(lockedWriter{&mu, &logs}, nil)))
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	res, _ := postChat(t, srv.URL, "/api/chat", hiChat)
	assert.Equal(t, http.StatusBadGateway, res.StatusCode)
	mu.Lock()
	defer mu.Unlock()
	assert.Regexp(t, `msg=request .*status=502 .*error=".*connection refused`, logs.String())
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (panicRecorder) Record(context.Context, memory.Turn) error { panic("boom") }

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
