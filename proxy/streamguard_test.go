package proxy

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/ollama/ollama/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestUpstreamDiesMidStream(t *testing.T) {
	up := newFakeOllama(t)
	up.dieAfter = 2
	base := startVera(t, up.srv.URL, nil)

	t.Run("raw HTTP", func(t *testing.T) {
		res, err := http.Post(base+"/api/chat", "application/json",
			strings.NewReader(`{"model":"llama3.2","messages":[{"role":"user","content":"hi"}]}`))
		require.NoError(t, err)
		defer res.Body.Close()
		body, readErr := io.ReadAll(res.Body)
		// The connection is aborted: no clean end of the chunked body.
		require.ErrorIs(t, readErr, io.ErrUnexpectedEOF)
		lines := strings.Split(strings.TrimSuffix(string(body), "\n"), "\n")
		require.Len(t, lines, 3)
		var last map[string]any
		require.NoError(t, json.Unmarshal([]byte(lines[2]), &last))
		assert.Contains(t, last["error"], "ollama stream interrupted")
		assert.Len(t, last, 1, "the last line is an Ollama error record: %s", lines[2])
	})

	t.Run("passthrough route", func(t *testing.T) {
		res, err := http.Post(base+"/api/generate", "application/json", strings.NewReader(`{"model":"llama3.2","prompt":"hi"}`))
		require.NoError(t, err)
		defer res.Body.Close()
		body, readErr := io.ReadAll(res.Body)
		require.ErrorIs(t, readErr, io.ErrUnexpectedEOF)
		assert.Contains(t, string(body), `{"error":"ollama stream interrupted`)
	})

	t.Run("official client", func(t *testing.T) {
		var got []string
		err := newClient(t, base).Chat(context.Background(),
			&api.ChatRequest{Model: "llama3.2", Messages: []api.Message{{Role: "user", Content: "hi"}}},
			func(r api.ChatResponse) error { got = append(got, r.Message.Content); return nil })
		require.Error(t, err)
		assert.Contains(t, err.Error(), "ollama stream interrupted")
		assert.Equal(t, []string{"Hel", "lo"}, got)
	})
}

func TestErrorRecordStartsOnAFreshLine(t *testing.T) {
	assert.Equal(t, `{"error":"x"}`+"\n", string(errorRecord(streamNDJSON, ollamaChat, '\n', "x")))
	assert.Equal(t, "\n"+`{"error":"x"}`+"\n", string(errorRecord(streamNDJSON, ollamaGenerate, '}', "x")))
	assert.Equal(t, `{"error":"x"}`+"\n", string(errorRecord(streamNDJSON, ollamaChat, 0, "x")))
	assert.Equal(t, "\n\ndata: {\"error\":{\"message\":\"x\",\"type\":\"api_error\"}}\n\n", string(errorRecord(streamSSE, openAIChat, '}', "x")))
	assert.Equal(t, "\nevent: error\ndata: {\"error\":{\"message\":\"x\",\"type\":\"api_error\"},\"type\":\"error\"}\n\n", string(errorRecord(streamSSE, anthropicMessages, '\n', "x")))
	assert.Equal(t, "event: error\ndata: {\"code\":\"api_error\",\"message\":\"x\",\"type\":\"error\"}\n\n", string(errorRecord(streamSSE, openAIResponses, 0, "x")))
}
