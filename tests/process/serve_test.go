package process

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ollama/ollama/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/ollama/ollamatest"
	"github.com/vera-proxy/vera/tests/veratest"
)

func TestServeChatAndGracefulShutdown(t *testing.T) {
	up := ollamatest.New(t)
	up.Gate = make(chan struct{})
	p := veratest.Launch(t, "VERA_OLLAMA_URL="+up.URL)
	client := p.Client(t)

	// A chat is held open upstream while vera is told to stop.
	var got strings.Builder
	chatErr := make(chan error, 1)
	done := false
	go func() {
		chatErr <- client.Chat(context.Background(), &api.ChatRequest{Model: "llama3.2",
			Messages: []api.Message{{Role: "user", Content: "hi"}}},
			func(r api.ChatResponse) error { got.WriteString(r.Message.Content); done = r.Done; return nil })
	}()
	select {
	case <-up.Started:
	case <-time.After(10 * time.Second):
		t.Fatal("the chat never reached the upstream")
	}
	require.NoError(t, p.Cmd.Process.Signal(syscall.SIGTERM))
	require.Eventually(t, func() bool { return strings.Contains(p.Logs(), "shutting down") }, 10*time.Second, 10*time.Millisecond)

	// New connections are refused while the running stream goes on (the
	// log line comes just before the listener closes).
	require.Eventually(t, func() bool {
		res, err := http.Get("http://" + p.Addr + "/healthz")
		if err == nil {
			res.Body.Close()
		}
		return err != nil
	}, 10*time.Second, 10*time.Millisecond, "vera stopped accepting")

	close(up.Gate)
	select {
	case err := <-chatErr:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("the running chat did not finish")
	}
	assert.Equal(t, "Hello from Ollama", got.String())
	assert.True(t, done, "the stream ended with done:true")

	select {
	case err := <-p.Exited:
		require.NoError(t, err, "vera exits 0 after a graceful shutdown")
	case <-time.After(10 * time.Second):
		t.Fatal("vera did not exit")
	}
	logs := p.Logs()
	assert.Contains(t, logs, "msg=request method=POST path=/api/chat status=200")
	assert.Regexp(t, `request_id=[0-9a-f]{16}`, logs)
	assert.Contains(t, logs, "msg=stopped")
}

func TestHealthzThroughBinary(t *testing.T) {
	up := ollamatest.New(t)
	p := veratest.Launch(t, "VERA_OLLAMA_URL="+up.URL)
	var h struct {
		Status  string `json:"status"`
		Version string `json:"version"`
		Ollama  struct {
			OK      bool   `json:"ok"`
			Version string `json:"version"`
		} `json:"ollama"`
		Store struct {
			OK      bool   `json:"ok"`
			Backend string `json:"backend"`
		} `json:"store"`
		Embedder struct {
			OK    bool   `json:"ok"`
			Model string `json:"model"`
			Dim   int    `json:"dim"`
		} `json:"embedder"`
	}
	// The embedder is probed in the background after start.
	require.Eventually(t, func() bool {
		res, err := http.Get("http://" + p.Addr + "/healthz")
		require.NoError(t, err)
		defer res.Body.Close()
		require.Equal(t, http.StatusOK, res.StatusCode)
		require.NoError(t, json.NewDecoder(res.Body).Decode(&h))
		return h.Status == "ok"
	}, 10*time.Second, 20*time.Millisecond)
	assert.True(t, h.Store.OK)
	assert.Equal(t, "embedded", h.Store.Backend)
	assert.True(t, h.Embedder.OK)
	assert.Equal(t, "nomic-embed-text", h.Embedder.Model)
	assert.Equal(t, 256, h.Embedder.Dim, "probed from the model")
	assert.NotEmpty(t, h.Version)
	assert.True(t, h.Ollama.OK)
	assert.Equal(t, "0.12.3", h.Ollama.Version)

	// The container health check command reaches the same endpoint.
	code, out, _ := veratest.RunCommand(t, []string{"VERA_LISTEN=0.0.0.0:" + p.Addr[strings.LastIndex(p.Addr, ":")+1:]}, "healthcheck")
	assert.Equal(t, 0, code)
	assert.Contains(t, out, `"status":"ok"`)
	up.Close()
	p.Cmd.Process.Kill()
	<-p.Exited
	code, _, _ = veratest.RunCommand(t, []string{"VERA_LISTEN=" + p.Addr}, "healthcheck")
	assert.Equal(t, 1, code, "nothing listens any more")
}

func TestVersionPassesThrough(t *testing.T) {
	up := ollamatest.New(t)
	p := veratest.Launch(t, "VERA_OLLAMA_URL="+up.URL)
	v, err := p.Client(t).Version(context.Background())
	require.NoError(t, err)
	assert.Equal(t, "0.12.3", v, "/api/version is Ollama's, passed through")
}
