package proxy

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/ollama/ollama/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/memory"
	"github.com/vera-proxy/vera/ollama/ollamatest"
)

func ptr[T any](v T) *T { return &v }

// waitFor fails the test if ch does not deliver within a generous bound; it
// guards against hangs, it does not measure speed.
func waitFor[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

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

func TestOllamaRoutesPassThrough(t *testing.T) {
	up := newFakeOllama(t)
	base := startVera(t, up.srv.URL, nil)
	client := newClient(t, base)
	ctx := context.Background()

	v, err := client.Version(ctx)
	require.NoError(t, err)
	assert.Equal(t, "0.12.3", v)

	tags, err := client.List(ctx)
	require.NoError(t, err)
	require.Len(t, tags.Models, 2)
	assert.Equal(t, "llama3.2:latest", tags.Models[0].Name)
	assert.Equal(t, int64(2019393189), tags.Models[0].Size)

	ps, err := client.ListRunning(ctx)
	require.NoError(t, err)
	require.Len(t, ps.Models, 1)
	assert.Equal(t, int64(3300000000), ps.Models[0].SizeVRAM)

	show, err := client.Show(ctx, &api.ShowRequest{Model: "llama3.2"})
	require.NoError(t, err)
	assert.Equal(t, "llama", show.Details.Family)
	assert.Equal(t, float64(131072), show.ModelInfo["llama.context_length"])

	emb, err := client.Embed(ctx, &api.EmbedRequest{Model: "nomic-embed-text", Input: "hello"})
	require.NoError(t, err)
	assert.Equal(t, [][]float32{{0.1, 0.2, 0.3}}, emb.Embeddings)

	var progress []api.ProgressResponse
	require.NoError(t, client.Pull(ctx, &api.PullRequest{Model: "llama3.2"}, func(p api.ProgressResponse) error {
		progress = append(progress, p)
		return nil
	}))
	require.Len(t, progress, 4)
	assert.Equal(t, int64(50), progress[1].Completed)
	assert.Equal(t, "success", progress[3].Status)

	require.NoError(t, client.Delete(ctx, &api.DeleteRequest{Model: "llama3.2"}))
	var se api.StatusError
	err = client.Delete(ctx, &api.DeleteRequest{Model: "nope"})
	require.ErrorAs(t, err, &se)
	assert.Equal(t, http.StatusNotFound, se.StatusCode)
	assert.Equal(t, "model 'nope' not found", se.ErrorMessage)

	require.NoError(t, client.Copy(ctx, &api.CopyRequest{Source: "llama3.2", Destination: "mine"}))
	_, _, body := up.last()
	assert.JSONEq(t, `{"source":"llama3.2","destination":"mine"}`, string(body))
}

func TestNotFoundPassesThrough(t *testing.T) {
	up := newFakeOllama(t)
	base := startVera(t, up.srv.URL, nil)

	// An unknown route: the upstream's own 404, status and body.
	res, err := http.Post(base+"/api/x", "application/json", strings.NewReader(`{}`))
	require.NoError(t, err)
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	assert.Equal(t, http.StatusNotFound, res.StatusCode)
	assert.Equal(t, "404 page not found\n", string(body))

	// A missing model on the intercepted chat route.
	client := newClient(t, base)
	err = client.Chat(context.Background(), &api.ChatRequest{Model: "missing", Messages: []api.Message{{Role: "user", Content: "hi"}}},
		func(api.ChatResponse) error { return nil })
	var se api.StatusError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, http.StatusNotFound, se.StatusCode)
	assert.Equal(t, `model "missing" not found, try pulling it first`, se.ErrorMessage)
}

func TestStreamBytesHeadersAndHostPassThrough(t *testing.T) {
	up := newFakeOllama(t)
	base := startVera(t, up.srv.URL, nil)

	// What the upstream sends, byte for byte.
	direct := func(u string) (*http.Response, []byte) {
		req, _ := http.NewRequest(http.MethodPost, u+"/api/generate?x=1", strings.NewReader(`{"model":"llama3.2","prompt":"hi"}`))
		req.Header.Set("X-Custom", "kept")
		req.Header.Set("Connection", "keep-alive, X-Hop")
		req.Header.Set("X-Hop", "dropped")
		res, err := http.DefaultTransport.RoundTrip(req)
		require.NoError(t, err)
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		return res, b
	}
	wantRes, want := direct(up.srv.URL)
	gotRes, got := direct(base)
	assert.Equal(t, string(want), string(got))
	assert.Equal(t, wantRes.StatusCode, gotRes.StatusCode)
	assert.Equal(t, "application/x-ndjson", gotRes.Header.Get("Content-Type"))

	host, hdr, body := up.last()
	assert.Equal(t, strings.TrimPrefix(up.srv.URL, "http://"), host, "Host is the upstream's")
	assert.Equal(t, "kept", hdr.Get("X-Custom"))
	assert.Empty(t, hdr.Get("X-Hop"), "a hop-by-hop header named in Connection is dropped")
	assert.JSONEq(t, `{"model":"llama3.2","prompt":"hi"}`, string(body))
}

func TestSSEPassesThroughEventByEvent(t *testing.T) {
	up := newFakeOllama(t)
	up.gate = make(chan struct{})
	base := startVera(t, up.srv.URL, nil)

	// Bounded, so that a vera that held the stream back fails the test
	// instead of hanging it.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/chat/completions",
		strings.NewReader(`{"model":"llama3.2","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	assert.Equal(t, "text/event-stream", res.Header.Get("Content-Type"))
	r := bufio.NewReader(res.Body)
	// Read the first event while the upstream is parked: if vera buffered,
	// this would wait for the gate, so it must arrive within the bound.
	firstLine := make(chan string, 1)
	go func() {
		l, _ := r.ReadString('\n')
		firstLine <- l
	}()
	line := waitFor(t, firstLine, "the first SSE event")
	assert.Equal(t, `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"Hel"}}]}`+"\n", line)
	close(up.gate) // the first event arrived while the upstream was parked
	rest, err := io.ReadAll(r)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(string(rest), "\ndata: "), "no blank lines added or removed")
	assert.True(t, strings.HasSuffix(string(rest), "\n\ndata: [DONE]\n\n"))
	assert.Equal(t, 6, strings.Count(line+string(rest), "data: "))
}

func TestRootAndCORS(t *testing.T) {
	up := newFakeOllama(t)
	base := startVera(t, up.srv.URL, nil)

	res, err := http.Get(base + "/")
	require.NoError(t, err)
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	assert.Equal(t, "Ollama is running", string(body))

	res, err = http.Head(base + "/")
	require.NoError(t, err)
	res.Body.Close()
	assert.Equal(t, http.StatusOK, res.StatusCode)
	assert.Equal(t, int64(17), res.ContentLength)

	// vera decides on the Origin and answers with the CORS headers; Ollama
	// never sees it, so its own list cannot disagree.
	req, _ := http.NewRequest(http.MethodGet, base+"/", nil)
	req.Header.Set("Origin", "http://localhost:3000")
	res, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	res.Body.Close()
	assert.Equal(t, http.StatusOK, res.StatusCode)
	assert.Equal(t, "http://localhost:3000", res.Header.Get("Access-Control-Allow-Origin"))
	_, hdr, _ := up.last()
	assert.Empty(t, hdr.Get("Origin"))
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

func TestUpstreamDown(t *testing.T) {
	dead := "http://" + ollamatest.DeadAddr(t)
	base := startVera(t, dead, nil)

	tests := []struct {
		path, body string
		check      func(t *testing.T, body map[string]any)
	}{
		{"/api/chat", `{"model":"llama3.2","messages":[]}`, func(t *testing.T, b map[string]any) {
			assert.Contains(t, b["error"], "ollama unreachable at "+dead)
			assert.Contains(t, b["error"], "connection refused")
		}},
		{"/api/generate", `{"model":"llama3.2"}`, func(t *testing.T, b map[string]any) {
			assert.Contains(t, b["error"], "ollama unreachable at "+dead)
		}},
		{"/v1/chat/completions", `{"model":"llama3.2"}`, func(t *testing.T, b map[string]any) {
			e, ok := b["error"].(map[string]any)
			require.True(t, ok, "OpenAI error shape: %v", b)
			assert.Contains(t, e["message"], "ollama unreachable at "+dead)
			assert.Equal(t, "api_error", e["type"])
		}},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			res, err := http.Post(base+tt.path, "application/json", strings.NewReader(tt.body))
			require.NoError(t, err)
			defer res.Body.Close()
			assert.Equal(t, http.StatusBadGateway, res.StatusCode)
			assert.Equal(t, "application/json; charset=utf-8", res.Header.Get("Content-Type"))
			var body map[string]any
			require.NoError(t, json.NewDecoder(res.Body).Decode(&body))
			tt.check(t, body)
		})
	}

	// What `ollama list` does: the heartbeat (HEAD /) passes while vera
	// runs, so the list call gets the 502 and the CLI prints vera's reason,
	// not "something went wrong".
	oc := api.NewClient(mustURL(t, base), http.DefaultClient)
	require.NoError(t, oc.Heartbeat(context.Background()))
	_, err := oc.List(context.Background())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "ollama unreachable at "+dead)

	// Many requests on one keep-alive connection: each gets its 502, none a
	// reset connection (golang/go#68560 with full duplex on).
	client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1}}
	for i := range 20 {
		res, err := client.Post(base+"/api/generate", "application/json", strings.NewReader(`{"model":"llama3.2"}`))
		require.NoError(t, err, "request %d", i)
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		require.Equal(t, http.StatusBadGateway, res.StatusCode)
	}

	// The official client reports it as a status error.
	err = newClient(t, base).Chat(context.Background(), &api.ChatRequest{Model: "llama3.2"}, func(api.ChatResponse) error { return nil })
	var se api.StatusError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, http.StatusBadGateway, se.StatusCode)
}

func TestUpstreamTimeoutIs504(t *testing.T) {
	slow := newFakeOllama(t)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	stall := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	slow.srv.Config.Handler = stall
	u := slow.srv.URL
	srv := httpServer(t, New(mustURL(t, u), NewTransport(50*time.Millisecond), nil))
	res, err := http.Post(srv+"/api/generate", "application/json", strings.NewReader(`{}`))
	require.NoError(t, err)
	defer res.Body.Close()
	assert.Equal(t, http.StatusGatewayTimeout, res.StatusCode)
	var body map[string]string
	require.NoError(t, json.NewDecoder(res.Body).Decode(&body))
	assert.Contains(t, body["error"], "ollama timed out at "+u)
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

func TestChatRecordsFinishedTurns(t *testing.T) {
	const v1 = "/v1/chat/completions"
	tests := []struct {
		name    string
		path    string // default /api/chat
		setup   func(*fakeOllama)
		header  http.Header
		body    string
		want    []string // the recorded answers
		wantNS  string
		status  int // default 200
		wantErr bool
	}{
		{
			name:   "streamed answer without thinking",
			setup:  func(f *fakeOllama) { f.thinking = []string{"let me ", "think"} },
			body:   `{"model":"llama3.2","messages":[{"role":"user","content":"first"},{"role":"assistant","content":"a"},{"role":"user","content":"hi"}]}`,
			want:   []string{"Hello there."},
			wantNS: "default",
		},
		{
			name:   "non-streamed, namespace header",
			header: http.Header{"X-Openwebui-User-Id": {"alice"}},
			body:   `{"model":"llama3.2","stream":false,"messages":[{"role":"user","content":"hi"}]}`,
			want:   []string{"Hello there."},
			wantNS: "alice",
		},
		{
			name:   "memory off",
			header: http.Header{"X-Vera-Memory": {"off"}},
			body:   `{"model":"llama3.2","messages":[{"role":"user","content":"hi"}]}`,
		},
		{
			name:   "upstream error status",
			body:   `{"model":"missing","messages":[{"role":"user","content":"hi"}]}`,
			status: http.StatusNotFound,
		},
		{
			name:    "aborted stream",
			setup:   func(f *fakeOllama) { f.dieAfter = 2 },
			body:    `{"model":"llama3.2","messages":[{"role":"user","content":"hi"}]}`,
			wantErr: true,
		},
		{
			name:  "empty answer",
			setup: func(f *fakeOllama) { f.tokens = []string{"", " "} },
			body:  `{"model":"llama3.2","messages":[{"role":"user","content":"hi"}]}`,
		},
		{
			name: "no user message",
			body: `{"model":"llama3.2","messages":[{"role":"system","content":"hi"}]}`,
		},

		// OpenAI's format on Ollama's compatible endpoint.
		{name: "v1 streamed", path: v1, body: `{"model":"llama3.2","stream":true,"messages":[{"role":"user","content":"hi"}]}`, want: []string{"Hello there."}, wantNS: "default"},
		{name: "v1 not streamed, content parts", path: v1, body: `{"model":"llama3.2","messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}`, want: []string{"Hello there."}, wantNS: "default"},
		{name: "v1 memory off", path: v1, header: http.Header{"X-Vera-Memory": {"off"}}, body: `{"model":"llama3.2","stream":true,"messages":[{"role":"user","content":"hi"}]}`},
		{name: "v1 missing model", path: v1, body: `{"model":"missing","stream":true,"messages":[{"role":"user","content":"hi"}]}`, status: http.StatusNotFound},
		{name: "v1 aborted stream", path: v1, setup: func(f *fakeOllama) { f.dieAfter = 2 }, body: `{"model":"llama3.2","stream":true,"messages":[{"role":"user","content":"hi"}]}`, wantErr: true},
		{name: "v1 empty answer", path: v1, setup: func(f *fakeOllama) { f.tokens = []string{" "} }, body: `{"model":"llama3.2","stream":true,"messages":[{"role":"user","content":"hi"}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up := newFakeOllama(t)
			if tt.setup != nil {
				tt.setup(up)
			}
			rec := &recorder{}
			base, served := startServedVera(t, up.srv.URL, func(s *Server) { s.Recorder = rec })
			path := cmp.Or(tt.path, "/api/chat")
			req, _ := http.NewRequest(http.MethodPost, base+path, strings.NewReader(tt.body))
			for k, v := range tt.header {
				req.Header[k] = v
			}
			res, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			_, readErr := io.ReadAll(res.Body)
			res.Body.Close()
			if tt.wantErr {
				require.Error(t, readErr)
			} else {
				require.NoError(t, readErr)
				assert.Equal(t, cmp.Or(tt.status, http.StatusOK), res.StatusCode)
			}
			waitFor(t, served, "the handler to return")
			turns := rec.all()
			require.Len(t, turns, len(tt.want))
			for i, answer := range tt.want {
				assert.Equal(t, answer, turns[i].Assistant)
				assert.Equal(t, "hi", turns[i].User)
				assert.Equal(t, "llama3.2", turns[i].Model)
				assert.Equal(t, tt.wantNS, turns[i].Namespace)
				assert.False(t, turns[i].Time.IsZero())
			}
		})
	}
}

func TestPanicAfterAnswerStartedAbortsConnection(t *testing.T) {
	up := newFakeOllama(t)
	base := startVera(t, up.srv.URL, func(s *Server) { s.Recorder = panicRecorder{} })
	// The recorder panics once the answer is complete, before its end went
	// out: the connection must be aborted, not ended cleanly, and nothing
	// else written.
	res, err := http.Post(base+"/api/chat", "application/json",
		strings.NewReader(`{"model":"llama3.2","messages":[{"role":"user","content":"hi"}]}`))
	require.NoError(t, err)
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)
	assert.Equal(t, 4, strings.Count(string(body), "\n"), "only the upstream's records, without the held end")
	assert.NotContains(t, string(body), `"done":true`)
}

func TestPanicBeforeAnswerIs500(t *testing.T) {
	s := New(mustURL(t, "http://127.0.0.1:1"), NewTransport(time.Second), nil)
	e := s.Handler().(*gin.Engine)
	e.GET("/boom", func(*gin.Context) { panic("boom") })
	base := httpServer(t, e)
	res, err := http.Get(base + "/boom")
	require.NoError(t, err)
	defer res.Body.Close()
	assert.Equal(t, http.StatusInternalServerError, res.StatusCode)
	var body map[string]string
	require.NoError(t, json.NewDecoder(res.Body).Decode(&body))
	assert.Equal(t, "internal error: boom", body["error"])
}

type panicRecorder struct{}

func (panicRecorder) Record(context.Context, memory.Turn) error { panic("boom") }

func TestStatusOf(t *testing.T) {
	assert.Equal(t, StatusClientClosed, statusOf(context.Canceled))
	assert.Equal(t, http.StatusInternalServerError, statusOf(errors.New("x")))
	assert.Equal(t, http.StatusTeapot, statusOf(fmt.Errorf("wrapped: %w", httpError(http.StatusTeapot, "teapot", nil))))
	assert.Equal(t, "teapot: x", httpError(http.StatusTeapot, "teapot", errors.New("x")).Error())
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	require.NoError(t, err)
	return u
}

func httpServer(t *testing.T, h interface{ Handler() http.Handler }) string {
	t.Helper()
	srv := httptest.NewServer(h.Handler())
	t.Cleanup(srv.Close)
	return srv.URL
}
