package proxy

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vera-proxy/vera/proxy/dialect"
)

var chatSeeds = []string{
	`{"model":"llama3.2","messages":[{"role":"user","content":"hi"}]}`,
	`{"model":"llama3.2","stream":false,"think":true,"keep_alive":"5m","options":{"num_ctx":8192},"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"look","images":["aGVsbG8="]},{"role":"assistant","content":"","tool_calls":[{"function":{"name":"f","arguments":{"a":1}}}]},{"role":"tool","content":"42","tool_name":"f"}],"future":{"x":[1,2,3]}}`,
	`{"model":"m","messages":null,"stream":null}`,
	`{}`,
	`[]`,
	`{"model":1}`,
	`{"messages":[{"role":"user","content":"\u00e9\ud83d\ude00"}]}`,
	``,
}

func FuzzParseChatRequest(f *testing.F) {
	for _, s := range chatSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := dialect.ParseChatRequest(body)
		if err != nil {
			return
		}
		// A request vera re-encodes must mean the same to Ollama: every
		// field, known or not, survives a round trip.
		out, err := json.Marshal(req)
		require.NoError(t, err)
		again, err := dialect.ParseChatRequest(out)
		require.NoError(t, err, "re-encoded request must parse: %s", out)
		out2, err := json.Marshal(again)
		require.NoError(t, err)
		assert.JSONEq(t, string(out), string(out2))

		// Every top-level key of the input is still there (a null messages
		// or stream is dropped, which Ollama reads the same way).
		var in, got map[string]json.RawMessage
		if json.Unmarshal(body, &in) != nil {
			return
		}
		require.NoError(t, json.Unmarshal(out, &got))
		for k, v := range in {
			if string(v) == "null" && (k == "messages" || k == "stream") {
				continue
			}
			_, ok := got[k]
			assert.True(t, ok, "key %q lost", k)
		}
	})
}

func TestChatRequestRoundTripKeepsEverything(t *testing.T) {
	req, err := dialect.ParseChatRequest([]byte(chatSeeds[1]))
	require.NoError(t, err)
	assert.Equal(t, "llama3.2", req.Model)
	require.NotNil(t, req.Stream)
	assert.False(t, *req.Stream)
	require.Len(t, req.Messages, 4)
	assert.Equal(t, "look", req.LastUser())
	assert.JSONEq(t, `["aGVsbG8="]`, string(req.Messages[1].Extra["images"]))
	out, err := json.Marshal(req)
	require.NoError(t, err)
	assert.JSONEq(t, chatSeeds[1], string(out))
}

func FuzzAnswerTee(f *testing.F) {
	f.Add([]byte("{\"message\":{\"content\":\"He\"},\"done\":false}\n{\"message\":{\"content\":\"llo\",\"thinking\":\"x\"},\"done\":false}\n{\"done\":true}\n"), uint16(7), true)
	f.Add([]byte(`{"message":{"role":"assistant","content":"Hello"},"done":true}`), uint16(3), false)
	f.Add([]byte("{\"message\":{\"content\":\"a\"}}\n{\"error\":\"boom\"}\n"), uint16(30), true)
	f.Add([]byte("not json\n"), uint16(1), true)
	f.Add([]byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\n: keep-alive\n\ndata: [DONE]\n\n"), uint16(9), true)
	f.Add([]byte("data: {\"choices\":\r\ndata: []}\r\n\r\n"), uint16(4), true)
	f.Add([]byte(`{"choices":[{"index":0,"message":{"content":"Hi"}}]}`), uint16(2), false)
	f.Fuzz(func(t *testing.T, body []byte, split uint16, stream bool) {
		// Both formats share the flag: OpenAI's when the body looks like SSE
		// or a completion object.
		openai := bytes.Contains(body, []byte("data:")) || bytes.Contains(body, []byte("choices"))
		whole := &answerTee{stream: stream, d: dialectFor(openai)}
		whole.Write(body)
		whole.finish()

		cut := int(split) % (len(body) + 1)
		parts := &answerTee{stream: stream, d: dialectFor(openai)}
		parts.Write(body[:cut])
		parts.Write(body[cut:])
		parts.finish()

		// However the bytes arrive, the tee sees the same answer.
		a1, ok1 := whole.Captured()
		a2, ok2 := parts.Captured()
		assert.Equal(t, a1, a2)
		assert.Equal(t, ok1, ok2)
	})
}

func TestAnswerTee(t *testing.T) {
	tests := []struct {
		name   string
		stream bool
		body   string
		want   string
		ok     bool
		openai bool
	}{
		{"stream", true, "{\"message\":{\"content\":\"He\"},\"done\":false}\n{\"message\":{\"content\":\"llo\"},\"done\":false}\n{\"message\":{\"content\":\"\"},\"done\":true}\n", "Hello", true, false},
		{"thinking apart", true, "{\"message\":{\"thinking\":\"hmm\",\"content\":\"\"}}\n{\"message\":{\"content\":\"Yes\"}}\n{\"done\":true}\n", "Yes", true, false},
		{"tool calls: the loop goes on, not a turn", true, "{\"message\":{\"content\":\"Let me look.\",\"tool_calls\":[{\"function\":{\"name\":\"w\",\"arguments\":{}}}]}}\n{\"done\":true}\n", "Let me look.", false, false},
		{"last line without newline", true, "{\"message\":{\"content\":\"a\"}}\n{\"done\":true}", "a", true, false},
		{"no done", true, "{\"message\":{\"content\":\"a\"}}\n", "a", false, false},
		{"error record", true, "{\"message\":{\"content\":\"a\"}}\n{\"error\":\"runner died\"}\n", "a", false, false},
		{"garbage line", true, "{\"message\":{\"content\":\"a\"}}\nxx\n{\"done\":true}\n", "a", false, false},
		{"record after done", true, "{\"message\":{\"content\":\"a\"},\"done\":true}\n{\"message\":{\"content\":\"b\"}}\n", "a", false, false},
		{"empty answer", true, "{\"message\":{\"content\":\"  \"},\"done\":true}\n", "  ", false, false},
		{"single object", false, `{"message":{"role":"assistant","content":"Hi there"},"done":true}`, "Hi there", true, false},
		{"empty body", false, ``, "", false, false},

		// OpenAI's /v1/chat/completions.
		{"sse", true, "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"He\"}}]}\n\ndata: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"llo\"}}]}\n\ndata: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n", "Hello", true, true},
		{"sse crlf, comments, event fields, usage chunk", true, ": OPENROUTER PROCESSING\r\n\r\nevent: message\r\nid: 1\r\ndata:{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\r\n\r\ndata: {\"choices\":[],\"usage\":{\"total_tokens\":3}}\r\n\r\ndata: [DONE]", "Hi", true, true},
		{"sse data split over lines", true, "data: {\"choices\":[{\"index\":0,\ndata: \"delta\":{\"content\":\"Hi\"}}]}\n\ndata: [DONE]\n\n", "Hi", true, true},
		{"sse second choice ignored", true, "data: {\"choices\":[{\"index\":1,\"delta\":{\"content\":\"B\"}},{\"index\":0,\"delta\":{\"content\":\"A\"}}]}\n\ndata: [DONE]\n\n", "A", true, true},
		{"sse reasoning apart", true, "data: {\"choices\":[{\"index\":0,\"delta\":{\"reasoning\":\"hmm\",\"content\":\"\"}}]}\n\ndata: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Yes\"}}]}\n\ndata: [DONE]\n\n", "Yes", true, true},
		{"sse without done", true, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\n\n", "a", false, true},
		{"sse error event", true, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\n\ndata: {\"error\":{\"message\":\"boom\",\"type\":\"api_error\"}}\n\ndata: [DONE]\n\n", "a", false, true},
		{"sse garbage", true, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\n\ndata: nope\n\ndata: [DONE]\n\n", "a", false, true},
		{"sse event after done", true, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\n\ndata: [DONE]\n\ndata: {\"choices\":[]}\n\n", "a", false, true},
		{"openai object", false, `{"id":"x","choices":[{"index":0,"message":{"role":"assistant","content":"Hi there"},"finish_reason":"stop"}]}`, "Hi there", true, true},
		{"openai object with tool calls only", false, `{"choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{}]}}]}`, "", false, true},
		{"openai error object", false, `{"error":{"message":"boom"}}`, "", false, true},
		{"openai object null error", false, `{"error":null,"choices":[{"index":0,"message":{"content":"ok"}}]}`, "ok", true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tee := &answerTee{stream: tt.stream, d: dialectFor(tt.openai)}
			for i := 0; i < len(tt.body); i += 5 { // arrive in small pieces
				tee.Write([]byte(tt.body[i:min(i+5, len(tt.body))]))
			}
			tee.finish()
			got, ok := tee.Captured()
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.ok, ok)
		})
	}
}

// dialectFor is the chat dialect of the older tests' openai flag.
func dialectFor(openai bool) dialect.Dialect {
	if openai {
		return openAIChat
	}
	return ollamaChat
}
