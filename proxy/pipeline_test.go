package proxy

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/ollama/ollama/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestChatStreamsEachChunkAsItComes(t *testing.T) {
	for _, route := range []string{"chat", "generate"} {
		t.Run(route, func(t *testing.T) {
			up := newFakeOllama(t)
			up.gate = make(chan struct{})
			client := newClient(t, startVera(t, up.srv.URL, nil))

			// Cancelled when the test ends, so a failure cannot hang it.
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			first := make(chan string, 1)
			var got []string
			done := make(chan error, 1)
			go func() {
				onChunk := func(text string, isDone bool) {
					if len(got) == 0 {
						first <- text
					}
					got = append(got, text)
				}
				if route == "chat" {
					done <- client.Chat(ctx, &api.ChatRequest{
						Model: "llama3.2", Messages: []api.Message{{Role: "user", Content: "hi"}},
					}, func(r api.ChatResponse) error { onChunk(r.Message.Content, r.Done); return nil })
				} else {
					done <- client.Generate(ctx, &api.GenerateRequest{Model: "llama3.2", Prompt: "hi"},
						func(r api.GenerateResponse) error { onChunk(r.Response, r.Done); return nil })
				}
			}()
			// The upstream is parked after its first record: the chunk can
			// only arrive here if vera forwarded it without waiting.
			assert.Equal(t, "Hel", waitFor(t, first, "the first chunk"))
			close(up.gate)
			require.NoError(t, waitFor(t, done, "the end of the stream"))
			assert.Equal(t, []string{"Hel", "lo", " there", ".", ""}, got)
		})
	}
}

func TestNonStreaming(t *testing.T) {
	up := newFakeOllama(t)
	client := newClient(t, startVera(t, up.srv.URL, nil))
	var chats []api.ChatResponse
	err := client.Chat(context.Background(), &api.ChatRequest{
		Model: "llama3.2", Stream: ptr(false), Messages: []api.Message{{Role: "user", Content: "hi"}},
	}, func(r api.ChatResponse) error { chats = append(chats, r); return nil })
	require.NoError(t, err)
	require.Len(t, chats, 1)
	assert.Equal(t, "Hello there.", chats[0].Message.Content)
	assert.True(t, chats[0].Done)

	var gens []api.GenerateResponse
	err = client.Generate(context.Background(), &api.GenerateRequest{Model: "llama3.2", Prompt: "hi", Stream: ptr(false)},
		func(r api.GenerateResponse) error { gens = append(gens, r); return nil })
	require.NoError(t, err)
	require.Len(t, gens, 1)
	assert.Equal(t, "Hello there.", gens[0].Response)
}

func TestClientCancelCancelsUpstream(t *testing.T) {
	up := newFakeOllama(t)
	up.gate = make(chan struct{})
	up.onCancel = make(chan struct{}, 1)
	client := newClient(t, startVera(t, up.srv.URL, nil))

	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		errc <- client.Chat(ctx, &api.ChatRequest{Model: "llama3.2", Messages: []api.Message{{Role: "user", Content: "hi"}}},
			func(api.ChatResponse) error { cancel(); return nil })
	}()
	// The upstream stays parked on its gate until its request context ends,
	// which only happens if vera cancels it when the client goes.
	waitFor(t, up.onCancel, "the upstream to see its request cancelled")
	// The official client returns nil when its own context ends mid-stream,
	// so only the upstream's side can be asserted; it must return, though.
	waitFor(t, errc, "the client to return")
}

func TestMalformedChatRequest(t *testing.T) {
	up := newFakeOllama(t)
	base := startVera(t, up.srv.URL, nil)
	tests := []struct{ name, body, want string }{
		{"empty", ``, "missing request body"},
		{"not json", `{"model":`, "invalid JSON in request body"},
		{"messages not a list", `{"model":"m","messages":"hi"}`, `field "messages"`},
		{"content a number", `{"model":"m","messages":[{"role":"user","content":1}]}`, `content`},
	}
	for _, path := range []string{"/api/chat", "/v1/chat/completions"} {
		for _, tt := range tests {
			t.Run(path+" "+tt.name, func(t *testing.T) {
				res, err := http.Post(base+path, "application/json", strings.NewReader(tt.body))
				require.NoError(t, err)
				defer res.Body.Close()
				assert.Equal(t, http.StatusBadRequest, res.StatusCode)
				var body map[string]any
				require.NoError(t, json.NewDecoder(res.Body).Decode(&body))
				if path == "/api/chat" {
					assert.Contains(t, body["error"], tt.want)
					return
				}
				e, ok := body["error"].(map[string]any)
				require.True(t, ok, "OpenAI's error shape: %v", body)
				assert.Contains(t, e["message"], tt.want)
				assert.Equal(t, "invalid_request_error", e["type"])
			})
		}
	}
}

func TestChatForwardsUnknownFieldsUnchanged(t *testing.T) {
	up := newFakeOllama(t)
	base := startVera(t, up.srv.URL, nil)
	sent := `{"model":"llama3.2","stream":false,"think":true,"keep_alive":"5m","format":{"type":"object"},` +
		`"options":{"num_ctx":8192,"temperature":0.2},"tools":[{"type":"function","function":{"name":"f"}}],` +
		`"future_field":[1,2],"messages":[{"role":"user","content":"look","images":["aGVsbG8="],"future":"x"}]}`
	res, err := http.Post(base+"/api/chat", "application/json", strings.NewReader(sent))
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	_, _, got := up.last()
	assert.JSONEq(t, sent, string(got))
}
