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

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/ollama"
)

// deadAddr returns an address nothing listens on.
func deadAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
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

func TestHealthzEmbedderIsDownWithOllama(t *testing.T) {
	healthy := func(context.Context) (StoreHealth, EmbedderHealth) {
		// What the memory stack says once it has learnt the vector size
		// at start: it does not ask Ollama again.
		return StoreHealth{OK: true, Backend: "embedded"}, EmbedderHealth{OK: true, Model: "nomic-embed-text", Dim: 768}
	}
	up := newFakeOllama(t)
	base := startVera(t, up.srv.URL, func(s *Server) { s.MemoryHealth = healthy })
	_, h := getHealth(t, base)
	assert.Equal(t, "ok", h.Status)
	require.NotNil(t, h.Embedder)
	assert.True(t, h.Embedder.OK)

	up.srv.Close()
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
	host := strings.TrimPrefix(up.srv.URL, "http://")
	dead := deadAddr(t)
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
			base := startVera(t, tt.upstream, func(s *Server) { s.MemoryHealth = memHealth })
			raw, h := getHealth(t, base)
			assert.NotContains(t, raw, "s3cret")
			assert.NotContains(t, raw, "k3y-secret")
			assert.Equal(t, tt.shown, h.Ollama.URL)
			assert.Equal(t, tt.name == "up", h.Ollama.OK, h.Ollama.Error)
		})
	}
}

func TestUpstreamErrorHidesSecretsOfTheOllamaURL(t *testing.T) {
	dead := deadAddr(t)
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

func TestProbeOllama(t *testing.T) {
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, `{"error":"server busy"}`)
	}))
	t.Cleanup(failing.Close)
	up := newFakeOllama(t)
	dead := deadAddr(t)
	tests := []struct {
		name, base string
		ok         bool
		version    string
		errs       []string
	}{
		{"up", up.srv.URL, true, "0.12.3", nil},
		{"an error status", failing.URL, false, "", []string{"GET /api/version: 503 Service Unavailable: server busy"}},
		{"refused, secrets hidden", "http://user:s3cret@" + dead + "?token=t0ken-secret", false, "",
			[]string{"http://user:xxxxx@" + dead + "/api/version?token=xxxxx", "connection refused"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := ProbeOllama(context.Background(), ollama.New(mustURL(t, tt.base), NewTransport(time.Second)))
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
