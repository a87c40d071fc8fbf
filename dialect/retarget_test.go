package dialect_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/dialect"
)

func TestRetarget(t *testing.T) {
	out, err := retarget([]byte(`{"model":"vera","messages":[{"role":"user","content":"/think   why?"}]}`), "qwen3:8b", true, true, ollamaChat)
	require.NoError(t, err)
	assert.JSONEq(t, `{"model":"qwen3:8b","think":true,"messages":[{"role":"user","content":"why?"}]}`, string(out))
	out, err = retarget([]byte(`{"model":"vera","think":false,"prompt":"/think why?"}`), "qwen3:8b", true, true, ollamaGenerate)
	require.NoError(t, err)
	assert.JSONEq(t, `{"model":"qwen3:8b","think":false,"prompt":"why?"}`, string(out), "the client's think stays")
	out, err = retarget([]byte(`{"model":"vera","prompt":"/think why?"}`), "tiny", true, false, ollamaGenerate)
	require.NoError(t, err)
	assert.JSONEq(t, `{"model":"tiny","prompt":"why?"}`, string(out), "a model that cannot think is not asked to")
	_, err = retarget([]byte(`[1]`), "m", false, false, ollamaChat)
	assert.Error(t, err)
}

// retarget is the dialect's Retarget, with the dialect last.
func retarget(body []byte, model string, strip, think bool, d dialect.Dialect) ([]byte, error) {
	return d.Retarget(body, model, strip, think)
}

// The /think prefix comes off the last user message only: not an earlier
// one, not a tool's description, not a quoted "/thinking" in the text.
func TestRetargetStripsOnlyThePrefix(t *testing.T) {
	out, err := retarget([]byte(`{"model":"vera","messages":[
		{"role":"user","content":"/think old"},{"role":"assistant","content":"ok"},
		{"role":"user","content":"\n/think what does the \"/thinking\" flag do?"}],
		"tools":[{"type":"function","function":{"name":"t","description":"/think helper"}}],"options":{"seed":12345678901234567}}`), "big", true, true, ollamaChat)
	require.NoError(t, err)
	var got struct {
		Messages []struct{ Content string }
		Tools    []struct{ Function struct{ Description string } }
		Options  map[string]json.Number
	}
	require.NoError(t, json.Unmarshal(out, &got))
	assert.Equal(t, "/think old", got.Messages[0].Content)
	assert.Equal(t, `what does the "/thinking" flag do?`, got.Messages[2].Content)
	assert.Equal(t, "/think helper", got.Tools[0].Function.Description)
	assert.Equal(t, "12345678901234567", got.Options["seed"].String(), "numbers kept exact")

	out, err = retarget([]byte(`{"model":"vera","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}},{"type":"text","text":"/think why?"}]}]}`), "big", true, false, openAIChat)
	require.NoError(t, err)
	assert.Contains(t, string(out), `"text":"why?"`)
	out, err = retarget([]byte(`{"model":"vera","input":"/think why?"}`), "big", true, false, openAIResponses)
	require.NoError(t, err)
	assert.Contains(t, string(out), `"input":"why?"`)
}
