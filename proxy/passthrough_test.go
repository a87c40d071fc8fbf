package proxy

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ollama/ollama/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

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
