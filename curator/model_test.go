package curator

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/ollama/ollama/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/ollama"
)

// chatServer is a fake Ollama whose /api/chat answers status and body and
// keeps the request it got.
func chatServer(t *testing.T, status int, body any, got *api.ChatRequest) *ollama.Client {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		assert.Equal(t, "/api/chat", r.URL.Path)
		b, _ := io.ReadAll(r.Body)
		assert.NoError(t, json.Unmarshal(b, got))
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(body)
	}))
	t.Cleanup(srv.Close)
	u, err := url.Parse(srv.URL)
	require.NoError(t, err)
	return ollama.New(u, ollama.NewTransport(0))
}

func TestOllamaModelAsksForTheSchema(t *testing.T) {
	var got api.ChatRequest
	c := chatServer(t, http.StatusOK, api.ChatResponse{Model: "qwen2.5:7b", CreatedAt: time.Now(),
		Message: api.Message{Role: "assistant", Content: `{"memories":[]}`}, Done: true, DoneReason: "stop"}, &got)
	m := NewOllamaModel(c, "qwen2.5:7b")
	m.NumCtx = 8192
	out, err := m.Complete(context.Background(), "the curator's prompt", "the batch", Schema)
	require.NoError(t, err)
	assert.Equal(t, `{"memories":[]}`, out)

	assert.Equal(t, "qwen2.5:7b", got.Model)
	require.NotNil(t, got.Stream)
	assert.False(t, *got.Stream)
	assert.JSONEq(t, string(Schema), string(got.Format))
	assert.Equal(t, map[string]any{"temperature": 0.1, "num_ctx": 8192.0}, got.Options)
	require.Len(t, got.Messages, 2)
	assert.Equal(t, api.Message{Role: "system", Content: "the curator's prompt"}, got.Messages[0])
	assert.Equal(t, api.Message{Role: "user", Content: "the batch"}, got.Messages[1])

	m.NumCtx = 0
	got = api.ChatRequest{}
	_, err = m.Complete(context.Background(), "s", "u", Schema)
	require.NoError(t, err)
	assert.NotContains(t, got.Options, "num_ctx", "Ollama's own window")
}

func TestOllamaModelErrors(t *testing.T) {
	tests := []struct {
		name   string
		status int
		body   any
		want   []string
	}{
		{"not pulled", http.StatusNotFound, map[string]string{"error": `model "qwen2.5:7b" not found, try pulling it first`},
			[]string{"curator model qwen2.5:7b", "404 Not Found", "try pulling it first", "(ollama pull qwen2.5:7b)"}},
		{"fails", http.StatusInternalServerError, map[string]string{"error": "llama runner process has terminated"},
			[]string{"curator model qwen2.5:7b", "500 Internal Server Error", "llama runner process has terminated"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got api.ChatRequest
			_, err := NewOllamaModel(chatServer(t, tt.status, tt.body, &got), "qwen2.5:7b").Complete(context.Background(), "s", "u", Schema)
			require.Error(t, err)
			for _, w := range tt.want {
				assert.Contains(t, err.Error(), w)
			}
			var se *ollama.StatusError
			require.ErrorAs(t, err, &se)
			assert.Equal(t, tt.status, se.StatusCode)
		})
	}
}
