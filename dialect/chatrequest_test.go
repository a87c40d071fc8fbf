package dialect_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/dialect"
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
