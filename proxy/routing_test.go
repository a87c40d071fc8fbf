package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/ollama"
	"github.com/vera-proxy/vera/proxy/tier"
	"github.com/vera-proxy/vera/proxy/vram"
)

func routedVera(t *testing.T, up *fakeOllama, rec *recorder) string {
	t.Helper()
	r, err := tier.New(nil, nil)
	require.NoError(t, err)
	return startVera(t, up.srv.URL, func(s *Server) {
		s.Recorder = rec
		s.Routing = &Routing{Router: r, Virtual: "vera", Deep: "vera-deep",
			Models: map[tier.Tier]string{tier.Light: "small", tier.Medium: "mid", tier.Complex: "big"}}
	})
}

// Routing keeps what decode read of an Open WebUI RAG chat: the stored
// question is the user's own, not the template; background tasks go to
// the light model (never a flush for the complex one).
func TestRoutingKeepsRAGAndSendsTasksLight(t *testing.T) {
	up := newFakeOllama(t)
	rec := &recorder{}
	base := routedVera(t, up, rec)
	rag, _ := json.Marshal(readFixture(t, "rag_v4_prepend.txt"))
	res, _ := postChat(t, base, "/api/chat", `{"model":"vera","messages":[{"role":"user","content":`+string(rag)+`}]}`)
	require.Equal(t, http.StatusOK, res.StatusCode)
	turns := rec.all()
	require.Len(t, turns, 1)
	assert.Equal(t, sampleQuery, turns[0].User)

	for _, f := range []string{"query_v4_current.txt", "query_v3.txt", "moa.txt", "title_v5_current.txt"} {
		task, _ := json.Marshal(readFixture(t, f))
		res, _ := postChat(t, base, "/api/chat", `{"model":"vera","messages":[{"role":"user","content":`+string(task)+`}]}`)
		require.Equal(t, http.StatusOK, res.StatusCode)
		assert.Equal(t, "light small", res.Header.Get("X-Vera-Tier"), f)
	}
}

// psDown is an Ollama whose /api/ps fails.
type psDown struct{}

func (psDown) PS(context.Context) ([]ollama.Running, error) {
	return nil, errors.New("ollama answered 500")
}
func (psDown) Load(context.Context, string) error   { return nil }
func (psDown) Unload(context.Context, string) error { return nil }

// When /api/ps fails, a chat for a large model goes on without the flush
// (it is not the client that went away).
func TestVRAMWithoutPS(t *testing.T) {
	up := newFakeOllama(t)
	m := vram.New(psDown{}, vram.Config{Large: []string{"big"}, FlushTimeout: time.Second, PollInterval: time.Millisecond}, nil)
	t.Cleanup(m.Close)
	base := startVera(t, up.srv.URL, func(s *Server) { s.VRAM = m })
	res, body := postChat(t, base, "/api/chat", `{"model":"big","messages":[{"role":"user","content":"hi"}]}`)
	assert.Equal(t, http.StatusOK, res.StatusCode, body)
	assert.Empty(t, res.Header.Get("X-Vera-VRAM"))
}
