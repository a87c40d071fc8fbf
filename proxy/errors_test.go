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
