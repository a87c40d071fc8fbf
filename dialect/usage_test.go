package dialect

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// Every dialect reads the prompt's size the upstream reports, streamed or
// whole, as Ollama and the cloud APIs write it.
func TestAnswerReadsThePromptsSize(t *testing.T) {
	type reader interface {
		Read(*Answer, []byte)
		ReadWhole(*Answer, []byte)
	}
	for _, c := range []struct {
		name   string
		d      reader
		stream []string
		whole  string
	}{
		{"ollama chat", OllamaChat{}, []string{
			`{"model":"m","message":{"role":"assistant","content":"hi"},"done":false}`,
			`{"model":"m","message":{"role":"assistant","content":""},"done":true,"prompt_eval_count":1234,"eval_count":2}`,
		}, `{"model":"m","message":{"role":"assistant","content":"hi"},"done":true,"prompt_eval_count":1234}`},
		{"ollama generate", OllamaGenerate{}, []string{`{"response":"hi","done":true,"prompt_eval_count":1234}`},
			`{"response":"hi","done":true,"prompt_eval_count":1234}`},
		{"openai chat", OpenAIChat{}, []string{
			`{"choices":[{"index":0,"delta":{"content":"hi"}}]}`,
			`{"choices":[],"usage":{"prompt_tokens":1234,"completion_tokens":2}}`,
			`[DONE]`,
		}, `{"choices":[{"index":0,"message":{"content":"hi"}}],"usage":{"prompt_tokens":1234}}`},
		{"responses", OpenAIResponses{}, []string{
			`{"type":"response.output_text.delta","delta":"hi"}`,
			`{"type":"response.completed","response":{"id":"r","usage":{"input_tokens":1234,"output_tokens":2}}}`,
		}, `{"id":"r","status":"completed","output":[{"type":"message","content":[{"type":"output_text","text":"hi"}]}],"usage":{"input_tokens":1234}}`},
		{"anthropic", AnthropicMessages{}, []string{
			`{"type":"message_start","message":{"id":"m","usage":{"input_tokens":1234,"output_tokens":1}}}`,
			`{"type":"content_block_delta","delta":{"type":"text_delta","text":"hi"}}`,
			`{"type":"message_stop"}`,
		}, `{"type":"message","content":[{"type":"text","text":"hi"}],"usage":{"input_tokens":1234}}`},
		// Ollama's message_start holds an estimate (a quarter of the
		// request's bytes) until the count is known: message_delta's wins.
		{"anthropic from ollama", AnthropicMessages{}, []string{
			`{"type":"message_start","message":{"id":"m","usage":{"input_tokens":311,"output_tokens":1}}}`,
			`{"type":"content_block_delta","delta":{"type":"text_delta","text":"hi"}}`,
			`{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"input_tokens":1234,"output_tokens":2}}`,
			`{"type":"message_stop"}`,
		}, `{"type":"message","content":[{"type":"text","text":"hi"}],"usage":{"input_tokens":1234}}`},
	} {
		var a Answer
		for _, ev := range c.stream {
			c.d.Read(&a, []byte(ev))
		}
		assert.False(t, a.Failed, c.name)
		assert.Equal(t, 1234, a.PromptTokens, "%s, streamed", c.name)
		var w Answer
		c.d.ReadWhole(&w, []byte(c.whole))
		assert.False(t, w.Failed, c.name)
		assert.Equal(t, 1234, w.PromptTokens, "%s, whole", c.name)
	}
}
