package tests

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ollama/ollama/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/ollama/ollamatest"
	"github.com/vera-proxy/vera/tests/veratest"
)

// The private texts a policy must keep on this machine, and one it must
// not keep back.
var (
	privateTexts = []string{"ZX99PRIVzz", "RULEPRIVzz", "PROFPRIVzz"}
	shareable    = "Lisbon"
)

// seedPrivate gives alice a shareable memory, and a private memory, rule
// and profile; bob a shareable profile.
func seedPrivate(t *testing.T, p *veratest.InProcess) {
	t.Helper()
	for _, m := range []string{
		`{"namespace":"alice","text":"Alice's sister Ana lives in Lisbon."}`,
		`{"namespace":"alice","text":"Alice's passport number is ZX99PRIVzz, her sister Ana has a copy.","metadata":{"private":true}}`,
		`{"namespace":"alice","type":"rule","text":"Greet Alice as agent RULEPRIVzz.","metadata":{"private":true}}`,
		`{"namespace":"alice","type":"profile","text":"Alice, passport PROFPRIVzz, has a sister Ana.","metadata":{"private":true}}`,
		`{"namespace":"bob","type":"profile","text":"Bob loves Porto."}`,
	} {
		require.Equal(t, http.StatusCreated, veratest.AdminCall(t, p, "", "POST", "/memories", m, nil), m)
	}
}

// noPrivate fails when a body holds a private text.
func noPrivate(t *testing.T, what string, bodies ...[]byte) {
	t.Helper()
	for _, b := range bodies {
		for _, s := range privateTexts {
			assert.NotContains(t, string(b), s, what)
		}
	}
}

// rawChat posts an /api/chat for model as ns and returns the answer's
// X-Vera-Context.
func rawChat(t *testing.T, p *veratest.InProcess, ns, model, question string) http.Header {
	t.Helper()
	h, _ := veratest.ChatWhole(t, p, ns, model, question)
	return h
}

// Under a shareable policy (here by [memory.models] for a local model),
// no private memory, rule or profile reaches the model through any of the
// five dialects, while shareable memories and a profile that is not
// private do; "none" sends nothing remembered, a local model no pattern
// names gets everything.
func TestPrivateMemoriesStayLocalInEveryDialect(t *testing.T) {
	up := ollamatest.NewDialects(t)
	numberedReplies(up)
	p := conversationVeraWith(t, up, t.TempDir(), t.TempDir(), "[memory.models]\n\"llama3.2*\" = \"shareable\"\n\"guest*\" = \"none\"\n")
	seedPrivate(t, p)
	for i, d := range eraseDialects {
		d.send(t, p, "alice", fmt.Sprintf("c%d", i), []msg{{"user", "Where does my sister Ana live, and what is my passport number?"}}, "")
		last := up.LastRaw(d.path)
		assert.Contains(t, last, shareable, d.name)
		noPrivate(t, d.name, up.Bodies(d.path)...)
	}
	h := rawChat(t, p, "alice", "llama3.2", "What is my passport number, and where does Ana live?")
	assert.Contains(t, h.Get("X-Vera-Context"), "withheld=", "the header says what was kept back")
	for _, id := range strings.Split(h.Get("X-Vera-Memories"), ",") {
		var m veratest.AdminMemory
		require.Equal(t, 200, veratest.AdminCall(t, p, "", "GET", "/memories/"+id, "", &m))
		noPrivate(t, "X-Vera-Memories lists only what was sent", []byte(m.Text))
	}
	rawChat(t, p, "bob", "llama3.2", "Where do I like to go?")
	assert.Contains(t, up.LastRaw("/api/chat"), "Bob loves Porto", "a profile that is not private goes")

	rawChat(t, p, "alice", "guest:1b", "What is my passport number, and where does Ana live?")
	last := up.LastRaw("/api/chat")
	assert.NotContains(t, last, shareable, "none: nothing remembered")
	noPrivate(t, "none", []byte(last))

	rawChat(t, p, "alice", "qwen2.5:7b", "What is my passport number, and where does Ana live?")
	assert.Contains(t, up.LastRaw("/api/chat"), "ZX99PRIVzz", "a local model gets everything")

	var metrics strings.Builder
	res, err := http.Get("http://" + p.Addr + "/metrics")
	require.NoError(t, err)
	io.Copy(&metrics, res.Body)
	res.Body.Close()
	assert.Contains(t, metrics.String(), `vera_memories_withheld_total{model="llama3.2"}`)
}

// A cloud name, by default (cloud.memory = "shareable"), gets shareable
// memories only, through each route the cloud serves; the old
// inject_memory = true sends everything, and cloud.memory = "none"
// nothing remembered.
func TestPrivateMemoriesStayOffTheCloud(t *testing.T) {
	up := ollamatest.New(t)
	for _, tc := range []struct {
		extra          string
		share, private bool
	}{{"", true, false}, {"inject_memory = true", true, true}, {`memory = "none"`, false, false}, {"memory = \"shareable\"\ninject_memory = false", false, false}} {
		t.Run(tc.extra, func(t *testing.T) {
			provider := newFakeProvider(t)
			p := cloudVera(t, up.URL, provider, t.TempDir(), tc.extra)
			seedPrivate(t, p)
			ctx := context.Background()
			q := "Where does my sister Ana live, and what is my passport number?"
			require.NoError(t, veratest.OllamaClient(t, p, "alice").Chat(ctx, &api.ChatRequest{Model: "gpt-big", Messages: []api.Message{{Role: "user", Content: q}}}, func(api.ChatResponse) error { return nil }))
			require.NoError(t, veratest.OllamaClient(t, p, "alice").Generate(ctx, &api.GenerateRequest{Model: "gpt-big", Prompt: q + " Again?"}, func(api.GenerateResponse) error { return nil }))
			provider.mu.Lock()
			bodies := fmt.Sprint(provider.bodies)
			provider.mu.Unlock()
			assert.Equal(t, tc.share, strings.Contains(bodies, shareable), "shareable memories")
			assert.Equal(t, tc.private, strings.Contains(bodies, "ZX99PRIVzz"), "private memories")
		})
	}
}

// The fallback to the cloud while Ollama is down follows the cloud's
// policy: the chat that finds Ollama down was built for the local model,
// and goes without memory; the chats after it are built for the cloud's
// policy, shareable memories in.
func TestTheFallbackFollowsTheCloudsPolicy(t *testing.T) {
	provider := newFakeProvider(t)
	down := httptest.NewServer(http.NotFoundHandler())
	downURL := down.URL
	down.Close()
	p := cloudVera(t, downURL, provider, t.TempDir(), `fallback_model = "gpt-big"`)
	seedPrivate(t, p)
	for i := range 2 {
		h := rawChat(t, p, "alice", "llama3.2", fmt.Sprintf("Where does my sister Ana live, and what is my passport number? (%d)", i))
		assert.Equal(t, "gpt-big", h.Get("X-Vera-Fallback"))
		sent := fmt.Sprint(provider.last(t)["messages"])
		noPrivate(t, "the fallback", []byte(sent))
		if i == 1 {
			assert.Contains(t, sent, shareable, "built for the cloud's policy")
			assert.Contains(t, h.Get("X-Vera-Context"), "withheld=")
		}
	}
}

// What the detectors find makes a memory private whichever way it is
// written (a chat turn, whole; a "remember that"; by hand; over MCP), and
// a person or an agent marks it: an agent never unmarks.
func TestMemoriesAreMarkedPrivate(t *testing.T) {
	up := ollamatest.NewDialects(t)
	numberedReplies(up)
	p := conversationVeraWith(t, up, t.TempDir(), t.TempDir(), "[memory.models]\n\"llama3.2*\" = \"shareable\"\n")
	sendOllama(t, p, "alice", "c1", []msg{{"user", "Call me on +44 20 7946 0958 about the Lisbon trip."}}, "")
	sendOllama(t, p, "alice", "c2", []msg{{"user", "Remember that my wifi password is Tr0ub4dor&3"}}, "")
	veratest.Settled(t, p)
	whyOf := func(id string) []any {
		var m struct{ Metadata map[string]any }
		require.Equal(t, 200, veratest.AdminCall(t, p, "", "GET", "/memories/"+id, "", &m))
		if m.Metadata["private"] != true {
			return nil
		}
		why, _ := m.Metadata["private_why"].([]any)
		return why
	}
	assert.Equal(t, []any{"phone"}, whyOf(memoryOfType(t, p, "alice", "raw", "7946")), "a turn is private whole")
	assert.Contains(t, whyOf(memoryOfType(t, p, "alice", "curated", "Tr0ub4dor")), "password")
	var added struct{ ID string }
	require.Equal(t, 201, veratest.AdminCall(t, p, "", "POST", "/memories", `{"namespace":"alice","text":"Alice's card is 4111 1111 1111 1111."}`, &added))
	assert.Equal(t, []any{"card"}, whyOf(added.ID))
	require.Equal(t, 201, veratest.AdminCall(t, p, "", "POST", "/memories", `{"namespace":"alice","text":"Alice's order 4111 1111 1111 1112 shipped."}`, &added))
	assert.Nil(t, whyOf(added.ID), "not Luhn-valid: not a card")
	require.Equal(t, 200, veratest.AdminCall(t, p, "", "PATCH", "/memories/"+added.ID, `{"metadata":{"private":true}}`, nil))
	assert.Equal(t, []any{"user"}, whyOf(added.ID))
	require.Equal(t, 200, veratest.AdminCall(t, p, "", "PATCH", "/memories/"+added.ID, `{"metadata":{"private":false}}`, nil))
	assert.Nil(t, whyOf(added.ID))

	s := veratest.MCPSession(t, p, http.Header{"X-Openwebui-User-Id": {"alice"}})
	var mcpAdded struct{ ID string }
	require.False(t, veratest.Call(t, s, "add_memory", map[string]any{"content": "Alice's therapist is Dr Mcpzz.", "private": true}, &mcpAdded).IsError)
	assert.Equal(t, []any{"user"}, whyOf(mcpAdded.ID))
	res := veratest.Call(t, s, "update_memory", map[string]any{"id": mcpAdded.ID, "private": false}, nil)
	assert.True(t, res.IsError, "an agent never unmarks")
	assert.Contains(t, veratest.ToolText(res), "only the person")

	var list struct{ Memories []veratest.AdminMemory }
	require.Equal(t, 200, veratest.AdminCall(t, p, "", "GET", "/memories?namespace=alice&private=true", "", &list))
	var listed []string
	for _, m := range list.Memories {
		listed = append(listed, m.Text)
	}
	assert.NotContains(t, strings.Join(listed, "|"), "order", "?private=true lists the private ones only")
	assert.Contains(t, strings.Join(listed, "|"), "Mcpzz")

	sendOllama(t, p, "alice", "c3", []msg{{"user", "When is the Lisbon trip, and who is my therapist?"}}, "")
	for _, s := range []string{"7946", "Tr0ub4dor", "4111 1111 1111 1111", "Mcpzz"} {
		assert.NotContains(t, up.LastRaw("/api/chat"), s, "a shareable model gets none of it")
	}
}

// An answer a local model gave from a private memory may repeat it: its
// turn is private too, and never recalled for a shareable model; nor does
// an agent find a private memory over MCP.
func TestAnAnswerFromAPrivateMemoryIsPrivate(t *testing.T) {
	up := ollamatest.NewDialects(t)
	numberedReplies(up)
	p := conversationVeraWith(t, up, t.TempDir(), t.TempDir(), "[memory.models]\n\"llama3.2*\" = \"shareable\"\n")
	require.Equal(t, http.StatusCreated, veratest.AdminCall(t, p, "", "POST", "/memories", `{"namespace":"alice","text":"Alice's passport number is ZX99PRIVzz.","metadata":{"private":true}}`, nil))
	rawChat(t, p, "alice", "qwen2.5:7b", "What is my passport number?")
	require.Contains(t, up.LastRaw("/api/chat"), "ZX99PRIVzz", "a local model gets it")
	veratest.Settled(t, p)
	var m struct{ Metadata map[string]any }
	require.Equal(t, 200, veratest.AdminCall(t, p, "", "GET", "/memories/"+memoryOfType(t, p, "alice", "raw", "passport"), "", &m))
	assert.Equal(t, true, m.Metadata["private"], "the turn its answer made")
	assert.Equal(t, []any{"user"}, m.Metadata["private_why"])

	s := veratest.MCPSession(t, p, http.Header{"X-Openwebui-User-Id": {"alice"}})
	var found struct{ Memories []veratest.AdminMemory }
	require.False(t, veratest.Call(t, s, "search_memories", map[string]any{"query": "passport number"}, &found).IsError)
	assert.Empty(t, found.Memories, "an agent finds no private memory")
}
