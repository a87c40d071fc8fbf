package dialect_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/dialect"
)

var openAISeeds = []string{
	`{"model":"llama3.2","messages":[{"role":"user","content":"hi"}]}`,
	`{"model":"llama3.2","stream":true,"stream_options":{"include_usage":true},"max_tokens":64,"temperature":0.2,` +
		`"response_format":{"type":"json_object"},"tools":[{"type":"function","function":{"name":"f"}}],` +
		`"messages":[{"role":"system","content":"be brief"},` +
		`{"role":"user","name":"ann","content":[{"type":"text","text":"what is"},{"type":"image_url","image_url":{"url":"data:image/png;base64,aGVsbG8="}},{"type":"text","text":"this?"}]},` +
		`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},` +
		`{"role":"tool","tool_call_id":"c1","content":"42"}],"future":{"x":[1,2,3]}}`,
	`{"model":"m","messages":null,"stream":null}`,
	`{"messages":[{"role":"user"}]}`,
	`{}`,
	`[]`,
	``,
}

func FuzzParseOpenAIRequest(f *testing.F) {
	for _, s := range openAISeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := dialect.ParseOpenAIRequest(body)
		if err != nil {
			return
		}
		out, err := json.Marshal(req)
		require.NoError(t, err)
		again, err := dialect.ParseOpenAIRequest(out)
		require.NoError(t, err, "re-encoded request must parse: %s", out)
		out2, err := json.Marshal(again)
		require.NoError(t, err)
		assert.JSONEq(t, string(out), string(out2))
		for i := range req.Messages {
			assert.Equal(t, req.Messages[i].Text(), again.Messages[i].Text())
		}
	})
}

func TestOpenAIRequestKeepsEverything(t *testing.T) {
	req, err := dialect.ParseOpenAIRequest([]byte(openAISeeds[1]))
	require.NoError(t, err)
	assert.Equal(t, "llama3.2", req.Model)
	require.Len(t, req.Messages, 4)
	assert.Equal(t, "what is\nthis?", req.Messages[1].Text(), "text parts joined, the image left out")
	assert.Equal(t, "what is\nthis?", req.LastUser())
	assert.Equal(t, "", req.Messages[2].Text(), "null content")
	_, answer := req.Options()
	assert.Equal(t, 64, answer)
	out, err := json.Marshal(req)
	require.NoError(t, err)
	assert.JSONEq(t, openAISeeds[1], string(out))
}

func TestOpenAIRequestRefusesBadContent(t *testing.T) {
	for _, body := range []string{
		`{"model":"m","messages":[{"role":"user","content":42}]}`,
		`{"model":"m","messages":[{"role":"user","content":{"text":"hi"}}]}`,
		`{"model":"m","messages":[{"role":"user","content":["hi"]}]}`,
	} {
		_, err := dialect.ParseOpenAIRequest([]byte(body))
		require.Error(t, err, body)
		assert.Contains(t, err.Error(), "messages[0].content")
	}
}
