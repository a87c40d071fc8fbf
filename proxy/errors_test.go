package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ollama/ollama/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/ollama/ollamatest"
)

func TestUpstreamErrorHidesSecretsOfTheOllamaURL(t *testing.T) {
	dead := ollamatest.DeadAddr(t)
	base := startVera(t, "http://user:s3cret@"+dead+"?token=t0ken-secret", nil)
	for _, path := range []string{"/api/chat", "/api/generate", "/v1/chat/completions"} {
		t.Run(path, func(t *testing.T) {
			res, err := http.Post(base+path, "application/json",
				strings.NewReader(`{"model":"llama3.2","messages":[{"role":"user","content":"hi"}]}`))
			require.NoError(t, err)
			defer res.Body.Close()
			assert.Equal(t, http.StatusBadGateway, res.StatusCode)
			body, err := io.ReadAll(res.Body)
			require.NoError(t, err)
			assert.NotContains(t, string(body), "s3cret")
			assert.NotContains(t, string(body), "t0ken-secret")
			assert.Contains(t, string(body), "ollama unreachable at http://user:xxxxx@"+dead+"?token=xxxxx")
		})
	}
}

func TestOllamaClosingBeforeAnsweringIsNotUnreachable(t *testing.T) {
	// Ollama took the request, then its runner died before the answer's
	// headers: a non-streamed answer sends them only at the end.
	crashed := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			panic(err)
		}
		conn.Close()
	}))
	t.Cleanup(crashed.Close)
	base := startVera(t, crashed.URL, nil)
	for _, path := range []string{"/api/chat", "/api/generate"} {
		t.Run(path, func(t *testing.T) {
			res, err := http.Post(base+path, "application/json",
				strings.NewReader(`{"model":"llama3.2","stream":false,"messages":[{"role":"user","content":"hi"}],"prompt":"hi"}`))
			require.NoError(t, err)
			defer res.Body.Close()
			assert.Equal(t, http.StatusBadGateway, res.StatusCode)
			var body map[string]string
			require.NoError(t, json.NewDecoder(res.Body).Decode(&body))
			assert.Contains(t, body["error"], "ollama closed the connection before answering")
			assert.NotContains(t, body["error"], "unreachable")
		})
	}
}

func TestUpstreamErrorKinds(t *testing.T) {
	ctx := context.Background()
	const base = "http://127.0.0.1:11435"
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	noHost := &net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: "ollama", IsNotFound: true}}
	reset := &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	tests := []struct {
		name string
		err  error
		code int
		msg  string
	}{
		{"refused", dial, http.StatusBadGateway, "ollama unreachable at " + base},
		{"no such host", noHost, http.StatusBadGateway, "ollama unreachable at " + base},
		{"EOF after the request", fmt.Errorf("net/http: HTTP/1.x transport connection broken: %w", io.EOF), http.StatusBadGateway, "ollama closed the connection before answering"},
		{"reset after the request", reset, http.StatusBadGateway, "ollama closed the connection before answering"},
		{"timeout", context.DeadlineExceeded, http.StatusGatewayTimeout, "ollama timed out at " + base},
		{"client gone", context.Canceled, StatusClientClosed, "client closed request"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := upstreamError(ctx, base, tt.err)
			assert.Equal(t, tt.code, statusOf(err))
			assert.Contains(t, err.Error(), tt.msg)
			assert.True(t, errors.Is(err, tt.err), "the cause is kept for the log")
		})
	}
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

func TestStatusOf(t *testing.T) {
	assert.Equal(t, StatusClientClosed, statusOf(context.Canceled))
	assert.Equal(t, http.StatusInternalServerError, statusOf(errors.New("x")))
	assert.Equal(t, http.StatusTeapot, statusOf(fmt.Errorf("wrapped: %w", httpError(http.StatusTeapot, "teapot", nil))))
	assert.Equal(t, "teapot: x", httpError(http.StatusTeapot, "teapot", errors.New("x")).Error())
}

func TestErrorsSpeakOfTheRequest(t *testing.T) {
	up := newFakeOllama(t)
	base := startVera(t, up.srv.URL, nil)
	for body, want := range map[string]string{
		`{"model":"m","messages":"hi"}`:                          `want an array, got string`,
		`{"model":"m","messages":[{"role":"user","content":5}]}`: `content`,
		`{"model":"m","messages":[`:                              "unexpected end of JSON input",
		`{"model":"m",]`:                                         "at byte",
	} {
		for _, path := range []string{"/api/chat", "/v1/chat/completions"} {
			res, got := postChat(t, base, path, body)
			assert.Equal(t, http.StatusBadRequest, res.StatusCode, body)
			assert.Contains(t, got, want, "%s %s", path, body)
			assert.NotContains(t, got, "Go value")
			assert.NotContains(t, got, "proxy.")
		}
	}
}

func TestOpenAIErrorShapeForBadHeaders(t *testing.T) {
	up := newFakeOllama(t)
	base := startVera(t, up.srv.URL, nil)
	res, body := postChat(t, base, "/v1/chat/completions", hiChat, "X-Vera-Memory", "perhaps")
	assert.Equal(t, http.StatusBadRequest, res.StatusCode)
	var e struct {
		Error struct{ Message, Type string } `json:"error"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &e))
	assert.Equal(t, "invalid_request_error", e.Error.Type)
}
