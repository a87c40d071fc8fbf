package dialect_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/dialect"
	"github.com/vera-proxy/vera/memory"
)

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

var responsesSeeds = []string{
	`{"model":"llama3.2","input":"hi"}`,
	responsesFull,
	`{"model":"m","instructions":"x","input":[{"role":"user","content":[{"type":"input_text","text":"a"},{"type":"input_image","image_url":"u"}]}]}`,
	`{"model":"m","input":[{"type":"function_call_output","call_id":"c","output":"42"}]}`,
	`{"model":"m","input":[{"role":"system","content":"s"},{"role":"user","content":"u"}]}`,
	`{"model":"m","input":[]}`,
	`{"model":"m","input":null,"instructions":null,"stream":null}`,
	`{"model":"m","input":""}`,
	`{"model":"m","input":5}`,
	`{"model":"m","input":[{"role":"user","content":5}]}`,
	`{}`,
	``,
}

func FuzzParseResponsesRequest(f *testing.F) {
	for _, s := range responsesSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		checkParsed(t, openAIResponses, body, func(k string, v json.RawMessage) bool {
			return (k == "stream" || k == "input") && isNull(v)
		})
		req, err := dialect.ParseResponsesRequest(body)
		if err != nil || !req.Conversation() {
			return
		}
		// input goes out as it came, whatever memory adds.
		wb, err := json.Marshal(req.WithMemory(fuzzLayers(req.MemoryMessages())))
		require.NoError(t, err)
		var want, got bytes.Buffer
		require.NoError(t, json.Compact(&want, req.Input))
		require.NoError(t, json.Compact(&got, rawFieldOf(t, wb, "input")))
		assert.JSONEq(t, want.String(), got.String())
	})
}
