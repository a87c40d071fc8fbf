package dialect_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/dialect"
	"github.com/vera-proxy/vera/memory"
)

// messagesList is an Anthropic conversation: text and image blocks, an
// assistant turn with thinking, text and tool_use, and a user turn of only
// a tool_result.
const messagesList = `[` +
	`{"role":"user","content":[{"type":"text","text":"what is"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"aGVsbG8="}},{"type":"text","text":"this?","cache_control":{"type":"ephemeral"}}]},` +
	`{"role":"assistant","content":[{"type":"thinking","thinking":"hmm","signature":"sig"},{"type":"text","text":"Let me look."},{"type":"tool_use","id":"toolu_1","name":"f","input":{"a":1}}]},` +
	`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"42"}]}]}]`

const messagesSystemBlocks = `[{"type":"text","text":"be brief","cache_control":{"type":"ephemeral"}}]`

const messagesFull = `{"model":"llama3.2","max_tokens":1024,"system":` + messagesSystemBlocks + `,"messages":` + messagesList + `,` +
	`"tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":{"type":"auto"},` +
	`"thinking":{"type":"enabled","budget_tokens":512},"metadata":{"user_id":"u"},"stop_sequences":["END"],` +
	`"temperature":0.2,"top_k":5,"stream":true,"future":{"x":[1,2,3]}}`

func TestMessagesRequestKeepsEverything(t *testing.T) {
	req, err := dialect.ParseMessagesRequest([]byte(messagesFull))
	require.NoError(t, err)
	assert.Equal(t, "llama3.2", req.ModelName())
	assert.True(t, req.Conversation())
	assert.Equal(t, []memory.Message{
		{Role: "system", Content: "be brief"},
		{Role: "user", Content: "what is\nthis?"},
		{Role: "assistant", Content: "Let me look."},
		{Role: "tool", Content: ""},
	}, req.MemoryMessages(), "only text blocks are read: no image, thinking, tool_use or tool_result")
	assert.Equal(t, "what is\nthis?", req.LastUser(), "a user message of only tool results continues the turn of the question before it")
	_, answer := req.Options()
	assert.Equal(t, 1024, answer)
	assert.JSONEq(t, messagesFull, marshalled(t, req))

	mc := memoryLayers(true)
	out := req.WithMemory(&mc)
	require.NotNil(t, out)
	got := []byte(marshalled(t, out))
	var sys []map[string]any
	require.NoError(t, json.Unmarshal(rawField(t, got, "system"), &sys))
	require.Len(t, sys, 2, "the caller's block kept, vera's text one more block")
	assert.Equal(t, map[string]any{"type": "text", "text": "be brief", "cache_control": map[string]any{"type": "ephemeral"}}, sys[0])
	assert.Equal(t, map[string]any{"type": "text", "text": strings.TrimPrefix(mc.System, "be brief\n\n")}, sys[1])
	var msgs []json.RawMessage
	require.NoError(t, json.Unmarshal(rawField(t, got, "messages"), &msgs))
	require.Len(t, msgs, 5)
	assert.JSONEq(t, `{"role":"user","content":"earlier"}`, string(msgs[0]))
	assert.JSONEq(t, `{"role":"assistant","content":"yes"}`, string(msgs[1]))
	var caller []json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(messagesList), &caller))
	for i := range caller {
		assert.Equal(t, compact(t, string(caller[i])), string(msgs[2+i]), "the caller's message %d goes out as it came", i)
	}
	assert.JSONEq(t, withFields(t, messagesFull, map[string]any{"system": nil, "messages": nil}),
		withFields(t, string(got), map[string]any{"system": nil, "messages": nil}), "every other field unchanged")
}

// Fields Anthropic may add to a message (or that a client sends) are the
// caller's: they survive a request vera rewrites.
func TestMessagesRequestKeepsUnknownMessageFields(t *testing.T) {
	body := `{"model":"llama3.2","messages":[{"role":"user","content":"hi","future_message_field":{"a":1}}]}`
	req, err := dialect.ParseMessagesRequest([]byte(body))
	require.NoError(t, err)
	assert.JSONEq(t, body, marshalled(t, req), "a round trip keeps a message's unknown fields")
	mc := memoryLayers(false)
	out := req.WithMemory(&mc)
	require.NotNil(t, out)
	var got struct {
		Messages []json.RawMessage `json:"messages"`
	}
	require.NoError(t, json.Unmarshal([]byte(marshalled(t, out)), &got))
	require.Len(t, got.Messages, 3)
	assert.JSONEq(t, `{"role":"user","content":"hi","future_message_field":{"a":1}}`, string(got.Messages[2]),
		"the caller's message goes out with its unknown field")
}

func TestMessagesRequestReads(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		msgs       []memory.Message
		last       string
	}{
		{"system string, content strings", `{"model":"m","system":"terse","messages":[{"role":"user","content":"q"},{"role":"assistant","content":"a"},{"role":"user","content":"q2"}]}`,
			[]memory.Message{{Role: "system", Content: "terse"}, {Role: "user", Content: "q"}, {Role: "assistant", Content: "a"}, {Role: "user", Content: "q2"}}, "q2"},
		{"system text blocks", `{"model":"m","system":[{"type":"text","text":"one"},{"type":"text","text":"two","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":"q"}]}`,
			[]memory.Message{{Role: "system", Content: "one\ntwo"}, {Role: "user", Content: "q"}}, "q"},
		{"no system", `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"q"}]}]}`,
			[]memory.Message{{Role: "user", Content: "q"}}, "q"},
		{"blank system", `{"model":"m","system":"  ","messages":[{"role":"user","content":"q"}]}`,
			[]memory.Message{{Role: "user", Content: "q"}}, "q"},
		{"image and text", `{"model":"m","messages":[{"role":"user","content":[{"type":"image","source":{"type":"url","url":"https://x/y.png"}},{"type":"text","text":"what is it?"}]}]}`,
			[]memory.Message{{Role: "user", Content: "what is it?"}}, "what is it?"},
		{"tool_use and tool_result", `{"model":"m","messages":[{"role":"user","content":"weather?"},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"w","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"sunny"}]}]}`,
			[]memory.Message{{Role: "user", Content: "weather?"}, {Role: "assistant", Content: ""}, {Role: "tool", Content: ""}}, "weather?"},
		// Text beside tool results is an agent's (reminders), not a new
		// question: the message continues a tool loop.
		{"tool_result with text", `{"model":"m","messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"sunny"},{"type":"text","text":"and tomorrow?"}]}]}`,
			[]memory.Message{{Role: "tool", Content: "and tomorrow?"}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := dialect.ParseMessagesRequest([]byte(tc.body))
			require.NoError(t, err)
			assert.True(t, req.Conversation())
			assert.Equal(t, tc.msgs, req.MemoryMessages())
			assert.Equal(t, tc.last, req.LastUser())
			assert.JSONEq(t, tc.body, marshalled(t, req))
		})
	}
}

var messagesNotConversations = []struct{ name, body string }{
	{"no messages", `{"model":"llama3.2","max_tokens":1}`},
	{"null messages", `{"model":"llama3.2","messages":null}`},
	{"empty list", `{"model":"llama3.2","system":"x","messages":[]}`},
}

func TestMessagesConversation(t *testing.T) {
	for _, tc := range messagesNotConversations {
		req, err := dialect.ParseMessagesRequest([]byte(tc.body))
		require.NoError(t, err, tc.name)
		assert.False(t, req.Conversation(), tc.name)
	}
}

func TestMessagesWithMemory(t *testing.T) {
	const msgs = `[{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral"}}]}]`
	recent := `{"role":"user","content":"earlier"},{"role":"assistant","content":"yes"}`
	for _, tc := range []struct {
		name, system string // system: "" for none
		mc           memory.Context
		wantSystem   string // JSON; "" for none
		wantMessages string // JSON; "" when withMemory returns nil
	}{
		{"system string", `"be brief"`, memoryLayers(true), marshalled(t, memoryLayers(true).System), `[` + recent + `,` + msgs[1:]},
		{"system blocks", `[{"type":"text","text":"be brief","cache_control":{"type":"ephemeral"}}]`, memoryLayers(true),
			`[{"type":"text","text":"be brief","cache_control":{"type":"ephemeral"}},{"type":"text","text":` + marshalled(t, memoryLayers(false).System) + `}]`,
			`[` + recent + `,` + msgs[1:]},
		{"system blocks, recent only", `[{"type":"text","text":"be brief","cache_control":{"type":"ephemeral"}}]`,
			memory.Context{System: "be brief", SystemReplaces: 1, Recent: memoryLayers(false).Recent},
			`[{"type":"text","text":"be brief","cache_control":{"type":"ephemeral"}}]`, `[` + recent + `,` + msgs[1:]},
		{"no system", "", memoryLayers(false), marshalled(t, memoryLayers(false).System), `[` + recent + `,` + msgs[1:]},
		{"no system, system layer only", "", memory.Context{System: "the operator's prompt"}, `"the operator's prompt"`, msgs},
		{"unchanged: nothing", "", memory.Context{}, "", ""},
		{"unchanged: system kept", `"be brief"`, memory.Context{System: "be brief", SystemReplaces: 1}, "", ""},
		{"unchanged: blocks kept", `[{"type":"text","text":"be"},{"type":"text","text":"brief"}]`, memory.Context{System: "be\nbrief", SystemReplaces: 1}, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := `{"model":"llama3.2","max_tokens":100,"messages":` + msgs
			if tc.system != "" {
				body += `,"system":` + tc.system
			}
			body += `}`
			req, err := dialect.ParseMessagesRequest([]byte(body))
			require.NoError(t, err)
			out := req.WithMemory(&tc.mc)
			if tc.wantMessages == "" {
				assert.Nil(t, out)
				return
			}
			require.NotNil(t, out)
			got := []byte(marshalled(t, out))
			assert.JSONEq(t, tc.wantSystem, string(rawField(t, got, "system")))
			assert.JSONEq(t, tc.wantMessages, string(rawField(t, got, "messages")))
			var all []json.RawMessage
			require.NoError(t, json.Unmarshal(rawField(t, got, "messages"), &all))
			assert.Equal(t, msgs[1:len(msgs)-1], string(all[len(all)-1]), "the caller's message byte for byte")
			assert.Equal(t, "100", string(rawField(t, got, "max_tokens")))
		})
	}
}

var messagesSeeds = []string{
	`{"model":"llama3.2","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`,
	messagesFull,
	`{"model":"m","system":"terse","messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image","source":{}}]}]}`,
	`{"model":"m","system":[{"type":"text","text":"a"},{"type":"text","text":"b","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":"q"}]}`,
	`{"model":"m","messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"x"}]}]}`,
	`{"model":"m","messages":[{"role":"user","content":"hi","extra":1}]}`,
	`{"model":"m","system":null,"messages":null,"stream":null}`,
	`{"model":"m","messages":[]}`,
	`{"model":"m","system":5,"messages":[]}`,
	`{}`,
	``,
}

func FuzzParseMessagesRequest(f *testing.F) {
	for _, s := range messagesSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		checkParsed(t, anthropicMessages, body, func(k string, v json.RawMessage) bool {
			return (k == "stream" || k == "system" || k == "messages") && isNull(v)
		})
		req, err := dialect.ParseMessagesRequest(body)
		if err != nil || !req.Conversation() {
			return
		}
		// The caller's messages follow the recent pair, each as it came.
		wb, err := json.Marshal(req.WithMemory(fuzzLayers(req.MemoryMessages())))
		require.NoError(t, err)
		var sent struct {
			Messages []json.RawMessage `json:"messages"`
		}
		require.NoError(t, json.Unmarshal(wb, &sent))
		var came struct {
			Messages []json.RawMessage `json:"messages"`
		}
		require.NoError(t, json.Unmarshal(body, &came))
		require.Len(t, sent.Messages, len(came.Messages)+2)
		for i, m := range came.Messages {
			assert.JSONEq(t, string(m), string(sent.Messages[2+i]), "the caller's message %d", i)
		}
	})
}
