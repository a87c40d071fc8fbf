package dialect_test

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/dialect"
	"github.com/vera-proxy/vera/memory"
)

// The dialects by the short names the tests use.
var (
	ollamaChat        dialect.Dialect = dialect.OllamaChat{}
	ollamaGenerate    dialect.Dialect = dialect.OllamaGenerate{}
	openAIChat        dialect.Dialect = dialect.OpenAIChat{}
	openAIResponses   dialect.Dialect = dialect.OpenAIResponses{}
	anthropicMessages dialect.Dialect = dialect.AnthropicMessages{}
)

// recentIntro heads the recent turns written as text (generate, Responses).
const recentIntro = "The latest exchanges with this user, oldest first:"

// memoryLayers are the layers a builder makes in these tests: a system layer
// that keeps the caller's "be brief" and a recent pair.
func memoryLayers(callerSystem bool) memory.Context {
	mc := memory.Context{
		System:    "Memories:\n[2026-11-20]\nUser: my sister is Ann\nAssistant: noted",
		Recent:    []memory.Message{{Role: "user", Content: "earlier"}, {Role: "assistant", Content: "yes"}},
		RecentIDs: []string{"r1"},
		Semantic:  []memory.Hit{{Memory: memory.Memory{ID: "s1"}}},
	}
	if callerSystem {
		mc.System = "be brief\n\n" + mc.System
		mc.SystemReplaces = 1
	}
	return mc
}

// recentAsText is how memoryLayers' recent pair reads as text.
const recentAsText = recentIntro + "\n\nUser: earlier\nAssistant: yes"

// withFields returns body (a JSON object) with its fields set as given (a
// nil value removes the field).
func withFields(t *testing.T, body string, fields map[string]any) string {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(body), &m))
	for k, v := range fields {
		if v == nil {
			delete(m, k)
			continue
		}
		m[k] = v
	}
	b, err := json.Marshal(m)
	require.NoError(t, err)
	return string(b)
}

// rawField returns one top-level field of a JSON object, as it is there.
func rawField(t *testing.T, body []byte, key string) json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(body, &m), "%s", body)
	return m[key]
}

func marshalled(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

func compact(t *testing.T, s string) string {
	t.Helper()
	var b bytes.Buffer
	require.NoError(t, json.Compact(&b, []byte(s)))
	return b.String()
}

// A rewritten request keeps the caller's characters: no \u003c escapes.
func TestRewrittenRequestKeepsCharacters(t *testing.T) {
	for _, d := range []dialect.Dialect{ollamaChat, ollamaGenerate, openAIChat, openAIResponses, anthropicMessages} {
		body := map[dialect.Dialect]string{
			ollamaChat:        `{"model":"m","messages":[{"role":"user","content":"is <b> & <i> html?"}]}`,
			ollamaGenerate:    `{"model":"m","prompt":"is <b> & <i> html?"}`,
			openAIChat:        `{"model":"m","messages":[{"role":"user","content":"is <b> & <i> html?"}]}`,
			openAIResponses:   `{"model":"m","input":[{"role":"user","content":"is <b> & <i> html?"}]}`,
			anthropicMessages: `{"model":"m","max_tokens":9,"messages":[{"role":"user","content":"is <b> & <i> html?"}]}`,
		}[d]
		req, err := d.Parse([]byte(body))
		require.NoError(t, err)
		mc := &memory.Context{System: "remember <this> & that", Recent: []memory.Message{{Role: "user", Content: "a<b"}, {Role: "assistant", Content: "b>a"}}}
		out, err := dialect.Marshal(req.WithMemory(mc))
		require.NoError(t, err)
		assert.NotContains(t, string(out), `\u003c`, d.String())
		assert.NotContains(t, string(out), `\u0026`, d.String())
		assert.Contains(t, string(out), "is <b> & <i> html?", d.String())
	}
}

// fuzzLayers is what a builder would inject into msgs: the caller's
// system kept first, a memory, and a recent pair.
func fuzzLayers(msgs []memory.Message) *memory.Context {
	mc := &memory.Context{
		System: "Memories:\nUser: my sister is Ann",
		Recent: []memory.Message{{Role: "user", Content: "earlier <q>"}, {Role: "assistant", Content: "yes & no"}},
	}
	if len(msgs) > 0 && msgs[0].Role == "system" {
		mc.SystemReplaces = 1
		if strings.TrimSpace(msgs[0].Content) != "" {
			mc.System = msgs[0].Content + "\n\n" + mc.System
		}
	}
	return mc
}

// checkParsed holds for every request a dialect parses: it re-encodes to
// JSON that parses again to the same conversation, every key of the body
// survives (bar the known ones a null or zero value may drop), a
// conversation has a user message last for memory to read, and the
// request rewritten with memory is still the same conversation.
func checkParsed(t *testing.T, d dialect.Dialect, body []byte, droppable func(key string, v json.RawMessage) bool) {
	req, err := d.Parse(body)
	if err != nil {
		for _, goism := range []string{"Go value", "Go struct", "proxy.", "json.RawMessage"} {
			assert.NotContains(t, err.Error(), goism)
		}
		return
	}
	out, err := json.Marshal(req)
	require.NoError(t, err)
	require.True(t, json.Valid(out), "%s", out)
	again, err := d.Parse(out)
	require.NoError(t, err, "the re-encoded request must parse: %s", out)
	out2, err := json.Marshal(again)
	require.NoError(t, err)
	assert.JSONEq(t, string(out), string(out2))
	assert.Equal(t, req.Conversation(), again.Conversation())
	assert.Equal(t, req.ModelName(), again.ModelName())

	var in, got map[string]json.RawMessage
	if json.Unmarshal(body, &in) == nil {
		require.NoError(t, json.Unmarshal(out, &got))
		for k, v := range in {
			if _, ok := got[k]; !ok && !droppable(k, v) {
				t.Errorf("key %q lost: %s", k, out)
			}
		}
	}

	if !req.Conversation() {
		return
	}
	msgs := req.MemoryMessages()
	assert.Equal(t, msgs, again.MemoryMessages())
	assert.Equal(t, req.LastUser(), again.LastUser())
	if len(msgs) == 0 {
		// Input items of roles memory does not read (Responses): decode
		// forwards the request untouched.
		return
	}
	for i, m := range msgs {
		if m.Role == "system" {
			assert.Zero(t, i, "only the leading message is the system layer")
		}
	}

	mc := fuzzLayers(msgs)
	rewritten := req.WithMemory(mc)
	require.NotNil(t, rewritten, "the recent pair changes the request")
	wb, err := json.Marshal(rewritten)
	require.NoError(t, err)
	require.True(t, json.Valid(wb))
	back, err := d.Parse(wb)
	require.NoError(t, err, "the rewritten request must parse: %s", wb)
	assert.True(t, back.Conversation())
	if slices.ContainsFunc(msgs, func(m memory.Message) bool { return m.Role == "user" && strings.TrimSpace(m.Content) != "" }) {
		// (Without a user text of its own, the recent pair's is last.)
		assert.Equal(t, req.LastUser(), back.LastUser())
	}
	assert.Equal(t, req.ModelName(), back.ModelName())
	assert.JSONEq(t, string(out), marshalOrFail(t, req), "withMemory leaves the parsed request as it was")
}

func marshalOrFail(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

// isNull reports whether v is JSON null.
func isNull(v json.RawMessage) bool { return string(bytes.TrimSpace(v)) == "null" }

func rawFieldOf(t *testing.T, body []byte, key string) json.RawMessage {
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(body, &m))
	return m[key]
}
