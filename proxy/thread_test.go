package proxy

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/dialect"
	"github.com/vera-proxy/vera/memory/conversation"
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

func TestThreadOfReadsTheChatID(t *testing.T) {
	r, _ := http.NewRequest("POST", "/api/chat", nil)
	r.Header.Set("X-Chat", " c-42 ")
	req, err := dialect.ParseChatRequest([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
	require.NoError(t, err)
	assert.Equal(t, conversation.Thread{ChatID: "c-42", FirstUser: "hi"}, threadOf(chatIDOf(r, "X-Chat"), req), "the header memory.chat_id_header names")
}
