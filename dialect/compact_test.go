package dialect

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/memory"
)

// A compaction leaves out the caller's messages before the KeepFrom-th
// user message (a tool call stays with its result, a tool result is no
// user turn), in every dialect with a history; the blocks keep their
// places, counted in the caller's own messages.
func TestCompactionKeepsTheLatestTurns(t *testing.T) {
	mc := &memory.Context{System: "sys\n\nSummary of the earlier conversation: they met.", SystemReplaces: 1, KeepFrom: 2,
		Blocks: []memory.Block{{User: 0, Text: "[gone] "}, {User: 2, Text: "[b2] "}}}
	type msg struct{ Role, Content string }
	read := func(t *testing.T, forwarded any, field string) []msg {
		t.Helper()
		b, err := Marshal(forwarded)
		require.NoError(t, err)
		var out map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(b, &out))
		var ms []map[string]any
		require.NoError(t, json.Unmarshal(out[field], &ms))
		var got []msg
		for _, m := range ms {
			c, _ := m["content"].(string)
			if c == "" {
				if parts, ok := m["content"].([]any); ok && len(parts) > 0 {
					c, _ = parts[0].(map[string]any)["text"].(string)
				}
			}
			if c == "" {
				c, _ = m["type"].(string)
			}
			r, _ := m["role"].(string)
			got = append(got, msg{r, c})
		}
		return got
	}
	t.Run("ollama chat", func(t *testing.T) {
		r, err := ParseChatRequest([]byte(`{"model":"m","messages":[{"role":"system","content":"sys"},
			{"role":"user","content":"u0"},{"role":"assistant","content":"a0"},
			{"role":"user","content":"u1"},{"role":"assistant","content":"","tool_calls":[{"function":{"name":"f","arguments":{}}}]},{"role":"tool","content":"t1"},{"role":"assistant","content":"a1"},
			{"role":"user","content":"u2"},{"role":"assistant","content":"a2"},{"role":"user","content":"u3"}]}`))
		require.NoError(t, err)
		got := read(t, r.WithMemory(mc), "messages")
		assert.Equal(t, []msg{{"system", mc.System}, {"user", "[b2] u2"}, {"assistant", "a2"}, {"user", "u3"}}, got)
	})
	t.Run("openai chat", func(t *testing.T) {
		r, err := ParseOpenAIRequest([]byte(`{"model":"m","messages":[{"role":"system","content":"sys"},{"role":"developer","content":"dev rules"},
			{"role":"user","content":"u0"},{"role":"assistant","content":"a0"},{"role":"user","content":"u1"},{"role":"assistant","content":"a1"},
			{"role":"user","content":[{"type":"text","text":"u2"}]},{"role":"assistant","content":"a2"}]}`))
		require.NoError(t, err)
		got := read(t, r.WithMemory(mc), "messages")
		assert.Equal(t, []msg{{"system", mc.System}, {"developer", "dev rules"}, {"user", "[b2] u2"}, {"assistant", "a2"}}, got,
			"the instructions before the first user message are never cut")
	})
	t.Run("anthropic messages", func(t *testing.T) {
		r, err := ParseMessagesRequest([]byte(`{"model":"m","system":"sys","max_tokens":9,"messages":[
			{"role":"user","content":"u0"},{"role":"assistant","content":[{"type":"tool_use","id":"c","name":"f","input":{}}]},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"c","content":"r"}]},{"role":"assistant","content":"a0"},
			{"role":"user","content":"u1"},{"role":"assistant","content":"a1"},{"role":"user","content":"u2"}]}`))
		require.NoError(t, err)
		got := read(t, r.WithMemory(mc), "messages")
		assert.Equal(t, []msg{{"user", "[b2] u2"}}, got, "the tool result is no user turn: u2 is the third")
	})
	t.Run("openai responses", func(t *testing.T) {
		r, err := ParseResponsesRequest([]byte(`{"model":"m","input":[{"role":"developer","content":"sandbox rules"},
			{"role":"user","content":"u0"},{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":"r"},
			{"role":"assistant","content":"a0"},{"role":"user","content":"u1"},{"role":"user","content":"u2"},{"role":"assistant","content":"a2"}]}`))
		require.NoError(t, err)
		got := read(t, r.WithMemory(mc), "input")
		assert.Equal(t, []msg{{"developer", "sandbox rules"}, {"user", "[b2] u2"}, {"assistant", "a2"}}, got)
	})
	t.Run("fewer user messages than KeepFrom: all go", func(t *testing.T) {
		r, err := ParseChatRequest([]byte(`{"model":"m","messages":[{"role":"user","content":"u0"}]}`))
		require.NoError(t, err)
		got := read(t, r.WithMemory(&memory.Context{System: "s", KeepFrom: 3}), "messages")
		assert.Equal(t, []msg{{"system", "s"}, {"user", "u0"}}, got)
	})
}
