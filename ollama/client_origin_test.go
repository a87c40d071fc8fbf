package ollama_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/ollama"
	"github.com/vera-proxy/vera/ollama/ollamatest"
)

func originClient(t *testing.T, raw string) *ollama.Client {
	t.Helper()
	base, err := url.Parse(raw)
	require.NoError(t, err)
	return ollama.New(base, http.DefaultTransport)
}

// AllowsOrigin reads Ollama's answer to a page of an origin: the fake
// refuses origins as Ollama does (its defaults plus OLLAMA_ORIGINS).
func TestAllowsOriginAsOllamaAnswers(t *testing.T) {
	fake := ollamatest.New(t)
	c := originClient(t, fake.URL)
	tests := []struct {
		name    string
		origins []string // OLLAMA_ORIGINS
		origin  string
		want    bool
	}{
		{"localhost", nil, "http://localhost", true},
		{"localhost with a port", nil, "http://localhost:5173", true},
		{"127.0.0.1 over https with a port", nil, "https://127.0.0.1:8443", true},
		{"0.0.0.0", nil, "http://0.0.0.0:3000", true},
		{"a desktop app", nil, "app://obsidian.md", true},
		{"a file page", nil, "file://", true},
		{"tauri", nil, "tauri://localhost", true},
		{"a VS Code webview", nil, "vscode-webview://1234", true},
		{"a VS Code file", nil, "vscode-file://vscode-app", true},
		{"the same origin", nil, fake.URL, true},
		{"a web site", nil, "https://evil.example", false},
		{"a name that starts as localhost", nil, "http://localhost.evil.example", false},
		{"a browser extension", nil, "chrome-extension://abcdef", false},
		{"null", nil, "null", false},
		{"extensions allowed", []string{"chrome-extension://*"}, "chrome-extension://abcdef", true},
		{"another extension", []string{"chrome-extension://abcdef"}, "chrome-extension://ghijkl", false},
		{"a suffix", []string{"https://*.example.com"}, "https://app.example.com", true},
		{"not the suffix", []string{"https://*.example.com"}, "https://app.example.org", false},
		{"two patterns, the second matching", []string{"moz-extension://*", " https://app.example.com"}, "https://app.example.com", true},
		{"every origin", []string{"*"}, "https://evil.example", true},
		{"every origin, null too", []string{"*"}, "null", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake.Origins = tt.origins
			got, err := c.AllowsOrigin(context.Background(), tt.origin)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got, tt.origin)
		})
	}
}

// The fake answers as Ollama's gin-contrib/cors does: 403 with an empty
// body; a request without an Origin passes.
func TestFakeOllamaRefusesOriginsWithAnEmpty403(t *testing.T) {
	fake := ollamatest.New(t)
	get := func(origin string) (int, string) {
		req, err := http.NewRequest(http.MethodGet, fake.URL+"/api/tags", nil)
		require.NoError(t, err)
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		body, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		return res.StatusCode, string(body)
	}
	code, body := get("https://evil.example")
	assert.Equal(t, http.StatusForbidden, code)
	assert.Empty(t, body)
	code, body = get("")
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, "llama3.2:latest")
	code, body = get("http://localhost:5173")
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, "llama3.2:latest")
}

// Any answer but 403 or 2xx is no answer to the question.
func TestAllowsOriginFailsOnOtherAnswers(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		assert.Equal(t, "/api/version", r.URL.Path)
		assert.Equal(t, "chrome-extension://x", r.Header.Get("Origin"))
		http.Error(w, "bad gateway", http.StatusBadGateway)
	}))
	t.Cleanup(srv.Close)
	ok, err := originClient(t, srv.URL).AllowsOrigin(context.Background(), "chrome-extension://x")
	require.Error(t, err)
	assert.False(t, ok)
	assert.Contains(t, err.Error(), "502")

	srv.Close()
	_, err = originClient(t, srv.URL).AllowsOrigin(context.Background(), "chrome-extension://x")
	assert.Error(t, err, "Ollama down")
}
