package admin

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/ollama"
	"github.com/vera-proxy/vera/ollama/ollamatest"
)

// newFakeOllama returns an Ollama that answers its version.
func newFakeOllama(t *testing.T) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/version", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"version":"0.12.3"}`)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// startAdmin serves vera's own routes, probing the Ollama at upstream, and
// returns their URL.
func startAdmin(t *testing.T, upstream string, configure func(*Server)) string {
	t.Helper()
	s := newTestServer(t, upstream)
	if configure != nil {
		configure(s)
	}
	srv := httptest.NewServer(handler(s))
	t.Cleanup(srv.Close)
	return srv.URL
}

// getHealth returns /healthz as raw text and decoded.
func getHealth(t *testing.T, base string) (string, Health) {
	t.Helper()
	res, err := http.Get(base + "/healthz")
	require.NoError(t, err)
	defer res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	raw, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	var h Health
	require.NoError(t, json.Unmarshal(raw, &h))
	return string(raw), h
}

func TestHealthz(t *testing.T) {
	up := newFakeOllama(t)
	base := startAdmin(t, up.URL, nil)
	var h Health
	res, err := http.Get(base + "/healthz")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.NoError(t, json.NewDecoder(res.Body).Decode(&h))
	res.Body.Close()
	assert.Equal(t, "ok", h.Status)
	assert.Equal(t, "test", h.Version)
	assert.True(t, h.Ollama.OK)
	assert.Equal(t, "0.12.3", h.Ollama.Version)

	up.Close()
	res, err = http.Get(base + "/healthz")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, res.StatusCode, "degraded still serves")
	require.NoError(t, json.NewDecoder(res.Body).Decode(&h))
	res.Body.Close()
	assert.Equal(t, "degraded", h.Status)
	assert.False(t, h.Ollama.OK)
	assert.NotEmpty(t, h.Ollama.Error)
}

func TestHealthzEmbedderIsDownWithOllama(t *testing.T) {
	healthy := func(context.Context) (StoreHealth, EmbedderHealth) {
		// What the memory stack says once it has learnt the vector size
		// at start: it does not ask Ollama again.
		return StoreHealth{OK: true, Backend: "embedded"}, EmbedderHealth{OK: true, Model: "nomic-embed-text", Dim: 768}
	}
	up := newFakeOllama(t)
	base := startAdmin(t, up.URL, func(s *Server) { s.MemoryHealth = healthy })
	_, h := getHealth(t, base)
	assert.Equal(t, "ok", h.Status)
	require.NotNil(t, h.Embedder)
	assert.True(t, h.Embedder.OK)

	up.Close()
	_, h = getHealth(t, base)
	assert.Equal(t, "degraded", h.Status)
	assert.False(t, h.Ollama.OK)
	require.NotNil(t, h.Embedder)
	assert.False(t, h.Embedder.OK, "the embedder runs on Ollama")
	assert.Contains(t, h.Embedder.Error, "ollama unreachable")
	assert.Equal(t, "nomic-embed-text", h.Embedder.Model)
	require.NotNil(t, h.Store)
	assert.True(t, h.Store.OK, "the store does not need Ollama")
}

func TestHealthzHidesSecretsOfTheOllamaURL(t *testing.T) {
	up := newFakeOllama(t)
	host := strings.TrimPrefix(up.URL, "http://")
	dead := ollamatest.DeadAddr(t)
	memHealth := func(context.Context) (StoreHealth, EmbedderHealth) {
		// The embedder's error quotes the URL it posted to.
		return StoreHealth{OK: true, Backend: "embedded"}, EmbedderHealth{Model: "nomic-embed-text",
			Error: `embedder: Post "http://user:***@` + host + `/api/embed?api_key=k3y-secret": EOF`}
	}
	tests := []struct{ name, upstream, shown string }{
		{"up", "http://user:s3cret@" + host + "?api_key=k3y-secret", "http://user:xxxxx@" + host + "?api_key=xxxxx"},
		{"down", "http://user:s3cret@" + dead + "?api_key=k3y-secret", "http://user:xxxxx@" + dead + "?api_key=xxxxx"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := startAdmin(t, tt.upstream, func(s *Server) { s.MemoryHealth = memHealth })
			raw, h := getHealth(t, base)
			assert.NotContains(t, raw, "s3cret")
			assert.NotContains(t, raw, "k3y-secret")
			assert.Equal(t, tt.shown, h.Ollama.URL)
			assert.Equal(t, tt.name == "up", h.Ollama.OK, h.Ollama.Error)
		})
	}
}

func TestProbeOllama(t *testing.T) {
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, `{"error":"server busy"}`)
	}))
	t.Cleanup(failing.Close)
	up := newFakeOllama(t)
	dead := ollamatest.DeadAddr(t)
	tests := []struct {
		name, base string
		ok         bool
		version    string
		errs       []string
	}{
		{"up", up.URL, true, "0.12.3", nil},
		{"an error status", failing.URL, false, "", []string{"GET /api/version: 503 Service Unavailable: server busy"}},
		{"refused, secrets hidden", "http://user:s3cret@" + dead + "?token=t0ken-secret", false, "",
			[]string{"http://user:xxxxx@" + dead + "/api/version?token=xxxxx", "connection refused"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := ProbeOllama(context.Background(), ollama.New(mustURL(t, tt.base), ollama.NewTransport(time.Second)))
			assert.Equal(t, tt.ok, h.OK, h.Error)
			assert.Equal(t, tt.version, h.Version)
			for _, e := range tt.errs {
				assert.Contains(t, h.Error, e)
			}
			assert.NotContains(t, h.Error+h.URL, "s3cret")
			assert.NotContains(t, h.Error+h.URL, "t0ken-secret")
			assert.GreaterOrEqual(t, h.LatencyMS, 0.0)
		})
	}
}
