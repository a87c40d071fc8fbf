package tests

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/memory"
	"github.com/vera-proxy/vera/ollama/ollamatest"
	"github.com/vera-proxy/vera/tests/veratest"
)

// openAIClient is the official OpenAI Go client pointed at vera, as editors
// and scripts that use Ollama's OpenAI-compatible endpoint are.
func openAIClient(p *veratest.InProcess, ns string) openai.Client {
	return openai.NewClient(veratest.OpenAIOptions(p, ns, "")...)
}

// textOf returns the text of an OpenAI message content: a string or parts.
func textOf(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct{ Text string }
	require.NoError(t, json.Unmarshal(raw, &parts), "content %s", raw)
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

func TestMemoryOnOpenAIEndpoint(t *testing.T) {
	up := ollamatest.New(t)
	data := t.TempDir()
	p := veratest.Start(t, "VERA_OLLAMA_URL="+up.URL, "VERA_DATA_DIR="+data)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	alice := openAIClient(p, "alice")

	// A fact told through the OpenAI endpoint, streamed, with content parts.
	stream := alice.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
		Model: "llama3.2",
		Messages: []openai.ChatCompletionMessageParamUnion{
			openai.UserMessage([]openai.ChatCompletionContentPartUnionParam{
				openai.TextContentPart("My brother Teo keeps bees in Porto."),
				openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: "data:image/png;base64,aGVsbG8="}),
			}),
		},
	})
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	require.NoError(t, stream.Err())
	require.NoError(t, stream.Close())
	require.Len(t, acc.Choices, 1)
	assert.Equal(t, "Hello from Ollama", acc.Choices[0].Message.Content)

	// ...is recalled in a new conversation on /api/chat...
	veratest.RecallsEventually(t, p, up, "alice", "What does my brother keep?", "Teo keeps bees in Porto")

	// ...and on the OpenAI endpoint, not streamed, with the header saying
	// what was injected.
	var res *http.Response
	done, err := alice.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model: "llama3.2",
		Messages: []openai.ChatCompletionMessageParamUnion{
			openai.SystemMessage("Answer in one line."),
			openai.UserMessage("Where are my brother's bees?"),
		},
	}, option.WithResponseInto(&res))
	require.NoError(t, err)
	assert.Equal(t, "Hello from Ollama", done.Choices[0].Message.Content)
	assert.Regexp(t, regexp.MustCompile(`^semantic=[1-9]\d*; recent=\d+; rules=\d+; tokens=[1-9]\d*$`), res.Header.Get("X-Vera-Context"))
	fwd := up.LastV1(t)
	require.GreaterOrEqual(t, len(fwd.Messages), 2)
	assert.Equal(t, "system", fwd.Messages[0].Role)
	sys := textOf(t, fwd.Messages[0].Content)
	assert.True(t, strings.HasPrefix(sys, "Answer in one line."), "the caller's system message comes first: %q", sys)
	assert.Contains(t, sys, "Teo keeps bees in Porto")
	last := fwd.Messages[len(fwd.Messages)-1]
	assert.Equal(t, "Where are my brother's bees?", textOf(t, last.Content))

	// Another namespace sees nothing of it.
	bob := openAIClient(p, "bob")
	_, err = bob.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model:    "llama3.2",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Where are my brother's bees?")},
	})
	require.NoError(t, err)
	for _, m := range up.LastV1(t).Messages {
		assert.NotContains(t, string(m.Content), "Porto", "bob must not see alice's memory")
	}

	// The turn told through /v1 is stored with the text of its parts and
	// the answer that was streamed; X-Vera-Memory: off stores nothing.
	off := openAIClient(p, "private")
	_, err = off.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model:    "llama3.2",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("forget this")},
	}, option.WithHeader("X-Vera-Memory", "off"))
	require.NoError(t, err)
	p.Stop(t)
	db := veratest.OpenStore(t, data)
	page, _, err := db.Scroll(ctx, memory.Filter{Namespace: "alice"}, "", 100)
	require.NoError(t, err)
	pending, err := db.Pending(ctx, 100)
	require.NoError(t, err)
	var told int
	for _, m := range append(page, pending...) {
		u, a, ok := memory.ParseExchange(m.Text)
		require.True(t, ok)
		assert.Equal(t, "Hello from Ollama", a)
		if u == "My brother Teo keeps bees in Porto." {
			told++
		}
		assert.NotEqual(t, "private", m.Namespace)
	}
	assert.Equal(t, 1, told, "the /v1 turn is stored once")
	n, err := db.Count(ctx, memory.Filter{Namespace: "private"})
	require.NoError(t, err)
	assert.Zero(t, n)
}
