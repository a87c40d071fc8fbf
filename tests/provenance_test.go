package tests

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ollama/ollama/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/ollama/ollamatest"
	"github.com/vera-proxy/vera/tests/veratest"
)

// sourceOfMemory returns the metadata.source of ns's memory holding word.
func sourceOfMemory(t *testing.T, p *veratest.InProcess, ns, word string) map[string]any {
	t.Helper()
	var m struct {
		Metadata map[string]any `json:"metadata"`
	}
	require.Equal(t, 200, veratest.AdminCall(t, p, "", "GET", "/memories/"+memoryIDWith(t, p, ns, word), "", &m))
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
		veratest.Settled(t, p)
		src := sourceOfMemory(t, p, "alice", word)
		assert.Equal(t, "chat", src["via"], d.name)
		assert.Equal(t, dialects[d.name], src["dialect"], d.name)
		assert.Equal(t, fmt.Sprintf("chat-%d", i), src["chat_id"], d.name)
		assert.True(t, strings.HasPrefix(fmt.Sprint(src["client"]), clients[d.name]), "%s: client %v", d.name, src["client"])
		assert.Equal(t, "llama3.2", src["model"], d.name)
		assert.NotEmpty(t, src["request_id"], d.name)
	}

	// The turn is stored too (a raw memory, via chat): the curated one
	// the command wrote is the command's.
	sendOllama(t, p, "alice", "cmd", []msg{{"user", "Remember that my locker is Lockerzz 12"}}, "")
	veratest.Settled(t, p)
	src := sourceOfMemory(t, p, "alice&type=curated", "Lockerzz")
	assert.Equal(t, "command", src["via"])
	assert.Equal(t, "ollama-chat", src["dialect"])
	assert.Equal(t, "cmd", src["chat_id"])

	require.Equal(t, 201, veratest.AdminCall(t, p, "", "POST", "/memories", `{"namespace":"alice","text":"Alice likes Adminzz."}`, nil))
	assert.Equal(t, "admin", sourceOfMemory(t, p, "alice", "Adminzz")["via"])

	s := veratest.MCPSession(t, p, http.Header{"X-Openwebui-User-Id": {"alice"}})
	res := veratest.Call(t, s, "add_memory", map[string]any{"content": "Alice's dog is Mcpzz."}, nil)
	require.False(t, res.IsError, veratest.ToolText(res))
	src = sourceOfMemory(t, p, "alice", "Mcpzz")
	assert.Equal(t, "mcp", src["via"])
	assert.Equal(t, "vera-test/1", src["client"])
}

// A curated memory names the chats of the turns it distils and their time
// span, and keeps them once the curator has deleted those turns.
func TestCuratedMemoryKeepsItsChats(t *testing.T) {
	up := ollamatest.New(t)
	up.Curate = func(req api.ChatRequest) string {
		var in struct {
			Raw []struct{ ID, Text string } `json:"raw_turns"`
		}
		_ = json.Unmarshal([]byte(req.Messages[1].Content), &in)
		var ids []string
		for _, r := range in.Raw {
			ids = append(ids, r.ID)
		}
		b, _ := json.Marshal(map[string]any{"new_curated_turns": []any{map[string]any{
			"content": "User: My sister Ana lives in Curatedzz.\nAssistant: Noted.", "source_ids": ids}},
			"permanent_rules": []any{}, "deletions": []string{}, "summary": "s"})
		return string(b)
	}
	p := veratest.Start(t, "VERA_OLLAMA_URL="+up.URL)
	ollamatest.ChatWith(t, p.Addr, veratest.HeadersFor("alice", "trip-1"), api.Message{Role: "user", Content: "My sister Ana lives in Oslo."})
	ollamatest.ChatWith(t, p.Addr, veratest.HeadersFor("alice", "trip-2"), api.Message{Role: "user", Content: "Ana moved last spring."})
	veratest.Settled(t, p)
	require.Equal(t, http.StatusOK, veratest.AdminCall(t, p, "", "POST", "/curator/run", "", nil))
	var raws struct{ Memories []veratest.AdminMemory }
	require.Equal(t, http.StatusOK, veratest.AdminCall(t, p, "", "GET", "/memories?namespace=alice&type=raw", "", &raws))
	assert.Empty(t, raws.Memories, "the turns it distils are gone")
	src := sourceOfMemory(t, p, "alice", "Curatedzz")
	assert.Equal(t, "curator", src["via"])
	assert.ElementsMatch(t, []any{"trip-1", "trip-2"}, src["chats"])
	assert.NotEmpty(t, src["from"])
	assert.NotEmpty(t, src["until"])
}

// N chats that recall a memory make its used_count N, within a few
// seconds, with the time of the last; an erased memory's count goes with
// it.
func TestUsageCountsTheAnswersAMemoryShaped(t *testing.T) {
	_, _, p := eraseVera(t)
	require.Equal(t, 201, veratest.AdminCall(t, p, "", "POST", "/memories", `{"namespace":"alice","text":"Alice's cat is called Usagezz."}`, nil))
	id := memoryIDWith(t, p, "alice", "Usagezz")
	var m veratest.AdminMemory
	require.Equal(t, 200, veratest.AdminCall(t, p, "", "GET", "/memories/"+id, "", &m))
	assert.Zero(t, m.UsedCount)
	assert.Nil(t, m.LastUsed, "never used")
	const n = 3
	for i := range n {
		sendOllama(t, p, "alice", fmt.Sprintf("cat-%d", i), []msg{{"user", "What is my cat called?"}}, "")
	}
	sendOllama(t, p, "bob", "bob", []msg{{"user", "What is my cat called?"}}, "")
	require.Eventually(t, func() bool {
		require.Equal(t, 200, veratest.AdminCall(t, p, "", "GET", "/memories/"+id, "", &m))
		return m.UsedCount == n
	}, 5*time.Second, 50*time.Millisecond, "used_count %d", m.UsedCount)
	require.NotNil(t, m.LastUsed)
	assert.WithinDuration(t, time.Now(), *m.LastUsed, time.Minute)
}
