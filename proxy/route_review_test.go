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

// The /think prefix comes off the last user message only: not an earlier
// one, not a tool's description, not a quoted "/thinking" in the text.
func TestRetargetStripsOnlyThePrefix(t *testing.T) {
	out, err := retarget([]byte(`{"model":"vera","messages":[
		{"role":"user","content":"/think old"},{"role":"assistant","content":"ok"},
		{"role":"user","content":"\n/think what does the \"/thinking\" flag do?"}],
		"tools":[{"type":"function","function":{"name":"t","description":"/think helper"}}],"options":{"seed":12345678901234567}}`), "big", true, true, ollamaChat)
	require.NoError(t, err)
	var got struct {
		Messages []struct{ Content string }
		Tools    []struct{ Function struct{ Description string } }
		Options  map[string]json.Number
	}
	require.NoError(t, json.Unmarshal(out, &got))
	assert.Equal(t, "/think old", got.Messages[0].Content)
	assert.Equal(t, `what does the "/thinking" flag do?`, got.Messages[2].Content)
	assert.Equal(t, "/think helper", got.Tools[0].Function.Description)
	assert.Equal(t, "12345678901234567", got.Options["seed"].String(), "numbers kept exact")

	out, err = retarget([]byte(`{"model":"vera","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}},{"type":"text","text":"/think why?"}]}]}`), "big", true, false, openAIChat)
	require.NoError(t, err)
	assert.Contains(t, string(out), `"text":"why?"`)
	out, err = retarget([]byte(`{"model":"vera","input":"/think why?"}`), "big", true, false, openAIResponses)
	require.NoError(t, err)
	assert.Contains(t, string(out), `"input":"why?"`)
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
