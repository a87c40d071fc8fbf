package proxy

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/memory"
	"github.com/vera-proxy/vera/memory/embedded"
)

// failingLatest fails the recent layer while fail is set.
type failingLatest struct {
	memory.Store
	fail *atomic.Bool
}

func (f failingLatest) Latest(ctx context.Context, flt memory.Filter, n int) ([]memory.Memory, error) {
	if f.fail.Load() {
		return nil, errors.New("qdrant: connection refused")
	}
	return f.Store.Latest(ctx, flt, n)
}

// Kept: a later turn while the store fails gets the block Open WebUI sent
// with it, never the one its conversation's plan was built with.
func TestOpenWebUIBlockIsNeverStaleWhileTheStoreFails(t *testing.T) {
	up := newFakeOllama(t)
	db, err := embedded.Open(context.Background(), t.TempDir())
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	var fail atomic.Bool
	base := startVera(t, up.srv.URL, func(s *Server) { s.Memory = memory.NewBuilder(failingLatest{db, &fail}, nil, nil) })
	send := func(body string) {
		req, _ := http.NewRequest("POST", base+"/api/chat", strings.NewReader(body))
		req.Header.Set("X-OpenWebUI-Chat-Id", "c1")
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
	}
	send(`{"model":"llama3.2","stream":false,"messages":[{"role":"system","content":"S\nUser Context:\n1. [2025-01-01] Lives in Oldtownzz\n\n"},{"role":"user","content":"q1"}]}`)
	fail.Store(true)
	send(`{"model":"llama3.2","stream":false,"messages":[{"role":"system","content":"S\nUser Context:\n1. [2025-01-01] Lives in Newtownzz\n\n"},{"role":"user","content":"q1"},{"role":"assistant","content":"a1"},{"role":"user","content":"q2"}]}`)
	_, _, sent := up.last()
	assert.Contains(t, string(sent), "Newtownzz")
	assert.NotContains(t, string(sent), "Oldtownzz")
}

// Dropped, when Open WebUI made a system message that holds only its block
// (the user set no system prompt): without it the request has no system
// message, so the model's Modelfile SYSTEM leads the one vera adds.
func TestDroppingOpenWebUIsOnlySystemMessageKeepsTheModelfiles(t *testing.T) {
	up := newFakeOllama(t)
	up.system = "You are Mario."
	db, err := embedded.Open(context.Background(), t.TempDir())
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	require.NoError(t, db.Upsert(context.Background(), memory.Memory{ID: memory.NewID(), Namespace: "default", Type: memory.Rule, Text: "Answer in French.", Time: time.Now()}))
	base := startVera(t, up.srv.URL, func(s *Server) {
		s.Memory = memory.NewBuilder(db, nil, nil)
		s.OpenWebUIMemory = OpenWebUIDrop
	})
	body := `{"model":"llama3.2","stream":false,"messages":[{"role":"system","content":"User Context:\n1. [2025-01-01] Lives in Oldtownzz\n\n"},{"role":"user","content":"hi"}]}`
	res, err := http.Post(base+"/api/chat", "application/json", strings.NewReader(body))
	require.NoError(t, err)
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	_, _, sent := up.last()
	assert.NotContains(t, string(sent), "Oldtownzz")
	assert.Contains(t, string(sent), "You are Mario.", "the Modelfile SYSTEM, as without the block")

}
