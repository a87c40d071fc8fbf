package proxy

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
		req, err := ParseChatRequest(body)
		if err != nil {
			return
		}
		// A request vera re-encodes must mean the same to Ollama: every
		// field, known or not, survives a round trip.
		out, err := json.Marshal(req)
		require.NoError(t, err)
		again, err := ParseChatRequest(out)
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
	req, err := ParseChatRequest([]byte(chatSeeds[1]))
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
	f.Fuzz(func(t *testing.T, body []byte, split uint16, stream bool) {
		whole := &answerTee{stream: stream}
		whole.Write(body)
		whole.finish()

		cut := int(split) % (len(body) + 1)
		parts := &answerTee{stream: stream}
		parts.Write(body[:cut])
		parts.Write(body[cut:])
		parts.finish()

		// However the bytes arrive, the tee sees the same answer.
		a1, ok1 := whole.Answer()
		a2, ok2 := parts.Answer()
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
	}{
		{"stream", true, "{\"message\":{\"content\":\"He\"},\"done\":false}\n{\"message\":{\"content\":\"llo\"},\"done\":false}\n{\"message\":{\"content\":\"\"},\"done\":true}\n", "Hello", true},
		{"thinking and tool calls apart", true, "{\"message\":{\"thinking\":\"hmm\",\"content\":\"\"}}\n{\"message\":{\"content\":\"Yes\",\"tool_calls\":[{}]}}\n{\"done\":true}\n", "Yes", true},
		{"last line without newline", true, "{\"message\":{\"content\":\"a\"}}\n{\"done\":true}", "a", true},
		{"no done", true, "{\"message\":{\"content\":\"a\"}}\n", "a", false},
		{"error record", true, "{\"message\":{\"content\":\"a\"}}\n{\"error\":\"runner died\"}\n", "a", false},
		{"garbage line", true, "{\"message\":{\"content\":\"a\"}}\nxx\n{\"done\":true}\n", "a", false},
		{"record after done", true, "{\"message\":{\"content\":\"a\"},\"done\":true}\n{\"message\":{\"content\":\"b\"}}\n", "a", false},
		{"empty answer", true, "{\"message\":{\"content\":\"  \"},\"done\":true}\n", "  ", false},
		{"single object", false, `{"message":{"role":"assistant","content":"Hi there"},"done":true}`, "Hi there", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tee := &answerTee{stream: tt.stream}
			for i := 0; i < len(tt.body); i += 5 { // arrive in small pieces
				tee.Write([]byte(tt.body[i:min(i+5, len(tt.body))]))
			}
			tee.finish()
			got, ok := tee.Answer()
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.ok, ok)
		})
	}
}
