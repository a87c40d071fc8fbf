package main

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sourceOfMemory returns the metadata.source of ns's memory holding word.
func sourceOfMemory(t *testing.T, p *inProcess, ns, word string) map[string]any {
	t.Helper()
	var m struct {
		Metadata map[string]any `json:"metadata"`
	}
	require.Equal(t, 200, adminCall(t, p, "", "GET", "/memories/"+memoryIDWith(t, p, ns, word), "", &m))
	src, _ := m.Metadata["source"].(map[string]any)
	require.NotNil(t, src, "%s has a source: %v", word, m.Metadata)
	return src
}

// Every memory says where it came from: a chat through each official
// client (its dialect, chat id, client, model and request id), a
// "remember that", the admin API, MCP.
func TestEveryMemorySaysWhereItCameFrom(t *testing.T) {
	_, _, p := eraseVera(t)
	clients := map[string]string{"ollama chat": "ollama/", "openai chat": "OpenAI/Go", "responses": "OpenAI/Go", "anthropic messages": "Anthropic/Go"}
	dialects := map[string]string{"ollama chat": "ollama-chat", "openai chat": "openai-chat", "responses": "openai-responses", "anthropic messages": "anthropic-messages"}
	for i, d := range conversationDialects {
		word := fmt.Sprintf("Word%dzz", i)
		d.send(t, p, "alice", fmt.Sprintf("chat-%d", i), []msg{{"user", "My favourite word is " + word + "."}}, "")
		settled(t, p)
		src := sourceOfMemory(t, p, "alice", word)
		assert.Equal(t, "chat", src["via"], d.name)
		assert.Equal(t, dialects[d.name], src["dialect"], d.name)
		assert.Equal(t, fmt.Sprintf("chat-%d", i), src["chat_id"], d.name)
		assert.True(t, strings.HasPrefix(fmt.Sprint(src["client"]), clients[d.name]), "%s: client %v", d.name, src["client"])
		assert.Equal(t, "llama3.2", src["model"], d.name)
		assert.NotEmpty(t, src["request_id"], d.name)
	}

	sendOllama(t, p, "alice", "cmd", []msg{{"user", "Remember that my locker is Lockerzz 12"}}, "")
	settled(t, p)
	src := sourceOfMemory(t, p, "alice", "Lockerzz")
	assert.Equal(t, "command", src["via"])
	assert.Equal(t, "ollama-chat", src["dialect"])
	assert.Equal(t, "cmd", src["chat_id"])

	require.Equal(t, 201, adminCall(t, p, "", "POST", "/memories", `{"namespace":"alice","text":"Alice likes Adminzz."}`, nil))
	assert.Equal(t, "admin", sourceOfMemory(t, p, "alice", "Adminzz")["via"])

	s := mcpSession(t, p, http.Header{"X-Openwebui-User-Id": {"alice"}})
	res := call(t, s, "add_memory", map[string]any{"content": "Alice's dog is Mcpzz."}, nil)
	require.False(t, res.IsError, toolText(res))
	src = sourceOfMemory(t, p, "alice", "Mcpzz")
	assert.Equal(t, "mcp", src["via"])
	assert.Equal(t, "vera-test/1", src["client"])
}
