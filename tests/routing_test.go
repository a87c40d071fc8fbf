package tests

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ollama/ollama/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/ollama/ollamatest"
	"github.com/vera-proxy/vera/tests/veratest"
)

// routingVera starts vera with [routing] on three tier models, and more
// config (a [vram] section).
func routingVera(t *testing.T, up *ollamatest.Server, more string, env ...string) *veratest.InProcess {
	t.Helper()
	conf := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(conf, "config.toml"), []byte(`
[routing]
enabled = true
light = "qwen2.5:1.5b"
medium = "qwen3:4b"
complex = "qwen3:8b"
[routing.rules]
complex = ["(?i)quarterly report"]
`+more), 0o644))
	return veratest.Start(t, append([]string{"VERA_OLLAMA_URL=" + up.URL, "VERA_CONFIG_DIR=" + conf, "VERA_PROMPTS_DIR=" + t.TempDir()}, env...)...)
}

// The virtual model through the official Ollama client: each message goes
// to its tier's model, the answer names "vera", X-Vera-Tier says what was
// used, the /think prefix is taken off with thinking on, vera-deep is
// always complex, a URL is never light, and ollama run / stop and the
// lists work for the virtual names.
func TestTierRouting(t *testing.T) {
	up := ollamatest.New(t)
	logs := t.TempDir()
	p := routingVera(t, up, "", "VERA_DEBUG=true", "VERA_LOG_DIR="+logs)
	ctx := context.Background()
	c := veratest.OllamaClient(t, p, "alice")
	ask := func(model, msg string) (api.ChatRequest, string) {
		t.Helper()
		var answered string
		require.NoError(t, c.Chat(ctx, &api.ChatRequest{Model: model, Messages: []api.Message{{Role: "user", Content: msg}}}, func(r api.ChatResponse) error {
			answered = r.Model
			return nil
		}))
		return up.LastChat(t), answered
	}
	for msg, want := range map[string]string{
		"hello!":                             "qwen2.5:1.5b",
		"Write a short note to my landlord.": "qwen3:4b",
		"Prove that the square root of 3 is irrational.": "qwen3:8b",
		"Prepare the quarterly report":                   "qwen3:8b",
		"what is https://example.com?":                   "qwen3:4b",
		"привет":                                         "qwen2.5:1.5b",
	} {
		got, answered := ask("vera", msg)
		assert.Equal(t, want, got.Model, msg)
		assert.Equal(t, "vera", answered, "the answer names the model asked for")
	}
	got, _ := ask("vera", "/think what is 2+2?")
	assert.Equal(t, "qwen3:8b", got.Model)
	assert.Equal(t, "what is 2+2?", got.Messages[len(got.Messages)-1].Content, "the prefix is taken off")
	require.NotNil(t, got.Think)
	assert.True(t, got.Think.Bool(), "and thinking is on")
	got, answered := ask("vera-deep", "hi")
	assert.Equal(t, "qwen3:8b", got.Model)
	assert.Equal(t, "vera-deep", answered)

	res, err := http.Post("http://"+p.Addr+"/api/chat", "application/json", strings.NewReader(`{"model":"vera","stream":false,"messages":[{"role":"user","content":"thanks!"}]}`))
	require.NoError(t, err)
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	assert.Equal(t, "light qwen2.5:1.5b", res.Header.Get("X-Vera-Tier"))
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var rec struct{ Model string }
		require.NoError(t, json.Unmarshal([]byte(line), &rec))
		assert.Equal(t, "vera", rec.Model, "every record names vera")
	}

	// ollama run vera: the preload is vera's; ollama stop vera too.
	n := up.ChatCount()
	require.NoError(t, c.Chat(ctx, &api.ChatRequest{Model: "vera", Messages: []api.Message{}}, func(api.ChatResponse) error { return nil }))
	zero := api.Duration{}
	require.NoError(t, c.Generate(ctx, &api.GenerateRequest{Model: "vera", KeepAlive: &zero}, func(api.GenerateResponse) error { return nil }))
	assert.Equal(t, n, up.ChatCount(), "no model loaded for a virtual name")

	names := modelNames(t, c)
	list, err := c.List(ctx)
	require.NoError(t, err)
	for _, m := range list.Models {
		assert.GreaterOrEqual(t, len(m.Digest), 12, "ollama list shows 12 characters of %s's digest", m.Name)
	}
	assert.Contains(t, names, "vera")
	assert.Contains(t, names, "vera-deep")
	assert.Contains(t, names, "llama3.2:latest")
	show, err := c.Show(ctx, &api.ShowRequest{Model: "vera"})
	require.NoError(t, err)
	assert.Contains(t, show.Details.Family, "vera")

	// The debug log records each decision and why.
	require.Eventually(t, func() bool {
		files, _ := filepath.Glob(filepath.Join(logs, "debug_*.log"))
		for _, f := range files {
			b, _ := os.ReadFile(f)
			if strings.Contains(string(b), `"route":{"asked":"vera"`) && strings.Contains(string(b), `"by":"think"`) {
				return true
			}
		}
		return false
	}, 5*time.Second, 20*time.Millisecond)
}

// vramVera starts vera with routing and [vram] on the three tiers.
func vramVera(t *testing.T, up *ollamatest.Server, flushTimeout string) *veratest.InProcess {
	t.Helper()
	return routingVera(t, up, `
[vram]
enabled = true
large_models = ["qwen3:8b"]
poll_interval = "10ms"
flush_timeout = "`+flushTimeout+`"
`)
}

// Around a complex request: the other models unloaded (never the
// embedding model), ps shows them gone, the complex chat, then the complex
// model unloaded and the medium and light ones pre-warmed.
func TestVRAMAroundAComplexRequest(t *testing.T) {
	up := ollamatest.New(t)
	up.Sizes = map[string]int64{"qwen2.5:1.5b": 1500, "qwen3:4b": 3500, "qwen3:8b": 6500, "nomic-embed-text": 300}
	p := vramVera(t, up, "2s")
	up.Preload("qwen3:4b", "qwen2.5:1.5b", "nomic-embed-text")
	up.ResetTrace()
	require.NoError(t, veratest.OllamaClient(t, p, "alice").Chat(context.Background(), &api.ChatRequest{Model: "vera", Messages: []api.Message{{Role: "user", Content: "Prove that there are infinitely many primes."}}}, func(api.ChatResponse) error { return nil }))
	assert.Equal(t, "qwen3:8b", up.LastChat(t).Model)
	require.Eventually(t, func() bool {
		tr := up.Trace()
		return len(tr) > 0 && tr[len(tr)-1] == "load qwen2.5:1.5b"
	}, 5*time.Second, 10*time.Millisecond, "%v", up.Trace())
	tr := up.Trace()
	// Polls repeat: count each run of ps once.
	var order []string
	for _, c := range tr {
		if c == "ps" && len(order) > 0 && order[len(order)-1] == "ps" {
			continue
		}
		order = append(order, c)
	}
	assert.Equal(t, "ps", order[0])
	assert.ElementsMatch(t, []string{"unload qwen3:4b", "unload qwen2.5:1.5b"}, order[1:3])
	assert.Equal(t, []string{"ps", "chat qwen3:8b", "unload qwen3:8b", "load qwen3:4b", "load qwen2.5:1.5b"}, order[3:])
	assert.NotContains(t, tr, "unload nomic-embed-text")
}

// A flush that times out sends a routed chat to the medium tier, and says
// so.
func TestVRAMFlushTimeoutFallsBackToMedium(t *testing.T) {
	up := ollamatest.New(t)
	up.Sizes = map[string]int64{"qwen3:4b": 3500, "qwen3:8b": 6500}
	up.Sticky = map[string]bool{"qwen3:4b": true}
	p := vramVera(t, up, "100ms")
	up.Preload("qwen3:4b")
	res, err := http.Post("http://"+p.Addr+"/api/chat", "application/json", strings.NewReader(`{"model":"vera","messages":[{"role":"user","content":"Prove that there are infinitely many primes."}]}`))
	require.NoError(t, err)
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	assert.Equal(t, "flush-timeout", res.Header.Get("X-Vera-VRAM"))
	assert.Equal(t, "medium qwen3:4b", res.Header.Get("X-Vera-Tier"))
	assert.Equal(t, "qwen3:4b", up.LastChat(t).Model)

	// A chat that names the large model goes on to it, with the header.
	res, err = http.Post("http://"+p.Addr+"/api/chat", "application/json", strings.NewReader(`{"model":"qwen3:8b","messages":[{"role":"user","content":"hi"}]}`))
	require.NoError(t, err)
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	assert.Equal(t, "flush-timeout", res.Header.Get("X-Vera-VRAM"))
	assert.Equal(t, "qwen3:8b", up.LastChat(t).Model)
}
