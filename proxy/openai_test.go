package proxy

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/memory"
)

// fixedMemory injects the same layers into every chat and remembers the
// request it was asked about.
type fixedMemory struct {
	mc  memory.Context
	got chan memory.Request
}

func (m *fixedMemory) Recall(_ context.Context, req memory.Request) *memory.Context {
	select {
	case m.got <- req:
	default:
	}
	mc := m.mc
	return &mc
}

func TestOpenAIChatWithMemory(t *testing.T) {
	up := newFakeOllama(t)
	mem := &fixedMemory{got: make(chan memory.Request, 1), mc: memory.Context{
		System:         "be brief\n\nMemories:\n[2026-11-20]\nUser: my sister is Ann\nAssistant: noted",
		SystemReplaces: 1,
		Recent:         []memory.Message{{Role: "user", Content: "earlier"}, {Role: "assistant", Content: "yes"}},
		RecentIDs:      []string{"r1"},
		Semantic:       []memory.Hit{{Memory: memory.Memory{ID: "s1"}}},
		SemanticTokens: 12, RecentTokens: 4,
	}}
	rec := &recorder{}
	base, served := startServedVera(t, up.srv.URL, func(s *Server) { s.Memory, s.Recorder = mem, rec })

	image := `{"type":"image_url","image_url":{"url":"data:image/png;base64,aGVsbG8="}}`
	sent := `{"model":"llama3.2","stream":true,"max_completion_tokens":100,"future":1,"messages":[` +
		`{"role":"system","content":[{"type":"text","text":"be brief"}],"name":"sys"},` +
		`{"role":"user","content":[{"type":"text","text":"who is my sister?"},` + image + `]}]}`
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/chat/completions", strings.NewReader(sent))
	req.Header.Set("X-OpenWebUI-User-Id", "alice")
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	body, err := io.ReadAll(res.Body)
	res.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, res.StatusCode, string(body))
	assert.Equal(t, "semantic=1; recent=1; rules=0; tokens=16", res.Header.Get("X-Vera-Context"))
	assert.Equal(t, "s1,r1", res.Header.Get("X-Vera-Memories"), "semantic then recent, in injection order")
	assert.Contains(t, res.Header.Get("Access-Control-Expose-Headers"), "X-Vera-Memories")
	assert.True(t, strings.HasSuffix(string(body), "data: [DONE]\n\n"))
	waitFor(t, served, "the handler to return")

	// What memory was asked: the text of each message, the model's window
	// (/api/show has no num_ctx here, /api/ps no context length: 4096) and
	// the answer's cap, in vera's tokens: a model that never answered
	// counts with the safe prior.
	got := waitFor(t, mem.got, "the memory request")
	assert.Equal(t, "alice", got.Namespace)
	assert.Equal(t, []memory.Message{{Role: "system", Content: "be brief"}, {Role: "user", Content: "who is my sister?"}}, got.Messages)
	assert.Equal(t, memory.Prior(0).Within(100), got.AnswerTokens)
	assert.Equal(t, memory.Prior(0).Within(memory.DefaultContextLength), got.ContextLength)

	// What Ollama got: the merged system message as a string (the old one's
	// other fields kept), the recent pair, the user's parts untouched.
	_, _, fwd := up.last()
	assert.JSONEq(t, `{"model":"llama3.2","stream":true,"max_completion_tokens":100,"future":1,"messages":[`+
		`{"role":"system","name":"sys","content":"be brief\n\nMemories:\n[2026-11-20]\nUser: my sister is Ann\nAssistant: noted"},`+
		`{"role":"user","content":"earlier"},{"role":"assistant","content":"yes"},`+
		`{"role":"user","content":[{"type":"text","text":"who is my sister?"},`+image+`]}]}`, string(fwd))

	turns := rec.all()
	require.Len(t, turns, 1)
	assert.Equal(t, memory.Turn{Namespace: "alice", Model: "llama3.2", User: "who is my sister?", Assistant: "Hello there.", Time: turns[0].Time, ID: turns[0].ID, Source: turns[0].Source}, turns[0])
	assert.Equal(t, "openai-chat", turns[0].Source.Dialect)
}

func TestOpenAIChatUnchangedIsForwardedAsItCame(t *testing.T) {
	up := newFakeOllama(t)
	mem := &fixedMemory{got: make(chan memory.Request, 1), mc: memory.Context{System: "be brief", SystemReplaces: 1}}
	base := startVera(t, up.srv.URL, func(s *Server) { s.Memory = mem })
	sent := `{"model":"llama3.2",  "messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi"}]}`
	res, err := http.Post(base+"/v1/chat/completions", "application/json", strings.NewReader(sent))
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	_, _, fwd := up.last()
	assert.Equal(t, sent, string(fwd), "byte for byte")
	assert.Equal(t, "semantic=0; recent=0; rules=0; tokens=0", res.Header.Get("X-Vera-Context"))
}
