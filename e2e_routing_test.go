package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ollama/ollama/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/ollama/ollamatest"
)

// routingVera starts vera with [routing] on three tier models.
func routingVera(t *testing.T, up *ollamatest.Server) *inProcess {
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
`), 0o644))
	return runInProcess(t, "VERA_OLLAMA_URL="+up.URL, "VERA_CONFIG_DIR="+conf, "VERA_PROMPTS_DIR="+t.TempDir())
}

// The virtual model through the official Ollama client: each message goes
// to its tier's model, the answer names "vera", X-Vera-Tier says what was
// used, the /think prefix is taken off with thinking on, vera-deep is
// always complex, a URL is never light, and ollama run / stop and the
// lists work for the virtual names.
func TestTierRouting(t *testing.T) {
	up := ollamatest.New(t)
	p := routingVera(t, up)
	ctx := context.Background()
	c := ollamaClient(t, p, "alice")
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

	res, err := http.Post("http://"+p.addr+"/api/chat", "application/json", strings.NewReader(`{"model":"vera","stream":false,"messages":[{"role":"user","content":"thanks!"}]}`))
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
}
