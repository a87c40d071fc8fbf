package memory_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/memory"
	"github.com/vera-proxy/vera/ollama"
	"github.com/vera-proxy/vera/ollama/ollamatest"
)

// embedAnswer is a fake Ollama whose /api/embed answers status and body.
func embedAnswer(t *testing.T, status int, body any) *ollama.Client {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/embed" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(body)
	}))
	t.Cleanup(srv.Close)
	u, err := url.Parse(srv.URL)
	require.NoError(t, err)
	return ollama.New(u, ollama.NewTransport(0))
}

func TestOllamaEmbedder(t *testing.T) {
	e := memory.NewEmbedder(embedAnswer(t, http.StatusOK, map[string]any{"embeddings": [][]float32{{1, 2, 3}}}), "nomic-embed-text")
	assert.Equal(t, "nomic-embed-text", e.Model())
	dim, err := memory.Probe(context.Background(), e)
	require.NoError(t, err)
	assert.Equal(t, 3, dim)

	v, err := e.Embed(context.Background(), nil)
	require.NoError(t, err)
	assert.Nil(t, v)
}

func TestOllamaEmbedderFailuresAreUnavailable(t *testing.T) {
	dead := &url.URL{Scheme: "http", Host: ollamatest.DeadAddr(t)}

	tests := []struct {
		name   string
		client *ollama.Client
		texts  []string
		want   []string
		cause  error
	}{
		{"ollama down", ollama.New(dead, nil), []string{"a"}, []string{"embedder:"}, syscall.ECONNREFUSED},
		{"model not pulled", embedAnswer(t, http.StatusNotFound, map[string]string{"error": `model "nomic-embed-text" not found, try pulling it first`}),
			[]string{"a"}, []string{`embedding model "nomic-embed-text" not found on Ollama (ollama pull nomic-embed-text)`, "try pulling it first"}, nil},
		{"ollama fails", embedAnswer(t, http.StatusInternalServerError, map[string]string{"error": "out of memory"}),
			[]string{"a"}, []string{"embedder: POST /api/embed: 500 Internal Server Error: out of memory"}, nil},
		{"a vector short", embedAnswer(t, http.StatusOK, map[string]any{"embeddings": [][]float32{{1}}}),
			[]string{"a", "b"}, []string{"1 vectors for 2 texts"}, nil},
		{"unequal sizes", embedAnswer(t, http.StatusOK, map[string]any{"embeddings": [][]float32{{1, 2}, {1}}}),
			[]string{"a", "b"}, []string{"vectors of unequal or zero size"}, nil},
		{"empty vectors", embedAnswer(t, http.StatusOK, map[string]any{"embeddings": [][]float32{{}}}),
			[]string{"a"}, []string{"vectors of unequal or zero size"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := memory.NewEmbedder(tt.client, "nomic-embed-text").Embed(context.Background(), tt.texts)
			require.Error(t, err)
			assert.ErrorIs(t, err, memory.ErrUnavailable)
			for _, w := range tt.want {
				assert.Contains(t, err.Error(), w)
			}
			if tt.cause != nil {
				assert.True(t, errors.Is(err, tt.cause), "the cause is kept: %v", err)
			}
		})
	}
}
