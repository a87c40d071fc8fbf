package proxy

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/memory"
	"github.com/vera-proxy/vera/memory/conversation"
	"github.com/vera-proxy/vera/proxy/dialect"
)

// Each dialect tells what the conversations step needs: the first user
// message, whether the request continues a tool loop, and the Responses
// API's link to an earlier answer.
func TestThreadOfEachDialect(t *testing.T) {
	cases := []struct {
		name string
		d    dialect.Dialect
		body string
		want conversation.Thread
	}{
		{"chat", ollamaChat, `{"model":"m","messages":[{"role":"system","content":"s"},{"role":"user","content":"first"},{"role":"assistant","content":"a"},{"role":"user","content":"second"}]}`,
			conversation.Thread{FirstUser: "first"}},
		{"chat tool loop", ollamaChat, `{"model":"m","messages":[{"role":"user","content":"weather?"},{"role":"assistant","content":"","tool_calls":[{"function":{"name":"w","arguments":{}}}]},{"role":"tool","content":"12C"}]}`,
			conversation.Thread{FirstUser: "weather?", ToolLoop: true}},
		{"openai tool loop", openAIChat, `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"weather?"}]},{"role":"assistant","content":null,"tool_calls":[]},{"role":"tool","tool_call_id":"1","content":"12C"}]}`,
			conversation.Thread{FirstUser: "weather?", ToolLoop: true}},
		{"generate", ollamaGenerate, `{"model":"m","prompt":"hello"}`, conversation.Thread{FirstUser: "hello"}},
		{"responses", openAIResponses, `{"model":"m","previous_response_id":"resp_9","input":[{"role":"user","content":"hi"},{"type":"function_call_output","call_id":"c","output":"x"}]}`,
			conversation.Thread{FirstUser: "hi", PreviousResponseID: "resp_9", ToolLoop: true}},
		{"messages tool loop", anthropicMessages, `{"model":"m","max_tokens":9,"messages":[{"role":"user","content":"weather?"},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"w","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"12C"}]}]}`,
			conversation.Thread{FirstUser: "weather?", ToolLoop: true}},
		{"messages", anthropicMessages, `{"model":"m","max_tokens":9,"messages":[{"role":"user","content":[{"type":"text","text":"hello"}]}]}`,
			conversation.Thread{FirstUser: "hello"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, err := tc.d.Parse([]byte(tc.body))
			require.NoError(t, err)
			tc.want.ChatID = "chat-1"
			assert.Equal(t, tc.want, threadOf("chat-1", req))
		})
	}
}

// A field sent in another case is read as Ollama reads it, and does not
// stay beside the one vera writes.
func TestFieldsMatchInAnyCase(t *testing.T) {
	req, err := dialect.ParseGenerateRequest([]byte(`{"model":"m","prompt":"hi","System":"be terse"}`))
	require.NoError(t, err)
	assert.Equal(t, "be terse", req.System)
	out := *req
	out.System = "be terse\n\nmore"
	b, err := json.Marshal(out)
	require.NoError(t, err)
	assert.JSONEq(t, `{"model":"m","prompt":"hi","system":"be terse\n\nmore"}`, string(b))
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
