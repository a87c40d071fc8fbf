package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ollama/ollama/api"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/memory"
	"github.com/vera-proxy/vera/ollama/ollamatest"
	"github.com/vera-proxy/vera/tests/veratest"
)

const cloudKey = "sk-or-test-9f8e7d6c5b4a"

// fakeProvider is an OpenAI-compatible provider: /models, and chat
// completions streamed as SSE (split mid-word and mid-rune, with a comment,
// reasoning, tool calls in pieces and usage last) or whole.
type fakeProvider struct {
	*httptest.Server
	mu     sync.Mutex
	bodies []map[string]any
	auths  []string
	// fail, when set, answers the next chats with that status (429 with
	// Retry-After: 0).
	fail     atomic.Int64
	failures atomic.Int64 // how many of them are left; -1: all
	// cut ends streams after their first words, without [DONE].
	cut atomic.Bool
	// window is the context_length /models gives; 0 means 200000.
	window atomic.Int64
}

func newFakeProvider(t *testing.T) *fakeProvider {
	f := &fakeProvider{}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/models", func(w http.ResponseWriter, r *http.Request) {
		window := f.window.Load()
		if window == 0 {
			window = 200000
		}
		fmt.Fprintf(w, `{"data":[{"id":"openai/gpt-big","context_length":%d,"architecture":{"input_modalities":["text","image"]},"supported_parameters":["tools","reasoning"]}]}`, window)
	})
	mux.HandleFunc("POST /api/v1/chat/completions", f.chat)
	f.Server = httptest.NewServer(mux)
	t.Cleanup(f.Close)
	return f
}

func (f *fakeProvider) last(t *testing.T) map[string]any {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	require.NotEmpty(t, f.bodies)
	return f.bodies[len(f.bodies)-1]
}

func (f *fakeProvider) chat(w http.ResponseWriter, r *http.Request) {
	var body map[string]any
	_ = json.NewDecoder(r.Body).Decode(&body)
	f.mu.Lock()
	f.bodies = append(f.bodies, body)
	f.auths = append(f.auths, r.Header.Get("Authorization"))
	f.mu.Unlock()
	if code := f.fail.Load(); code != 0 && f.failures.Load() != 0 {
		f.failures.Add(-1)
		if code == http.StatusTooManyRequests {
			w.Header().Set("Retry-After", "0")
		}
		w.WriteHeader(int(code))
		fmt.Fprintf(w, `{"error":{"message":"provider says %d","code":%d}}`, code, code)
		return
	}
	_, tools := body["tools"]
	if body["stream"] != true {
		msg := `{"role":"assistant","content":"Bom dia, café!","reasoning":"Let me think."}`
		if tools {
			msg = `{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"weather","arguments":"{\"city\":\"Lisbon\"}"}}]}`
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"gen-1","object":"chat.completion","choices":[{"index":0,"message":%s,"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":5}}`, msg)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	fl := w.(http.Flusher)
	send := func(s string) { io.WriteString(w, s); fl.Flush() }
	send(": OPENROUTER PROCESSING\n\n")
	send(`data: {"choices":[{"index":0,"delta":{"role":"assistant","reasoning":"Let me th"}}]}` + "\n\n")
	send(`data: {"choices":[{"index":0,"delta":{"reasoning":"ink."}}]}` + "\n\n")
	if tools {
		send(`data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"weather","arguments":"{\"ci"}}]}}]}` + "\n\n")
		send(`data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"ty\":\"Lisbon\"}"}}]}}]}` + "\n\n")
		send(`data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":12,"completion_tokens":5}}` + "\n\n")
	} else {
		send(`data: {"choices":[{"index":0,"delta":{"content":"Bom d"}}]}` + "\n\n")
		if f.cut.Load() {
			return
		}
		send(`data: {"choices":[{"index":0,"delta":{"content":"ia, caf` + "\xc3")
		send("\xa9" + `!"}}]}` + "\n\n")
		send(`data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":5}}` + "\n\n")
	}
	send("data: [DONE]\n\n")
}

// cloudVera starts vera with [cloud] pointing at provider, its key in the
// environment.
func cloudVera(t *testing.T, ollamaURL string, provider *fakeProvider, data, extra string) *veratest.InProcess {
	t.Helper()
	conf := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(conf, "config.toml"), []byte(fmt.Sprintf(`
[cloud]
enabled = true
api_base = "%s/api/v1"
api_key_env = "TEST_CLOUD_KEY"
%s
[cloud.models]
"gpt-big" = "openai/gpt-big"
[cloud.headers]
"X-Title" = "vera tests"
`, provider.URL, extra)), 0o644))
	return veratest.Start(t, "VERA_OLLAMA_URL="+ollamaURL, "VERA_CONFIG_DIR="+conf, "VERA_DATA_DIR="+data, "TEST_CLOUD_KEY="+cloudKey, "VERA_DEBUG=true", "VERA_LOG_DIR="+data)
}

// A cloud model through the official Ollama client, as `ollama run
// gpt-big` drives it: load, a streamed chat with memory, tools, thinking,
// unload; the key reaches the provider and nothing else.
func TestCloudModelThroughOllamaClient(t *testing.T) {
	up := ollamatest.New(t)
	provider := newFakeProvider(t)
	data := t.TempDir()
	p := cloudVera(t, up.URL, provider, data, "")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := veratest.OllamaClient(t, p, "alice")

	// Memory to inject: a fact told to a local model.
	veratest.Chat(t, p, "alice", false, veratest.User("My sister Ana lives in Lisbon."))
	veratest.Settled(t, p)

	// ollama run gpt-big: the preload, answered by vera itself.
	calls := func() int { provider.mu.Lock(); defer provider.mu.Unlock(); return len(provider.bodies) }
	require.NoError(t, c.Chat(ctx, &api.ChatRequest{Model: "gpt-big", Messages: []api.Message{}}, func(api.ChatResponse) error { return nil }))
	assert.Zero(t, calls(), "a load call never reaches the cloud")

	var text, thinking strings.Builder
	require.NoError(t, c.Chat(ctx, &api.ChatRequest{Model: "gpt-big", Messages: []api.Message{{Role: "user", Content: "Where does my sister live?"}}}, func(r api.ChatResponse) error {
		text.WriteString(r.Message.Content)
		thinking.WriteString(r.Message.Thinking)
		if r.Done {
			assert.Equal(t, 12, r.PromptEvalCount)
			assert.Equal(t, 5, r.EvalCount)
			assert.Equal(t, "gpt-big", r.Model)
		}
		return nil
	}))
	assert.Equal(t, "Bom dia, café!", text.String())
	assert.Equal(t, "Let me think.", thinking.String())
	sent := provider.last(t)
	assert.Equal(t, "openai/gpt-big", sent["model"])
	assert.Contains(t, fmt.Sprint(sent["messages"]), "Ana lives in Lisbon", "memory went with the chat")
	provider.mu.Lock()
	assert.Equal(t, "Bearer "+cloudKey, provider.auths[len(provider.auths)-1])
	provider.mu.Unlock()

	// Tools.
	var got []api.ToolCall
	tools := api.Tools{{Type: "function", Function: api.ToolFunction{Name: "weather", Parameters: api.ToolFunctionParameters{Type: "object"}}}}
	require.NoError(t, c.Chat(ctx, &api.ChatRequest{Model: "gpt-big", Tools: tools, Messages: []api.Message{{Role: "user", Content: "weather in Lisbon?"}}}, func(r api.ChatResponse) error {
		got = append(got, r.Message.ToolCalls...)
		return nil
	}))
	require.Len(t, got, 1)
	assert.Equal(t, "weather", got[0].Function.Name)
	city, _ := got[0].Function.Arguments.Get("city")
	assert.Equal(t, "Lisbon", city)

	// Not streamed.
	stream := false
	require.NoError(t, c.Chat(ctx, &api.ChatRequest{Model: "gpt-big", Stream: &stream, Messages: []api.Message{{Role: "user", Content: "hello"}}}, func(r api.ChatResponse) error {
		assert.Equal(t, "Bom dia, café!", r.Message.Content)
		assert.True(t, r.Done)
		return nil
	}))

	// ollama stop gpt-big.
	zero := api.Duration{}
	n := calls()
	require.NoError(t, c.Generate(ctx, &api.GenerateRequest{Model: "gpt-big", KeepAlive: &zero}, func(r api.GenerateResponse) error {
		assert.Equal(t, "unload", r.DoneReason)
		return nil
	}))
	assert.Equal(t, n, calls())

	// Lists, with Ollama up.
	names := modelNames(t, c)
	assert.Contains(t, names, "gpt-big")
	assert.Contains(t, names, "llama3.2:latest")
	show, err := c.Show(ctx, &api.ShowRequest{Model: "gpt-big"})
	require.NoError(t, err)
	assert.Equal(t, "[completion tools thinking vision]", fmt.Sprint(show.Capabilities))
	assert.EqualValues(t, 200000, show.ModelInfo["cloud.context_length"])

	// The turns are stored, without the thinking; the key is nowhere.
	res, err := http.Get("http://" + p.Addr + "/healthz")
	require.NoError(t, err)
	health, _ := io.ReadAll(res.Body)
	res.Body.Close()
	p.Stop(t)
	page, _, err := veratest.OpenStore(t, data).Scroll(context.Background(), memory.Filter{Namespace: "alice"}, "", 100)
	require.NoError(t, err)
	var stored []string
	for _, m := range page {
		stored = append(stored, m.Text)
	}
	assert.Contains(t, stored, "User: Where does my sister live?\nAssistant: Bom dia, café!")
	for _, s := range stored {
		assert.NotContains(t, s, "Let me think")
	}
	logs, _ := filepath.Glob(filepath.Join(data, "debug_*.log"))
	require.NotEmpty(t, logs, "the debug log was written")
	var debug []byte
	for _, l := range logs {
		b, _ := os.ReadFile(l)
		debug = append(debug, b...)
	}
	assert.Contains(t, string(debug), "gpt-big")
	for what, text := range map[string]string{"log": p.Logs(), "healthz": string(health), "debug log": string(debug)} {
		assert.NotContains(t, text, cloudKey, "the key in the %s", what)
	}
}

// cloud.inject_memory = false: nothing remembered reaches the provider,
// and the turn is still stored here.
func TestCloudWithoutMemory(t *testing.T) {
	up := ollamatest.New(t)
	provider := newFakeProvider(t)
	data := t.TempDir()
	p := cloudVera(t, up.URL, provider, data, "inject_memory = false")
	veratest.Chat(t, p, "alice", false, veratest.User("My sister Ana lives in Lisbon."))
	veratest.Settled(t, p)
	ctx := context.Background()
	require.NoError(t, veratest.OllamaClient(t, p, "alice").Chat(ctx, &api.ChatRequest{Model: "gpt-big", Messages: []api.Message{{Role: "user", Content: "Where does my sister live?"}}}, func(api.ChatResponse) error { return nil }))
	sent := fmt.Sprint(provider.last(t)["messages"])
	assert.NotContains(t, sent, "Lisbon")
	assert.Equal(t, "[map[content:Where does my sister live? role:user]]", sent, "the client's messages, nothing added")
	// A local model still gets memory. (Another question: the same one
	// asked again within minutes, without a chat id, would be taken for a
	// regenerate of the cloud turn, whichever model answers it.)
	veratest.Chat(t, p, "alice", false, veratest.User("Where does Ana live?"))
	assert.Contains(t, veratest.SystemOf(up.LastChat(t)), "Lisbon")
	p.Stop(t)
	page, _, err := veratest.OpenStore(t, data).Scroll(ctx, memory.Filter{Namespace: "alice"}, "", 100)
	require.NoError(t, err)
	var stored []string
	for _, m := range page {
		stored = append(stored, m.Text)
	}
	assert.Contains(t, stored, "User: Where does my sister live?\nAssistant: Bom dia, café!", "the cloud turn is stored here")
}

// The provider's errors reach the Ollama client with their status and the
// provider's name; a 429 before any byte is retried; lists work with
// Ollama down.
func TestCloudErrorsAndOllamaDown(t *testing.T) {
	up := ollamatest.New(t)
	provider := newFakeProvider(t)
	p := cloudVera(t, up.URL, provider, t.TempDir(), "")
	ctx := context.Background()
	c := veratest.OllamaClient(t, p, "alice")
	ask := func() error {
		return c.Chat(ctx, &api.ChatRequest{Model: "gpt-big", Messages: []api.Message{{Role: "user", Content: "hi"}}}, func(api.ChatResponse) error { return nil })
	}

	provider.fail.Store(http.StatusTooManyRequests)
	provider.failures.Store(2)
	require.NoError(t, ask(), "two 429s with Retry-After: 0, then an answer")
	families, _ := scrape(t, p)
	assert.EqualValues(t, 2, metricValue(families, "vera_cloud_requests_total", map[string]string{"status": "4xx"}))
	assert.EqualValues(t, 1, metricValue(families, "vera_cloud_requests_total", map[string]string{"status": "2xx"}))
	assert.EqualValues(t, 2, metricValue(families, "vera_cloud_retries_total", nil))
	assert.EqualValues(t, 1, metricValue(families, "vera_upstream_duration_seconds", map[string]string{"upstream": "cloud", "status": "200"}))

	for code, status := range map[int]int{http.StatusUnauthorized: 502, http.StatusForbidden: 502, http.StatusNotFound: 404, http.StatusInternalServerError: 502, http.StatusTooManyRequests: 429} {
		provider.fail.Store(int64(code))
		provider.failures.Store(-1)
		err := ask()
		var se api.StatusError
		require.ErrorAs(t, err, &se, "status %d", code)
		assert.Equal(t, status, se.StatusCode)
		assert.Contains(t, se.ErrorMessage, "cloud provider 127.0.0.1")
		assert.Contains(t, se.ErrorMessage, fmt.Sprintf("provider says %d", code))
		assert.NotContains(t, se.ErrorMessage, cloudKey)
	}
	provider.fail.Store(0)

	// The stream breaks after its first words: the client gets an error,
	// never a clean end.
	provider.cut.Store(true)
	var words strings.Builder
	err := c.Chat(ctx, &api.ChatRequest{Model: "gpt-big", Messages: []api.Message{{Role: "user", Content: "hi"}}}, func(r api.ChatResponse) error {
		words.WriteString(r.Message.Content)
		assert.False(t, r.Done)
		return nil
	})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "ended before the answer did")
	assert.Equal(t, "Bom d", words.String())
	provider.cut.Store(false)

	up.Close() // Ollama goes away: the cloud names are still listed
	list, err := c.List(ctx)
	require.NoError(t, err)
	require.Len(t, list.Models, 1)
	assert.Equal(t, "gpt-big", list.Models[0].Name)
	res, err := http.Get("http://" + p.Addr + "/v1/models")
	require.NoError(t, err)
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	assert.Contains(t, string(b), `"id":"gpt-big"`)
	require.NoError(t, ask(), "and served")
	assert.NotContains(t, p.Logs(), cloudKey)
}

// With fallback_model set and Ollama unreachable, a chat for a local model
// is answered by the cloud model, says so in X-Vera-Fallback, and
// /healthz and the log say it too.
func TestCloudFallbackWhileOllamaIsDown(t *testing.T) {
	provider := newFakeProvider(t)
	down := httptest.NewServer(http.NotFoundHandler())
	downURL := down.URL
	down.Close() // nothing listens there now
	p := cloudVera(t, downURL, provider, t.TempDir(), `fallback_model = "gpt-big"`)
	var text strings.Builder
	require.NoError(t, veratest.OllamaClient(t, p, "alice").Chat(context.Background(), &api.ChatRequest{Model: "llama3.2", Messages: []api.Message{{Role: "user", Content: "hi"}}}, func(r api.ChatResponse) error {
		text.WriteString(r.Message.Content)
		return nil
	}))
	assert.Equal(t, "Bom dia, café!", text.String())
	assert.Equal(t, "openai/gpt-big", provider.last(t)["model"])
	// With memory: the fallback gets it, as the local model would have.
	veratest.Chat(t, p, "alice", false, veratest.User("My sister Ana lives in Lisbon."))
	veratest.Settled(t, p)
	veratest.Chat(t, p, "alice", false, veratest.User("Where does my sister live?"))
	assert.Contains(t, fmt.Sprint(provider.last(t)["messages"]), "Ana lives in Lisbon")
	res, err := http.Post("http://"+p.Addr+"/api/chat", "application/json", strings.NewReader(`{"model":"llama3.2","stream":false,"messages":[{"role":"user","content":"hi"}]}`))
	require.NoError(t, err)
	reply, _ := io.ReadAll(res.Body)
	res.Body.Close()
	assert.Equal(t, http.StatusOK, res.StatusCode)
	assert.Equal(t, "gpt-big", res.Header.Get("X-Vera-Fallback"))
	var answer struct{ Model string }
	require.NoError(t, json.Unmarshal(reply, &answer))
	assert.Equal(t, "llama3.2", answer.Model, "the answer names the model the client asked for")
	res, err = http.Get("http://" + p.Addr + "/healthz")
	require.NoError(t, err)
	var h struct {
		Cloud struct {
			FallbackModel  string `json:"fallback_model"`
			FallbackActive bool   `json:"fallback_active"`
			KeySet         bool   `json:"key_set"`
		} `json:"cloud"`
	}
	require.NoError(t, json.NewDecoder(res.Body).Decode(&h))
	res.Body.Close()
	assert.Equal(t, "gpt-big", h.Cloud.FallbackModel)
	assert.True(t, h.Cloud.FallbackActive)
	assert.True(t, h.Cloud.KeySet)
	assert.Contains(t, p.Logs(), "fallback cloud model")
	assert.NotContains(t, p.Logs(), cloudKey)
}

// The OpenAI dialects reach the provider with the model mapped and
// memory injected; /api/generate is translated; /v1/messages gets a 400
// in Anthropic's shape that says why.
func TestCloudOtherDialects(t *testing.T) {
	up := ollamatest.New(t)
	provider := newFakeProvider(t)
	p := cloudVera(t, up.URL, provider, t.TempDir(), "")
	veratest.Chat(t, p, "alice", false, veratest.User("My sister Ana lives in Lisbon."))
	veratest.Settled(t, p)
	ctx := context.Background()

	oc := openai.NewClient(veratest.OpenAIOptions(p, "alice", "")...)
	res, err := oc.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "gpt-big", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Where does my sister live?")}})
	require.NoError(t, err)
	assert.Equal(t, "Bom dia, café!", res.Choices[0].Message.Content)
	sent := provider.last(t)
	assert.Equal(t, "openai/gpt-big", sent["model"])
	assert.Contains(t, fmt.Sprint(sent["messages"]), "Ana lives in Lisbon")

	_, err = oc.Responses.New(ctx, responses.ResponseNewParams{Model: "gpt-big", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}})
	var apiErr *openai.Error
	require.ErrorAs(t, err, &apiErr)
	assert.Equal(t, http.StatusBadRequest, apiErr.StatusCode)
	assert.Contains(t, apiErr.Message, "does not serve the Responses API")

	var out strings.Builder
	require.NoError(t, veratest.OllamaClient(t, p, "alice").Generate(ctx, &api.GenerateRequest{Model: "gpt-big", Prompt: "Where does my sister live?"}, func(r api.GenerateResponse) error {
		out.WriteString(r.Response)
		return nil
	}))
	assert.Equal(t, "Bom dia, café!", out.String())
	msgs := provider.last(t)["messages"].([]any)
	assert.Equal(t, "Where does my sister live?", msgs[len(msgs)-1].(map[string]any)["content"])

	hres, err := http.Post("http://"+p.Addr+"/v1/messages", "application/json", strings.NewReader(`{"model":"gpt-big","max_tokens":9,"messages":[{"role":"user","content":"hi"}]}`))
	require.NoError(t, err)
	b, _ := io.ReadAll(hres.Body)
	hres.Body.Close()
	assert.Equal(t, http.StatusBadRequest, hres.StatusCode)
	assert.Contains(t, string(b), `"type":"invalid_request_error"`)
	assert.Contains(t, string(b), "not on /v1/messages")
}

// Memory for a cloud model is sized by the provider's context_length: a
// window too small for more than the chat gets none.
func TestCloudWindowSizesMemory(t *testing.T) {
	up := ollamatest.New(t)
	provider := newFakeProvider(t)
	provider.window.Store(700)
	p := cloudVera(t, up.URL, provider, t.TempDir(), "")
	veratest.Chat(t, p, "alice", false, veratest.User("My sister Ana lives in Lisbon."))
	veratest.Settled(t, p)
	long := strings.Repeat("Tell me where my sister lives, please. ", 50) // about 450 tokens
	require.NoError(t, veratest.OllamaClient(t, p, "alice").Chat(context.Background(), &api.ChatRequest{Model: "gpt-big", Messages: []api.Message{{Role: "user", Content: long}}}, func(api.ChatResponse) error { return nil }))
	assert.NotContains(t, fmt.Sprint(provider.last(t)["messages"]), "Lisbon", "a 700-token window has no room for memory beside this message")
	// The same chat for a local model (a 131072-token window) gets it.
	veratest.Chat(t, p, "alice", false, veratest.User(long))
	assert.Contains(t, veratest.SystemOf(up.LastChat(t)), "Lisbon")
}

// modelNames lists the names of /api/tags through the client.
func modelNames(t *testing.T, c *api.Client) []string {
	t.Helper()
	list, err := c.List(context.Background())
	require.NoError(t, err)
	var names []string
	for _, m := range list.Models {
		names = append(names, m.Name)
	}
	return names
}

// A tier model may be a cloud name: the complex tier answered by the
// provider, the answer naming the virtual model.
func TestCloudTier(t *testing.T) {
	up := ollamatest.New(t)
	provider := newFakeProvider(t)
	p := cloudVera(t, up.URL, provider, t.TempDir(), "\n[routing]\nenabled = true\nlight = \"llama3.2\"\nmedium = \"llama3.2\"\ncomplex = \"gpt-big\"\n")
	var model, text string
	require.NoError(t, veratest.OllamaClient(t, p, "alice").Chat(context.Background(), &api.ChatRequest{Model: "vera", Messages: []api.Message{{Role: "user", Content: "Prove that there are infinitely many primes."}}}, func(r api.ChatResponse) error {
		model, text = r.Model, text+r.Message.Content
		return nil
	}))
	assert.Equal(t, "Bom dia, café!", text)
	assert.Equal(t, "vera", model)
	assert.Equal(t, "openai/gpt-big", provider.last(t)["model"])
}

// Under cloud.inject_memory = false, a chat the fallback model answers
// while Ollama is down sends no memory, and X-Vera-Context says so: the
// headers come from the plan that answered, not the local one.
func TestFallbackReportsTheMemoryItSent(t *testing.T) {
	provider := newFakeProvider(t)
	down := httptest.NewServer(http.NotFoundHandler())
	downURL := down.URL
	down.Close()
	for _, tc := range []struct {
		name   string
		inject bool
	}{{"memory kept local", false}, {"memory sent", true}} {
		t.Run(tc.name, func(t *testing.T) {
			p := cloudVera(t, downURL, provider, t.TempDir(), fmt.Sprintf("fallback_model = \"gpt-big\"\ninject_memory = %v", tc.inject))
			require.Equal(t, http.StatusCreated, veratest.AdminCall(t, p, "", "POST", "/memories", `{"namespace":"alice","text":"My sister Ana lives in Lisbon."}`, nil))
			req, _ := http.NewRequest("POST", "http://"+p.Addr+"/api/chat", strings.NewReader(`{"model":"llama3.2","stream":false,"messages":[{"role":"user","content":"Where does my sister Ana live?"}]}`))
			req.Header.Set("X-OpenWebUI-User-Id", "alice")
			res, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
			require.Equal(t, http.StatusOK, res.StatusCode)
			assert.Equal(t, "gpt-big", res.Header.Get("X-Vera-Fallback"))
			sent := fmt.Sprint(provider.last(t)["messages"])
			if tc.inject {
				assert.Contains(t, sent, "Ana lives in Lisbon")
				assert.Contains(t, res.Header.Get("X-Vera-Context"), "semantic=1;")
				assert.NotEmpty(t, res.Header.Get("X-Vera-Memories"))
				return
			}
			assert.NotContains(t, sent, "Lisbon")
			assert.Equal(t, "semantic=0; recent=0; rules=0; tokens=0", res.Header.Get("X-Vera-Context"))
			assert.Empty(t, res.Header.Get("X-Vera-Memories"))
		})
	}
}

// Under cloud.inject_memory = false a cloud chat still belongs to its
// conversation: a regenerate replaces the turn it redoes.
func TestCloudRegenerateIsStoredOnce(t *testing.T) {
	up := ollamatest.New(t)
	provider := newFakeProvider(t)
	data := t.TempDir()
	p := cloudVera(t, up.URL, provider, data, "inject_memory = false")
	for _, chatID := range []string{"chat-9", ""} {
		for range 2 { // the question, then its regenerate
			req, _ := http.NewRequest("POST", "http://"+p.Addr+"/api/chat", strings.NewReader(`{"model":"gpt-big","stream":false,"messages":[{"role":"user","content":"What is my dog called, `+chatID+`?"}]}`))
			req.Header.Set("X-OpenWebUI-User-Id", "alice")
			if chatID != "" {
				req.Header.Set("X-OpenWebUI-Chat-Id", chatID)
			}
			res, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
			require.Equal(t, http.StatusOK, res.StatusCode)
		}
	}
	p.Stop(t)
	page, _, err := veratest.OpenStore(t, data).Scroll(context.Background(), memory.Filter{Namespace: "alice", Types: []memory.Type{memory.Raw}}, "", 100)
	require.NoError(t, err)
	var texts []string
	for _, m := range page {
		texts = append(texts, m.Text)
	}
	assert.Len(t, texts, 2, "one turn per question: %q", texts)
}
