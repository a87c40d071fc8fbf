package proxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/memory"
	"github.com/vera-proxy/vera/proxy/dialect"
)

// Tests of the three dialects added to the chat pipeline: Ollama's
// /api/generate, OpenAI's /v1/responses and Anthropic's /v1/messages.

// ---- realistic requests ----

// generateFull carries every field Ollama's /api/generate knows of, and one
// it does not.
const generateFull = `{"model":"llama3.2","prompt":"why is the sky blue?","system":"be brief",` +
	`"images":["aGVsbG8="],"format":"json","options":{"temperature":0.2,"num_ctx":8192,"num_predict":64},` +
	`"keep_alive":"5m","think":true,"stream":false,"template":"{{ .Prompt }}","future":{"x":[1,2,3]}}`

// responsesInput is an input list with every kind of item: a developer
// message, a user message of input_text and input_image parts (with a field
// of its own), a function call and its output, an assistant message, and a
// plain user message.
const responsesInput = `[` +
	`{"type":"message","role":"developer","content":"use metric units","id":"m0"},` +
	`{"role":"user","content":[{"type":"input_text","text":"what is"},{"type":"input_image","image_url":"data:image/png;base64,aGVsbG8=","detail":"auto"},{"type":"input_text","text":"this?"}],"future_item_field":true},` +
	`{"type":"function_call","call_id":"c1","name":"f","arguments":"{}","id":"fc_1","status":"completed"},` +
	`{"type":"function_call_output","call_id":"c1","output":"42"},` +
	`{"type":"message","role":"assistant","id":"msg_0","status":"completed","content":[{"type":"output_text","text":"It is 42.","annotations":[]}]},` +
	`{"role":"user","content":"and now?"}]`

const responsesFull = `{"model":"llama3.2","instructions":"be brief","input":` + responsesInput + `,` +
	`"tools":[{"type":"function","name":"f","parameters":{"type":"object"}}],"tool_choice":"auto",` +
	`"reasoning":{"effort":"low"},"text":{"format":{"type":"text"}},"max_output_tokens":64,"temperature":0.2,` +
	`"store":false,"previous_response_id":"resp_0","metadata":{"k":"v"},"stream":true,"future":{"x":[1,2,3]}}`

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

// memoryLayers is what fixedMemory injects in these tests: a system layer
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

// ---- 1. parsers ----

func TestGenerateRequestKeepsEverything(t *testing.T) {
	req, err := dialect.ParseGenerateRequest([]byte(generateFull))
	require.NoError(t, err)
	assert.Equal(t, "llama3.2", req.ModelName())
	assert.True(t, req.Conversation())
	assert.Equal(t, "why is the sky blue?", req.LastUser())
	assert.Equal(t, []memory.Message{{Role: "system", Content: "be brief"}, {Role: "user", Content: "why is the sky blue?"}}, req.MemoryMessages())
	numCtx, answer := req.Options()
	assert.Equal(t, 8192, numCtx)
	assert.Equal(t, 64, answer)
	assert.JSONEq(t, generateFull, marshalled(t, req), "a round trip keeps every field")

	// With memory, only system changes.
	mc := memoryLayers(true)
	out := req.WithMemory(&mc)
	require.NotNil(t, out)
	assert.JSONEq(t, withFields(t, generateFull, map[string]any{"system": mc.System + "\n\n" + recentAsText}), marshalled(t, out))
	assert.JSONEq(t, generateFull, marshalled(t, req), "the parsed request is left as it was")
}

func TestGenerateRequestReads(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		msgs       []memory.Message
	}{
		{"prompt only", `{"model":"m","prompt":"hi"}`, []memory.Message{{Role: "user", Content: "hi"}}},
		{"with system", `{"model":"m","prompt":"hi","system":"terse"}`, []memory.Message{{Role: "system", Content: "terse"}, {Role: "user", Content: "hi"}}},
		{"empty system", `{"model":"m","prompt":"hi","system":""}`, []memory.Message{{Role: "user", Content: "hi"}}},
		{"null system", `{"model":"m","prompt":"hi","system":null}`, []memory.Message{{Role: "user", Content: "hi"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := dialect.ParseGenerateRequest([]byte(tc.body))
			require.NoError(t, err)
			assert.Equal(t, tc.msgs, req.MemoryMessages())
			assert.Equal(t, "hi", req.LastUser())
			assert.True(t, req.Conversation())
			if tc.name != "null system" { // null goes out as "", which Ollama reads the same
				assert.JSONEq(t, tc.body, marshalled(t, req), "nothing lost")
			}
		})
	}
}

// generateNotConversations are /api/generate calls vera must leave alone.
var generateNotConversations = []struct{ name, body string }{
	{"load", `{"model":"llama3.2"}`},
	{"unload", `{"model":"llama3.2","keep_alive":0}`},
	{"empty prompt", `{"model":"llama3.2","prompt":"","keep_alive":"5m"}`},
	{"whitespace prompt", `{"model":"llama3.2","prompt":" \n\t "}`},
	{"raw", `{"model":"llama3.2","prompt":"<|user|>hi<|assistant|>","raw":true}`},
	{"suffix", `{"model":"codellama","prompt":"def add(a, b):","suffix":"\n    return c"}`},
	{"context", `{"model":"llama3.2","prompt":"and then?","context":[1,2,3]}`},
	{"context with spaces", `{"model":"llama3.2","prompt":"and then?","context": [ 7 ] }`},
}

func TestGenerateConversation(t *testing.T) {
	for _, tc := range generateNotConversations {
		req, err := dialect.ParseGenerateRequest([]byte(tc.body))
		require.NoError(t, err, tc.name)
		assert.False(t, req.Conversation(), tc.name)
	}
	for _, body := range []string{
		`{"model":"llama3.2","prompt":"hi"}`,
		`{"model":"llama3.2","prompt":"hi","raw":false,"suffix":""}`,
		`{"model":"llama3.2","prompt":"hi","context":null}`,
		`{"model":"llama3.2","prompt":"hi","context":[]}`,
		`{"model":"llama3.2","prompt":"hi","context": [] }`,
	} {
		req, err := dialect.ParseGenerateRequest([]byte(body))
		require.NoError(t, err, body)
		assert.True(t, req.Conversation(), body)
	}
}

// An empty context is empty however it is spelt: JSON allows blanks
// inside the brackets, and clients that pretty-print send them.
func TestGenerateEmptyContextWithBlanks(t *testing.T) {
	for _, body := range []string{
		`{"model":"llama3.2","prompt":"hi","context":[ ]}`,
		"{\"model\":\"llama3.2\",\"prompt\":\"hi\",\"context\":[\n]}",
	} {
		req, err := dialect.ParseGenerateRequest([]byte(body))
		require.NoError(t, err, body)
		assert.True(t, req.Conversation(), "%s: an empty context, like []", body)
	}
}

func TestResponsesRequestKeepsEverything(t *testing.T) {
	req, err := dialect.ParseResponsesRequest([]byte(responsesFull))
	require.NoError(t, err)
	assert.Equal(t, "llama3.2", req.ModelName())
	assert.True(t, req.Conversation())
	assert.Equal(t, []memory.Message{
		{Role: "system", Content: "be brief"},
		{Role: "developer", Content: "use metric units"},
		{Role: "user", Content: "what is\nthis?"},
		{Role: "assistant", Content: "It is 42."},
		{Role: "user", Content: "and now?"},
	}, req.MemoryMessages(), "instructions lead; input's own developer message is not taken for it; calls and outputs are left out")
	assert.Equal(t, "and now?", req.LastUser())
	_, answer := req.Options()
	assert.Equal(t, 64, answer)
	assert.JSONEq(t, responsesFull, marshalled(t, req), "a round trip keeps every field, and every item's fields")

	mc := memoryLayers(true)
	out := req.WithMemory(&mc)
	require.NotNil(t, out)
	got := marshalled(t, out)
	assert.JSONEq(t, withFields(t, responsesFull, map[string]any{"instructions": mc.System + "\n\n" + recentAsText}), got)
	assert.Equal(t, compact(t, responsesInput), string(rawField(t, []byte(got), "input")), "input goes out byte for byte")
}

func TestResponsesRequestReads(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		msgs       []memory.Message
		last       string
	}{
		{"input string", `{"model":"m","input":"hi"}`, []memory.Message{{Role: "user", Content: "hi"}}, "hi"},
		{"input string with instructions", `{"model":"m","instructions":"terse","input":"hi"}`,
			[]memory.Message{{Role: "system", Content: "terse"}, {Role: "user", Content: "hi"}}, "hi"},
		{"messages with string content", `{"model":"m","input":[{"role":"user","content":"one"},{"role":"assistant","content":"two"},{"role":"user","content":"three"}]}`,
			[]memory.Message{{Role: "user", Content: "one"}, {Role: "assistant", Content: "two"}, {Role: "user", Content: "three"}}, "three"},
		{"input_text parts", `{"model":"m","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"a"},{"type":"input_file","file_id":"f"},{"type":"input_text","text":"b"}]}]}`,
			[]memory.Message{{Role: "user", Content: "a\nb"}}, "a\nb"},
		{"output_text parts of an earlier answer", `{"model":"m","input":[{"role":"user","content":"q"},{"type":"message","role":"assistant","content":[{"type":"output_text","text":"a","annotations":[]}]},{"role":"user","content":"q2"}]}`,
			[]memory.Message{{Role: "user", Content: "q"}, {Role: "assistant", Content: "a"}, {Role: "user", Content: "q2"}}, "q2"},
		{"function call and output ignored", `{"model":"m","input":[{"role":"user","content":"weather?"},{"type":"function_call","call_id":"c","name":"w","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":"sunny"}]}`,
			[]memory.Message{{Role: "user", Content: "weather?"}}, "weather?"},
		{"reasoning item ignored", `{"model":"m","input":[{"type":"reasoning","id":"rs","summary":[{"type":"summary_text","text":"hmm"}]},{"role":"user","content":"q"}]}`,
			[]memory.Message{{Role: "user", Content: "q"}}, "q"},
		{"system and developer items are not the leading system", `{"model":"m","input":[{"role":"system","content":"s"},{"role":"developer","content":[{"type":"input_text","text":"d"}]},{"role":"user","content":"u"}]}`,
			[]memory.Message{{Role: "developer", Content: "s"}, {Role: "developer", Content: "d"}, {Role: "user", Content: "u"}}, "u"},
		{"last user with only an image", `{"model":"m","input":[{"role":"user","content":"q"},{"role":"assistant","content":"a"},{"role":"user","content":[{"type":"input_image","image_url":"data:x"}]}]}`,
			[]memory.Message{{Role: "user", Content: "q"}, {Role: "assistant", Content: "a"}, {Role: "user", Content: ""}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := dialect.ParseResponsesRequest([]byte(tc.body))
			require.NoError(t, err)
			assert.True(t, req.Conversation())
			assert.Equal(t, tc.msgs, req.MemoryMessages())
			assert.Equal(t, tc.last, req.LastUser())
			assert.JSONEq(t, tc.body, marshalled(t, req))
			for _, m := range req.MemoryMessages()[1:] {
				assert.NotEqual(t, "system", m.Role, "only instructions is the system layer")
			}
		})
	}
}

var responsesNotConversations = []struct{ name, body string }{
	{"no input", `{"model":"llama3.2"}`},
	{"null input", `{"model":"llama3.2","input":null}`},
	{"empty list", `{"model":"llama3.2","input":[],"instructions":"x"}`},
	{"empty list with spaces", `{"model":"llama3.2", "input": [ ] }`},
	{"tool outputs only", `{"model":"llama3.2","input":[{"type":"function_call_output","call_id":"c1","output":"42"}]}`},
	{"item reference only", `{"model":"llama3.2","instructions":"x","input":[{"type":"item_reference","id":"msg_0"}]}`},
}

func TestResponsesConversation(t *testing.T) {
	for _, tc := range responsesNotConversations {
		req, err := dialect.ParseResponsesRequest([]byte(tc.body))
		require.NoError(t, err, tc.name)
		assert.False(t, req.Conversation(), tc.name)
	}
	// Tool outputs chained to the answer that called for them continue a
	// conversation vera follows.
	req, err := dialect.ParseResponsesRequest([]byte(`{"model":"llama3.2","previous_response_id":"resp_0","input":[{"type":"function_call_output","call_id":"c1","output":"42"}]}`))
	require.NoError(t, err)
	assert.True(t, req.Conversation())
}

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

// ---- 2. withMemory shapes ----

func TestGenerateWithMemory(t *testing.T) {
	const plain = `{"model":"llama3.2","prompt":"hi","options":{"seed":1}}`
	const withSystem = `{"model":"llama3.2","prompt":"hi","system":"be brief","options":{"seed":1}}`
	for _, tc := range []struct {
		name, body string
		mc         memory.Context
		system     any // what system becomes; nil: withMemory returns nil
	}{
		{"caller system, layers and recent", withSystem, memoryLayers(true), memoryLayers(true).System + "\n\n" + recentAsText},
		{"no caller system", plain, memoryLayers(false), memoryLayers(false).System + "\n\n" + recentAsText},
		{"recent only", plain, memory.Context{Recent: memoryLayers(false).Recent}, recentAsText},
		{"system layer only", plain, memory.Context{System: "the operator's prompt"}, "the operator's prompt"},
		{"unchanged: nothing", plain, memory.Context{}, nil},
		{"unchanged: the caller's system kept", withSystem, memory.Context{System: "be brief", SystemReplaces: 1}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := dialect.ParseGenerateRequest([]byte(tc.body))
			require.NoError(t, err)
			out := req.WithMemory(&tc.mc)
			if tc.system == nil {
				assert.Nil(t, out)
				return
			}
			require.NotNil(t, out)
			assert.JSONEq(t, withFields(t, tc.body, map[string]any{"system": tc.system}), marshalled(t, out))
		})
	}
}

func TestResponsesWithMemory(t *testing.T) {
	const input = `[{"role":"user","content":[{"type":"input_text","text":"hi"}],"id":"x"}]`
	const plain = `{"model":"llama3.2","input":` + input + `,"store":false}`
	const withInstructions = `{"model":"llama3.2","instructions":"be brief","input":` + input + `,"store":false}`
	for _, tc := range []struct {
		name, body   string
		mc           memory.Context
		instructions any
	}{
		{"instructions, layers and recent", withInstructions, memoryLayers(true), memoryLayers(true).System + "\n\n" + recentAsText},
		{"no instructions", plain, memoryLayers(false), memoryLayers(false).System + "\n\n" + recentAsText},
		{"recent only", plain, memory.Context{Recent: memoryLayers(false).Recent}, recentAsText},
		{"unchanged: nothing", plain, memory.Context{}, nil},
		{"unchanged: instructions kept", withInstructions, memory.Context{System: "be brief", SystemReplaces: 1}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := dialect.ParseResponsesRequest([]byte(tc.body))
			require.NoError(t, err)
			out := req.WithMemory(&tc.mc)
			if tc.instructions == nil {
				assert.Nil(t, out)
				return
			}
			require.NotNil(t, out)
			got := marshalled(t, out)
			assert.JSONEq(t, withFields(t, tc.body, map[string]any{"instructions": tc.instructions}), got)
			assert.Equal(t, input, string(rawField(t, []byte(got), "input")), "input byte for byte")
		})
	}

	// A string input stays a string.
	req, err := dialect.ParseResponsesRequest([]byte(`{"model":"m","input":"hi"}`))
	require.NoError(t, err)
	mc := memoryLayers(false)
	assert.JSONEq(t, `{"model":"m","input":"hi","instructions":`+marshalled(t, mc.System+"\n\n"+recentAsText)+`}`, marshalled(t, req.WithMemory(&mc)))
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

// ---- a fake Ollama that also speaks /v1/responses and /v1/messages ----

// dialectUpstream answers the two SSE dialects as Ollama's middleware does
// (https://platform.openai.com/docs/api-reference/responses-streaming,
// https://docs.anthropic.com/en/api/messages-streaming) and hands every
// other route to fakeOllama. It keeps the body of the last chat request.
type dialectUpstream struct {
	ollama *fakeOllama
	srv    *httptest.Server
	// extras adds reasoning and a tool call to every answer.
	extras bool
	// cut aborts a stream before its final event.
	cut bool

	mu       sync.Mutex
	lastPath string
	lastBody []byte
}

func newDialectUpstream(t *testing.T) *dialectUpstream {
	u := &dialectUpstream{ollama: newFakeOllama(t)}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/responses", u.responses)
	mux.HandleFunc("POST /v1/messages", u.messages)
	mux.Handle("/", u.ollama.srv.Config.Handler)
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/chat", "/api/generate", "/v1/chat/completions", "/v1/responses", "/v1/messages":
			body, _ := io.ReadAll(r.Body)
			u.mu.Lock()
			u.lastPath, u.lastBody = r.URL.Path, body
			u.mu.Unlock()
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(u.srv.Close)
	return u
}

func (u *dialectUpstream) last() (string, []byte) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.lastPath, u.lastBody
}

func (u *dialectUpstream) streamed(w http.ResponseWriter, r *http.Request) bool {
	var req streamReq
	body, _ := io.ReadAll(r.Body)
	_ = json.Unmarshal(body, &req)
	return req.Stream != nil && *req.Stream
}

// writeEvents writes an SSE stream, flushing each event, and aborts it
// before the final one when cut is set.
func (u *dialectUpstream) writeEvents(w http.ResponseWriter, stream string) {
	w.Header().Set("Content-Type", "text/event-stream")
	events := strings.SplitAfter(stream, "\n\n")
	for i, e := range events {
		if u.cut && i == len(events)-2 {
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler)
		}
		io.WriteString(w, e)
		w.(http.Flusher).Flush()
	}
}

func (u *dialectUpstream) responses(w http.ResponseWriter, r *http.Request) {
	if u.streamed(w, r) {
		u.writeEvents(w, responsesStream(u.extras, u.ollama.tokens...))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, responsesObject(u.extras, strings.Join(u.ollama.tokens, "")))
}

func (u *dialectUpstream) messages(w http.ResponseWriter, r *http.Request) {
	if u.streamed(w, r) {
		u.writeEvents(w, messagesStream(u.extras, u.ollama.tokens...))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, messagesObject(u.extras, strings.Join(u.ollama.tokens, "")))
}

// sseEvent renders one event as Ollama writes it: an event line, a data
// line, a blank line.
func sseEvent(typ string, data map[string]any) string {
	data["type"] = typ
	b, _ := json.Marshal(data)
	return "event: " + typ + "\ndata: " + string(b) + "\n\n"
}

// responsesStream is a Responses API event stream answering text; with
// extras, reasoning comes first. (An answer that calls a function is not a
// turn: see toolCallAnswers.)
func responsesStream(extras bool, text ...string) string {
	var b strings.Builder
	seq := 0
	ev := func(typ string, data map[string]any) {
		data["sequence_number"] = seq
		seq++
		b.WriteString(sseEvent(typ, data))
	}
	resp := func(status string, output []any) map[string]any {
		return map[string]any{"id": "resp_1", "object": "response", "created_at": 1764000000, "model": "llama3.2", "status": status, "output": output}
	}
	ev("response.created", map[string]any{"response": resp("in_progress", []any{})})
	ev("response.in_progress", map[string]any{"response": resp("in_progress", []any{})})
	var output []any
	idx := 0
	if extras {
		ev("response.output_item.added", map[string]any{"output_index": idx, "item": map[string]any{"id": "rs_1", "type": "reasoning", "summary": []any{}}})
		ev("response.reasoning_summary_text.delta", map[string]any{"item_id": "rs_1", "output_index": idx, "summary_index": 0, "delta": "the user wants"})
		ev("response.reasoning_summary_text.done", map[string]any{"item_id": "rs_1", "output_index": idx, "summary_index": 0, "text": "the user wants"})
		ev("response.output_item.done", map[string]any{"output_index": idx, "item": map[string]any{"id": "rs_1", "type": "reasoning"}})
		output = append(output, map[string]any{"id": "rs_1", "type": "reasoning", "summary": []any{}})
		idx++
	}
	msg := map[string]any{"id": "msg_1", "type": "message", "status": "in_progress", "role": "assistant", "content": []any{}}
	ev("response.output_item.added", map[string]any{"output_index": idx, "item": msg})
	ev("response.content_part.added", map[string]any{"item_id": "msg_1", "output_index": idx, "content_index": 0, "part": map[string]any{"type": "output_text", "text": "", "annotations": []any{}}})
	for _, s := range text {
		ev("response.output_text.delta", map[string]any{"item_id": "msg_1", "output_index": idx, "content_index": 0, "delta": s, "logprobs": []any{}})
	}
	all := strings.Join(text, "")
	part := map[string]any{"type": "output_text", "text": all, "annotations": []any{}}
	ev("response.output_text.done", map[string]any{"item_id": "msg_1", "output_index": idx, "content_index": 0, "text": all})
	ev("response.content_part.done", map[string]any{"item_id": "msg_1", "output_index": idx, "content_index": 0, "part": part})
	done := map[string]any{"id": "msg_1", "type": "message", "status": "completed", "role": "assistant", "content": []any{part}}
	ev("response.output_item.done", map[string]any{"output_index": idx, "item": done})
	ev("response.completed", map[string]any{"response": resp("completed", append(output, done))})
	return b.String()
}

// responsesObject is a non-streamed Responses answer.
func responsesObject(extras bool, text string) string {
	var output []any
	if extras {
		output = append(output,
			map[string]any{"id": "rs_1", "type": "reasoning", "summary": []any{map[string]any{"type": "summary_text", "text": "the user wants"}}})
	}
	output = append(output, map[string]any{"id": "msg_1", "type": "message", "status": "completed", "role": "assistant",
		"content": []any{map[string]any{"type": "output_text", "text": text, "annotations": []any{}}}})
	b, _ := json.Marshal(map[string]any{"id": "resp_1", "object": "response", "created_at": 1764000000, "status": "completed",
		"error": nil, "incomplete_details": nil, "model": "llama3.2", "output": output, "usage": map[string]any{"input_tokens": 5, "output_tokens": 4, "total_tokens": 9}})
	return string(b)
}

// messagesStream is an Anthropic Messages event stream answering text;
// with extras, a thinking block comes first. (An answer that uses a tool
// is not a turn: see toolCallAnswers.)
func messagesStream(extras bool, text ...string) string {
	var b strings.Builder
	ev := func(typ string, data map[string]any) { b.WriteString(sseEvent(typ, data)) }
	ev("message_start", map[string]any{"message": map[string]any{"id": "msg_1", "type": "message", "role": "assistant", "model": "llama3.2",
		"content": []any{}, "stop_reason": nil, "stop_sequence": nil, "usage": map[string]any{"input_tokens": 5, "output_tokens": 1}}})
	idx := 0
	if extras {
		ev("content_block_start", map[string]any{"index": idx, "content_block": map[string]any{"type": "thinking", "thinking": ""}})
		ev("content_block_delta", map[string]any{"index": idx, "delta": map[string]any{"type": "thinking_delta", "thinking": "the user wants"}})
		ev("content_block_delta", map[string]any{"index": idx, "delta": map[string]any{"type": "signature_delta", "signature": "c2ln"}})
		ev("content_block_stop", map[string]any{"index": idx})
		idx++
	}
	ev("content_block_start", map[string]any{"index": idx, "content_block": map[string]any{"type": "text", "text": ""}})
	ev("ping", map[string]any{})
	for _, s := range text {
		ev("content_block_delta", map[string]any{"index": idx, "delta": map[string]any{"type": "text_delta", "text": s}})
	}
	ev("content_block_stop", map[string]any{"index": idx})
	ev("message_delta", map[string]any{"delta": map[string]any{"stop_reason": "end_turn", "stop_sequence": nil}, "usage": map[string]any{"output_tokens": 15}})
	ev("message_stop", map[string]any{})
	return b.String()
}

// messagesObject is a non-streamed Messages answer.
func messagesObject(extras bool, text string) string {
	var content []any
	if extras {
		content = append(content, map[string]any{"type": "thinking", "thinking": "the user wants", "signature": "c2ln"})
	}
	content = append(content, map[string]any{"type": "text", "text": text})
	b, _ := json.Marshal(map[string]any{"id": "msg_1", "type": "message", "role": "assistant", "model": "llama3.2", "content": content,
		"stop_reason": "end_turn", "stop_sequence": nil, "usage": map[string]any{"input_tokens": 5, "output_tokens": 4}})
	return string(b)
}

// ---- through serveChat ----

// Calls that carry no conversation go out as they came, on every dialect:
// nothing injected, nothing stored.
func TestDialectsForwardNonConversationsByteForByte(t *testing.T) {
	up := newDialectUpstream(t)
	mem := &fixedMemory{got: make(chan memory.Request, 1), mc: memoryLayers(false)}
	rec := &recorder{}
	base := startVera(t, up.srv.URL, func(s *Server) { s.Memory, s.Recorder = mem, rec })
	type call struct{ path, name, body string }
	var calls []call
	for _, c := range generateNotConversations {
		calls = append(calls, call{"/api/generate", c.name, c.body})
	}
	for _, c := range responsesNotConversations {
		calls = append(calls, call{"/v1/responses", c.name, c.body})
	}
	for _, c := range messagesNotConversations {
		calls = append(calls, call{"/v1/messages", c.name, c.body})
	}
	for _, c := range calls {
		t.Run(c.path+" "+c.name, func(t *testing.T) {
			res, _ := postChat(t, base, c.path, c.body)
			require.Equal(t, http.StatusOK, res.StatusCode)
			path, got := up.last()
			assert.Equal(t, c.path, path)
			assert.Equal(t, c.body, string(got), "byte for byte")
			assert.Empty(t, res.Header.Get("X-Vera-Context"))
		})
	}
	select {
	case <-mem.got:
		t.Fatal("memory was asked about a call without a conversation")
	default:
	}
	assert.Empty(t, rec.all())
}

// A conversation on each new dialect gets the layers in its own shape, and
// its finished turn (the user's text, the answer's text alone) is stored,
// streamed or not.
func TestDialectsWithMemoryThroughServeChat(t *testing.T) {
	mc := memoryLayers(true)
	for _, tc := range []struct {
		name, path, body string
		// check looks at what the upstream got.
		check func(t *testing.T, fwd []byte)
		user  string
	}{
		{"generate stream", "/api/generate", `{"model":"llama3.2","prompt":"who is my sister?","system":"be brief","options":{"seed":1}}`,
			func(t *testing.T, fwd []byte) {
				assert.JSONEq(t, `{"model":"llama3.2","prompt":"who is my sister?","options":{"seed":1},"system":`+marshalled(t, mc.System+"\n\n"+recentAsText)+`}`, string(fwd))
			}, "who is my sister?"},
		{"generate object", "/api/generate", `{"model":"llama3.2","prompt":"who is my sister?","system":"be brief","stream":false}`,
			func(t *testing.T, fwd []byte) {
				assert.Equal(t, mc.System+"\n\n"+recentAsText, jsonString(t, rawField(t, fwd, "system")))
			}, "who is my sister?"},
		{"responses stream", "/v1/responses", `{"model":"llama3.2","stream":true,"instructions":"be brief","input":[{"role":"user","content":[{"type":"input_text","text":"who is my sister?"}]}]}`,
			func(t *testing.T, fwd []byte) {
				assert.Equal(t, mc.System+"\n\n"+recentAsText, jsonString(t, rawField(t, fwd, "instructions")))
				assert.Equal(t, `[{"role":"user","content":[{"type":"input_text","text":"who is my sister?"}]}]`, string(rawField(t, fwd, "input")))
			}, "who is my sister?"},
		{"responses object", "/v1/responses", `{"model":"llama3.2","instructions":"be brief","input":"who is my sister?"}`,
			func(t *testing.T, fwd []byte) {
				assert.Equal(t, `"who is my sister?"`, string(rawField(t, fwd, "input")))
			}, "who is my sister?"},
		{"messages stream", "/v1/messages", `{"model":"llama3.2","max_tokens":100,"stream":true,"system":"be brief","messages":[{"role":"user","content":"who is my sister?"}]}`,
			func(t *testing.T, fwd []byte) {
				assert.Equal(t, mc.System, jsonString(t, rawField(t, fwd, "system")))
				assert.JSONEq(t, `[{"role":"user","content":"earlier"},{"role":"assistant","content":"yes"},{"role":"user","content":"who is my sister?"}]`, string(rawField(t, fwd, "messages")))
			}, "who is my sister?"},
		{"messages object", "/v1/messages", `{"model":"llama3.2","max_tokens":100,"system":[{"type":"text","text":"be brief"}],"messages":[{"role":"user","content":[{"type":"text","text":"who is my sister?"}]}]}`,
			func(t *testing.T, fwd []byte) {
				assert.JSONEq(t, `[{"type":"text","text":"be brief"},{"type":"text","text":`+marshalled(t, strings.TrimPrefix(mc.System, "be brief\n\n"))+`}]`, string(rawField(t, fwd, "system")))
			}, "who is my sister?"},
	} {
		for _, extras := range []bool{false, true} {
			if extras && tc.path == "/api/generate" {
				continue
			}
			t.Run(fmt.Sprintf("%s extras=%v", tc.name, extras), func(t *testing.T) {
				up := newDialectUpstream(t)
				up.extras = extras
				mem := &fixedMemory{got: make(chan memory.Request, 1), mc: mc}
				rec := &recorder{}
				base, served := startServedVera(t, up.srv.URL, func(s *Server) { s.Memory, s.Recorder = mem, rec })
				res, body := postChat(t, base, tc.path, tc.body, "X-OpenWebUI-User-Id", "alice")
				require.Equal(t, http.StatusOK, res.StatusCode, body)
				waitFor(t, served, "the handler to return")
				assert.Equal(t, "semantic=1; recent=1; rules=0; tokens=0", res.Header.Get("X-Vera-Context"))
				got := waitFor(t, mem.got, "the memory request")
				assert.Equal(t, "alice", got.Namespace)
				assert.Equal(t, memory.Message{Role: "system", Content: "be brief"}, got.Messages[0])
				assert.Equal(t, memory.Message{Role: "user", Content: tc.user}, got.Messages[len(got.Messages)-1])
				_, fwd := up.last()
				tc.check(t, fwd)
				turns := rec.all()
				require.Len(t, turns, 1, "the finished turn is stored: %s", body)
				assert.Equal(t, memory.Turn{Namespace: "alice", Model: "llama3.2", User: tc.user, Assistant: "Hello there.", Time: turns[0].Time, ID: turns[0].ID, Source: turns[0].Source}, turns[0],
					"no thinking, no tool call in the stored answer")
				src := turns[0].Source
				assert.Equal(t, memory.ViaChat, src.Via)
				assert.NotEmpty(t, src.Dialect)
				assert.Equal(t, "llama3.2", src.Model)
				assert.Equal(t, "Go-http-client/1.1", src.Client)
				assert.NotEmpty(t, src.RequestID)
			})
		}
	}
}

func jsonString(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var s string
	require.NoError(t, json.Unmarshal(raw, &s), "%s", raw)
	return s
}

// A stream cut before its final event stores nothing, and the client sees
// the cut.
func TestDialectsCutStreamStoresNothing(t *testing.T) {
	for _, tc := range []struct{ path, body string }{
		{"/v1/responses", `{"model":"llama3.2","stream":true,"input":"hi"}`},
		{"/v1/messages", `{"model":"llama3.2","stream":true,"max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`},
	} {
		t.Run(tc.path, func(t *testing.T) {
			up := newDialectUpstream(t)
			up.cut = true
			rec := &recorder{}
			base, served := startServedVera(t, up.srv.URL, func(s *Server) { s.Recorder = rec })
			res, err := http.Post(base+tc.path, "application/json", strings.NewReader(tc.body))
			require.NoError(t, err)
			b, err := io.ReadAll(res.Body)
			res.Body.Close()
			assert.Error(t, err, "the cut reaches the client: %s", b)
			waitFor(t, served, "the handler to return")
			assert.NotContains(t, string(b), "response.completed")
			assert.NotContains(t, string(b), "message_stop")
			assert.Empty(t, rec.all())
		})
	}
}

// The end of every dialect's answer (done:true, data: [DONE],
// response.completed, message_stop, a sized body's last byte) reaches the
// client only once the turn is committed.
func TestAnswerEndWaitsForTheCommit(t *testing.T) {
	for _, tc := range []struct{ name, path, body, end string }{
		{"chat ndjson", "/api/chat", hiChat, `"done":true`},
		{"chat object", "/api/chat", `{"model":"llama3.2","stream":false,"messages":[{"role":"user","content":"hi"}]}`, "}"},
		{"openai sse", "/v1/chat/completions", `{"model":"llama3.2","stream":true,"messages":[{"role":"user","content":"hi"}]}`, "data: [DONE]"},
		{"openai object", "/v1/chat/completions", `{"model":"llama3.2","messages":[{"role":"user","content":"hi"}]}`, "}"},
		{"generate", "/api/generate", `{"model":"llama3.2","prompt":"hi"}`, `"done":true`},
		{"responses stream", "/v1/responses", `{"model":"llama3.2","stream":true,"input":"hi"}`, `"type":"response.completed"`},
		{"responses object", "/v1/responses", `{"model":"llama3.2","input":"hi"}`, `"status":"completed"`},
		{"messages stream", "/v1/messages", `{"model":"llama3.2","stream":true,"max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`, `"type":"message_stop"`},
		{"messages object", "/v1/messages", `{"model":"llama3.2","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`, `"stop_reason":"end_turn"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := newDialectUpstream(t)
			rec := &recorder{gate: make(chan struct{})}
			base := startVera(t, up.srv.URL, func(s *Server) { s.Recorder = rec })
			res, err := http.Post(base+tc.path, "application/json", strings.NewReader(tc.body))
			require.NoError(t, err)
			defer res.Body.Close()
			got := make(chan string, 1)
			go func() {
				b, _ := io.ReadAll(res.Body)
				got <- string(b)
			}()
			select {
			case b := <-got:
				t.Fatalf("the answer ended before its turn was committed: %q", b)
			case <-time.After(300 * time.Millisecond):
			}
			assert.Empty(t, rec.all(), "not committed yet")
			close(rec.gate)
			body := waitFor(t, got, "the answer's end")
			assert.Contains(t, body, tc.end)
			require.Len(t, rec.all(), 1)
			assert.Equal(t, "hi", rec.all()[0].User)
			assert.Equal(t, "Hello there.", rec.all()[0].Assistant)
		})
	}
}

// An agent's tool loop on the Responses API sends only the outputs of the
// calls (OpenAI's own clients do so with previous_response_id). It is a
// request to answer, not a crash.
func TestResponsesToolOutputOnlyInput(t *testing.T) {
	for _, recordTasks := range []bool{false, true} {
		t.Run(fmt.Sprintf("RecordTasks=%v", recordTasks), func(t *testing.T) {
			up := newDialectUpstream(t)
			mem := &fixedMemory{got: make(chan memory.Request, 1), mc: memoryLayers(false)}
			rec := &recorder{}
			base := startVera(t, up.srv.URL, func(s *Server) { s.Memory, s.Recorder, s.RecordTasks = mem, rec, recordTasks })
			for _, body := range []string{
				`{"model":"llama3.2","previous_response_id":"resp_0","input":[{"type":"function_call_output","call_id":"c1","output":"42"}]}`,
				`{"model":"llama3.2","previous_response_id":"resp_0","input":[{"type":"item_reference","id":"msg_0"}]}`,
			} {
				res, got := postChat(t, base, "/v1/responses", body)
				assert.Equal(t, http.StatusOK, res.StatusCode, "%s: %s", body, got)
				_, fwd := up.last()
				assert.Equal(t, body, string(fwd), "forwarded as it came")
			}
			assert.Empty(t, rec.all(), "a tool output alone has no user text to store")
		})
	}
}

// ---- 3. tees ----

// teeAnswer feeds body to a tee of dialect d in small pieces.
func teeAnswer(d dialect.Dialect, stream bool, body string) (string, bool) {
	tee := &answerTee{d: d, stream: stream}
	for i := 0; i < len(body); i += 5 {
		tee.Write([]byte(body[i:min(i+5, len(body))]))
	}
	tee.finish()
	return tee.Captured()
}

// dropEvents removes the events whose type is one of types.
func dropEvents(stream string, types ...string) string {
	var b strings.Builder
	for _, e := range strings.SplitAfter(stream, "\n\n") {
		keep := true
		for _, typ := range types {
			if strings.HasPrefix(e, "event: "+typ+"\n") {
				keep = false
			}
		}
		if keep {
			b.WriteString(e)
		}
	}
	return b.String()
}

// insertBefore puts ev before the first event of type typ.
func insertBefore(stream, typ, ev string) string {
	i := strings.Index(stream, "event: "+typ+"\n")
	return stream[:i] + ev + stream[i:]
}

func TestResponsesTee(t *testing.T) {
	clean := responsesStream(false, "Hel", "lo")
	completed := sseEvent("response.completed", map[string]any{"response": map[string]any{"status": "completed"}})
	for _, tc := range []struct {
		name, body string
		stream     bool
		want       string
		ok         bool
	}{
		{"stream", clean, true, "Hello", true},
		{"reasoning and function call apart", responsesStream(true, "Hel", "lo"), true, "Hello", true},
		{"crlf", strings.ReplaceAll(clean, "\n", "\r\n"), true, "Hello", true},
		{"comments and no event lines", ": keep-alive\n\n" + strings.ReplaceAll(clean, "event: ", ": event "), true, "Hello", true},
		{"last event without its blank line", strings.TrimSuffix(clean, "\n\n"), true, "Hello", true},
		{"no response.completed", dropEvents(clean, "response.completed"), true, "Hello", false},
		{"cut in the final event", clean[:len(clean)-20], true, "Hello", false},
		{"cut mid-stream", clean[:strings.Index(clean, `"delta":"lo"`)], true, "Hel", false},
		{"completed only named in the text", dropEvents(responsesStream(false, `"response.completed"`), "response.completed"), true, `"response.completed"`, false},
		{"error event", insertBefore(clean, "response.completed", sseEvent("error", map[string]any{"code": "server_error", "message": "boom", "param": nil})), true, "Hello", false},
		{"response.failed", dropEvents(clean, "response.completed") +
			sseEvent("response.failed", map[string]any{"response": map[string]any{"status": "failed", "error": map[string]any{"code": "server_error", "message": "boom"}}}), true, "Hello", false},
		{"response.incomplete", dropEvents(clean, "response.completed") +
			sseEvent("response.incomplete", map[string]any{"response": map[string]any{"status": "incomplete", "incomplete_details": map[string]any{"reason": "max_output_tokens"}}}), true, "Hello", false},
		{"garbage", insertBefore(clean, "response.completed", "data: nope\n\n"), true, "Hello", false},
		{"event after completed", clean + sseEvent("response.output_text.delta", map[string]any{"delta": "!"}), true, "Hello", false},
		{"completed twice", clean + completed, true, "Hello", false},
		{"[DONE] after completed", clean + "data: [DONE]\n\n", true, "Hello", false},
		{"empty answer", responsesStream(false), true, "", false},
		{"blank answer", responsesStream(false, " \n"), true, " \n", false},

		{"object", responsesObject(false, "Hello there."), false, "Hello there.", true},
		{"object with reasoning and a call", responsesObject(true, "Hello there."), false, "Hello there.", true},
		{"object of two parts", `{"status":"completed","output":[{"type":"message","content":[{"type":"output_text","text":"a"},{"type":"refusal","refusal":"no"},{"type":"output_text","text":"b"}]}]}`, false, "ab", true},
		{"object failed", `{"status":"failed","error":{"code":"server_error","message":"boom"},"output":[]}`, false, "", false},
		{"object incomplete", `{"status":"incomplete","error":null,"output":[{"type":"message","content":[{"type":"output_text","text":"Hel"}]}]}`, false, "", false},
		{"object with only a call", `{"status":"completed","error":null,"output":[{"type":"function_call","call_id":"c","name":"f","arguments":"{}"}]}`, false, "", false},
		{"object error", `{"error":{"message":"boom","type":"api_error"}}`, false, "", false},
		{"object garbage", `{"status":"completed","output":[`, false, "", false},
		{"empty object", ``, false, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := teeAnswer(openAIResponses, tc.stream, tc.body)
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.ok, ok)
		})
	}
}

func TestMessagesTee(t *testing.T) {
	clean := messagesStream(false, "Hel", "lo")
	for _, tc := range []struct {
		name, body string
		stream     bool
		want       string
		ok         bool
	}{
		{"stream", clean, true, "Hello", true},
		{"thinking and tool_use apart", messagesStream(true, "Hel", "lo"), true, "Hello", true},
		{"crlf", strings.ReplaceAll(clean, "\n", "\r\n"), true, "Hello", true},
		{"last event without its blank line", strings.TrimSuffix(clean, "\n\n"), true, "Hello", true},
		{"two text blocks", insertBefore(clean, "message_delta",
			sseEvent("content_block_start", map[string]any{"index": 1, "content_block": map[string]any{"type": "text", "text": ""}})+
				sseEvent("content_block_delta", map[string]any{"index": 1, "delta": map[string]any{"type": "text_delta", "text": " again"}})+
				sseEvent("content_block_stop", map[string]any{"index": 1})), true, "Hello again", true},
		{"no message_stop", dropEvents(clean, "message_stop"), true, "Hello", false},
		{"cut in the final event", clean[:len(clean)-8], true, "Hello", false},
		{"cut mid-stream", clean[:strings.Index(clean, `"text":"lo"`)], true, "Hel", false},
		{"message_stop only named in the text", dropEvents(messagesStream(false, `"message_stop"`), "message_stop"), true, `"message_stop"`, false},
		{"error event", insertBefore(clean, "message_delta", sseEvent("error", map[string]any{"error": map[string]any{"type": "overloaded_error", "message": "Overloaded"}})), true, "Hello", false},
		{"garbage", insertBefore(clean, "message_stop", "data: {nope\n\n"), true, "Hello", false},
		{"event after message_stop", clean + sseEvent("ping", map[string]any{}), true, "Hello", false},
		{"thinking only", dropEvents(messagesStream(true), "content_block_start", "content_block_stop"), true, "", false},
		{"empty answer", messagesStream(false), true, "", false},

		{"object", messagesObject(false, "Hello there."), false, "Hello there.", true},
		{"object with thinking and tool_use", messagesObject(true, "Hello there."), false, "Hello there.", true},
		{"object of tool_use only", `{"type":"message","role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":{}}],"stop_reason":"tool_use"}`, false, "", false},
		{"object error", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, false, "", false},
		{"object garbage", `{"type":"message","content":[`, false, "", false},
		{"empty object", ``, false, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := teeAnswer(anthropicMessages, tc.stream, tc.body)
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.ok, ok)
		})
	}
}

// The content type decides whether the answer is read as a stream, and an
// error status is never captured.
func TestDialectTeeWrap(t *testing.T) {
	for _, tc := range []struct {
		d      dialect.Dialect
		stream string
		object string
	}{
		{openAIResponses, responsesStream(false, "Hi"), responsesObject(false, "Hi")},
		{anthropicMessages, messagesStream(false, "Hi"), messagesObject(false, "Hi")},
	} {
		t.Run(tc.d.String(), func(t *testing.T) {
			for _, c := range []struct {
				ctype, body string
				status      int
				ok          bool
			}{
				{"text/event-stream; charset=utf-8", tc.stream, 200, true},
				{"application/json", tc.object, 200, true},
				{"application/json", tc.stream, 200, false},
				{"text/event-stream", tc.stream, 500, false},
			} {
				tee := &answerTee{d: tc.d}
				res := &http.Response{StatusCode: c.status, Header: http.Header{"Content-Type": {c.ctype}}}
				b, err := io.ReadAll(tee.wrap(res, io.NopCloser(strings.NewReader(c.body))))
				require.NoError(t, err)
				assert.Equal(t, c.body, string(b), "the client gets every byte as it came")
				got, ok := tee.Captured()
				assert.Equal(t, c.ok, ok, "%s %d", c.ctype, c.status)
				if ok {
					assert.Equal(t, "Hi", got)
				}
			}
		})
	}
}

// An event's data may come in several data lines (the SSE spec joins
// them with a newline). A final event written so is still the answer's end:
// the answer it completes is committed, like any other.
func TestDialectTeeFinalEventOverSeveralDataLines(t *testing.T) {
	for _, tc := range []struct {
		d    dialect.Dialect
		body string
	}{
		{openAIChat, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\ndata:\ndata: [DONE]\n\n"},
		{openAIResponses, "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"Hi\"}\n\n" +
			"event: response.completed\ndata: {\"type\":\ndata: \"response.completed\",\"response\":{\"status\":\"completed\"}}\n\n"},
		{anthropicMessages, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n" +
			"event: message_stop\ndata:\ndata: {\"type\":\"message_stop\"}\n\n"},
	} {
		t.Run(tc.d.String(), func(t *testing.T) {
			var committed []string
			tee := &answerTee{d: tc.d, onEnd: func(a string) { committed = append(committed, a) }}
			res := &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}}}
			b, err := io.ReadAll(tee.wrap(res, io.NopCloser(strings.NewReader(tc.body))))
			require.NoError(t, err)
			assert.Equal(t, tc.body, string(b))
			answer, ok := tee.Captured()
			require.True(t, ok, "the tee takes the answer for complete")
			assert.Equal(t, "Hi", answer)
			assert.Equal(t, []string{"Hi"}, committed, "so its turn is committed before the end goes out")
		})
	}
}

// A non-streamed answer read a byte at a time: once its end has been
// given out, the tee must not take the upstream's second io.EOF for the
// end of another, empty object.
func TestDialectTeeObjectReadInSmallPieces(t *testing.T) {
	for _, tc := range []struct {
		d    dialect.Dialect
		body string
	}{
		{ollamaChat, `{"message":{"role":"assistant","content":"Hello"},"done":true}`},
		{openAIChat, `{"choices":[{"index":0,"message":{"role":"assistant","content":"Hello"}}]}`},
		{openAIResponses, responsesObject(false, "Hello")},
		{anthropicMessages, messagesObject(false, "Hello")},
	} {
		t.Run(tc.d.String(), func(t *testing.T) {
			ends := 0
			tee := &answerTee{d: tc.d, onEnd: func(string) { ends++ }}
			res := &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}}}
			b, err := io.ReadAll(iotest.OneByteReader(tee.wrap(res, io.NopCloser(strings.NewReader(tc.body)))))
			require.NoError(t, err)
			assert.Equal(t, tc.body, string(b))
			assert.Equal(t, 1, ends)
			answer, ok := tee.Captured()
			assert.Equal(t, "Hello", answer)
			assert.True(t, ok, "the answer read in small pieces is complete")
		})
	}
}

// ---- 4. errors ----

// A malformed body gets a 400 in the route's own shape, speaking of the
// request.
func TestDialectsMalformedBodyShapes(t *testing.T) {
	up := newDialectUpstream(t)
	rec := &recorder{}
	base := startVera(t, up.srv.URL, func(s *Server) { s.Recorder = rec })
	for _, tc := range []struct {
		path, body, want string
	}{
		{"/api/generate", `{"model":"m","prompt":5}`, `field "prompt": want a string, got number`},
		{"/api/generate", `{"model":"m","raw":"yes","prompt":"hi"}`, `field "raw"`},
		{"/api/generate", `{"model":"m",`, "JSON"},
		{"/api/generate", `[]`, "want an object, got array"},
		{"/api/generate", ``, "missing request body"},
		{"/v1/responses", `{"model":"m","input":5}`, `input`},
		{"/v1/responses", `{"model":"m","input":[5]}`, `input`},
		{"/v1/responses", `{"model":"m","input":[{"role":"user","content":5}]}`, `input[0].content`},
		{"/v1/responses", `{"model":"m","instructions":["x"]}`, `field "instructions"`},
		{"/v1/responses", `{"model":`, "JSON"},
		{"/v1/messages", `{"model":"m","messages":"hi"}`, `field "messages": want an array, got string`},
		{"/v1/messages", `{"model":"m","system":5,"messages":[]}`, `system`},
		{"/v1/messages", `{"model":"m","messages":[{"role":"user","content":5}]}`, `messages[0].content`},
		{"/v1/messages", `{"model":"m","messages":[{"role":"user","content":[5]}]}`, `messages[0].content`},
		{"/v1/messages", `{`, "JSON"},
	} {
		t.Run(tc.path+" "+tc.body, func(t *testing.T) {
			res, body := postChat(t, base, tc.path, tc.body)
			require.Equal(t, http.StatusBadRequest, res.StatusCode, body)
			assert.Contains(t, res.Header.Get("Content-Type"), "application/json")
			msg := errorMessage(t, tc.path, body)
			assert.Contains(t, msg, tc.want)
			for _, goism := range []string{"Go value", "Go struct", "proxy.", "json.RawMessage", "map[", "[]", "unmarshal"} {
				assert.NotContains(t, msg, goism)
			}
		})
	}
	assert.Empty(t, rec.all())

	// A bad header too.
	for _, path := range []string{"/api/generate", "/v1/responses", "/v1/messages"} {
		res, body := postChat(t, base, path, `{"model":"m"}`, "X-Vera-Memory", "perhaps")
		require.Equal(t, http.StatusBadRequest, res.StatusCode)
		assert.Contains(t, errorMessage(t, path, body), "X-Vera-Memory")
	}
}

// errorMessage checks an error body has the shape of path's dialect and
// returns its message.
func errorMessage(t *testing.T, path, body string) string {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(body), &m), body)
	switch path {
	case "/v1/messages":
		assert.Equal(t, "error", m["type"], body)
		e, ok := m["error"].(map[string]any)
		require.True(t, ok, body)
		assert.Equal(t, "invalid_request_error", e["type"], body)
		assert.Len(t, m, 2, body)
		msg, ok := e["message"].(string)
		require.True(t, ok, body)
		return msg
	case "/v1/responses":
		e, ok := m["error"].(map[string]any)
		require.True(t, ok, body)
		assert.Equal(t, "invalid_request_error", e["type"], body)
		assert.Len(t, m, 1, body)
		msg, ok := e["message"].(string)
		require.True(t, ok, body)
		return msg
	}
	assert.Len(t, m, 1, body)
	msg, ok := m["error"].(string)
	require.True(t, ok, body)
	return msg
}
