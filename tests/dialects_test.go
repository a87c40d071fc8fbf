package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/ollama/ollama/api"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/memory"
	"github.com/vera-proxy/vera/ollama/ollamatest"
	"github.com/vera-proxy/vera/tests/veratest"
)

func anthropicClient(p *veratest.InProcess, ns string) anthropic.Client {
	return anthropic.NewClient(
		aoption.WithBaseURL("http://"+p.Addr+"/"),
		aoption.WithAPIKey("ollama"),
		aoption.WithHeader("X-OpenWebUI-User-Id", ns),
		aoption.WithMaxRetries(0),
	)
}

// A fact told on any dialect is recalled on every other, through each
// dialect's official client; namespaces stay apart; thinking is not stored.
func TestMemoryAcrossDialects(t *testing.T) {
	up := ollamatest.NewDialects(t)
	data := t.TempDir()
	p := veratest.Start(t, "VERA_OLLAMA_URL="+up.URL, "VERA_DATA_DIR="+data)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// /api/generate, streamed, through the official Ollama client (what
	// `ollama run MODEL "prompt"` sends).
	generate := func(ns, prompt string) string {
		c := veratest.OllamaClient(t, p, ns)
		var out strings.Builder
		require.NoError(t, c.Generate(ctx, &api.GenerateRequest{Model: "llama3.2", Prompt: prompt}, func(r api.GenerateResponse) error {
			out.WriteString(r.Response)
			return nil
		}))
		return out.String()
	}
	// /v1/responses, streamed, through openai-go's Responses API.
	respond := func(ns, input string) string {
		c := openAIClient(p, ns)
		stream := c.Responses.NewStreaming(ctx, responses.ResponseNewParams{
			Model: "llama3.2", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(input)},
		})
		var out strings.Builder
		for stream.Next() {
			if e := stream.Current(); e.Type == "response.output_text.delta" {
				out.WriteString(e.Delta)
			}
		}
		require.NoError(t, stream.Err())
		return out.String()
	}
	// /v1/messages, streamed, through the official Anthropic Go client.
	message := func(ns, text string) string {
		c := anthropicClient(p, ns)
		stream := c.Messages.NewStreaming(ctx, anthropic.MessageNewParams{
			Model: "llama3.2", MaxTokens: 256,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(text))},
		})
		var out strings.Builder
		for stream.Next() {
			if d, ok := stream.Current().AsAny().(anthropic.ContentBlockDeltaEvent); ok {
				if td, ok := d.Delta.AsAny().(anthropic.TextDelta); ok {
					out.WriteString(td.Text)
				}
			}
		}
		require.NoError(t, stream.Err())
		return out.String()
	}

	assert.Equal(t, "Hello from Ollama", generate("alice", "My sister lives in Lisbon."))
	assert.Equal(t, "Hello from Ollama", message("alice", "My dog is called Biscuit."))
	assert.Equal(t, "Hello from Ollama", respond("alice", "I drive a red Fiat Panda."))

	// Each fact is recalled on the other dialects (memory lands
	// asynchronously: retry until it does).
	recalled := func(ask func() string, got func() string, want string) {
		t.Helper()
		require.Eventually(t, func() bool { ask(); return strings.Contains(got(), want) }, 10*time.Second, 50*time.Millisecond, "%q not recalled", want)
	}
	recalled(func() string { return respond("alice", "Where does my sister live?") },
		func() string { s, _ := up.Last(t, "/v1/responses")["instructions"].(string); return s }, "Lisbon")
	recalled(func() string { return generate("alice", "What is my dog called?") },
		func() string { s, _ := up.Last(t, "/api/generate")["system"].(string); return s }, "Biscuit")
	recalled(func() string { return message("alice", "What car do I drive?") },
		func() string { return fmt.Sprint(up.Last(t, "/v1/messages")["system"]) }, "Fiat")
	veratest.Chat(t, p, "alice", false, veratest.User("Where does my sister live, and what car do I drive?"))
	assert.Contains(t, veratest.SystemOf(up.Fake.LastChat(t)), "Lisbon", "/api/chat recalls what /api/generate was told")

	// Another namespace sees none of it, on any dialect.
	respond("bob", "Where does my sister live? What is my dog called? What car do I drive?")
	generate("bob", "Where does my sister live? What is my dog called? What car do I drive?")
	message("bob", "Where does my sister live? What is my dog called? What car do I drive?")
	for _, path := range []string{"/v1/responses", "/api/generate", "/v1/messages"} {
		for _, secret := range []string{"Lisbon", "Biscuit", "Fiat"} {
			assert.NotContains(t, up.LastRaw(path), secret, "bob on %s", path)
		}
	}

	p.Stop(t)
	db := veratest.OpenStore(t, data)
	page, _, err := db.Scroll(context.Background(), memory.Filter{Namespace: "alice"}, "", 100)
	require.NoError(t, err)
	var texts []string
	for _, m := range page {
		texts = append(texts, m.Text)
		assert.NotContains(t, m.Text, "let me think", "thinking is never stored")
	}
	for _, want := range []string{"User: My sister lives in Lisbon.\nAssistant: Hello from Ollama", "User: My dog is called Biscuit.\nAssistant: Hello from Ollama", "User: I drive a red Fiat Panda.\nAssistant: Hello from Ollama"} {
		n := 0
		for _, txt := range texts {
			if txt == want {
				n++
			}
		}
		assert.Equal(t, 1, n, "%q stored once", want)
	}
}

// Load and unload calls, and what vera must not touch, pass byte for byte
// on every dialect, and nothing is stored.
func TestDialectsPassUntouched(t *testing.T) {
	up := ollamatest.NewDialects(t)
	data := t.TempDir()
	p := veratest.Start(t, "VERA_OLLAMA_URL="+up.URL, "VERA_DATA_DIR="+data)
	for _, tc := range []struct{ path, body string }{
		{"/api/generate", `{"model":"llama3.2","prompt":"","keep_alive":0}`},
		{"/api/generate", `{"model":"llama3.2"}`},
		{"/api/generate", `{"model":"llama3.2","prompt":"<|im_start|>user\nhi","raw":true}`},
		{"/api/generate", `{"model":"llama3.2","prompt":"func main() {","suffix":"}"}`},
		{"/api/generate", `{"model":"llama3.2","prompt":"and then?","context":[1,2,3]}`},
		{"/v1/responses", `{"model":"llama3.2","input":[]}`},
		{"/v1/messages", `{"model":"llama3.2","max_tokens":1,"messages":[]}`},
	} {
		res, err := http.Post("http://"+p.Addr+tc.path, "application/json", strings.NewReader(tc.body))
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		assert.Equal(t, tc.body, up.LastRaw(tc.path), "byte for byte")
	}
	p.Stop(t)
	n, err := veratest.OpenStore(t, data).Count(context.Background(), memory.Filter{Namespace: "default"})
	require.NoError(t, err)
	assert.Zero(t, n, "nothing stored")
}

// Bad input gets a 400 in the dialect's own shape.
func TestDialectErrorShapes(t *testing.T) {
	up := ollamatest.NewDialects(t)
	p := veratest.Start(t, "VERA_OLLAMA_URL="+up.URL)
	post := func(path, body string) map[string]any {
		res, err := http.Post("http://"+p.Addr+path, "application/json", strings.NewReader(body))
		require.NoError(t, err)
		defer res.Body.Close()
		assert.Equal(t, http.StatusBadRequest, res.StatusCode, path)
		var m map[string]any
		require.NoError(t, json.NewDecoder(res.Body).Decode(&m))
		return m
	}
	assert.IsType(t, "", post("/api/generate", `{"model":`)["error"])
	e := post("/v1/responses", `{"model":"m","input":5}`)["error"].(map[string]any)
	assert.Equal(t, "invalid_request_error", e["type"])
	m := post("/v1/messages", `{"model":"m","messages":"hi"}`)
	assert.Equal(t, "error", m["type"])
	assert.Equal(t, "invalid_request_error", m["error"].(map[string]any)["type"])
	assert.NotContains(t, fmt.Sprint(m), "Go value")
}
