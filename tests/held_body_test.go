package tests

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/ollama/ollamatest"
	"github.com/vera-proxy/vera/tests/veratest"
)

// heldIdle is server.body_idle_timeout in these tests; heldBound how long
// a connection whose body never comes may last at most: a bound, generous
// for -race on a busy machine, not a measure of speed.
const (
	heldIdle  = 300 * time.Millisecond
	heldBound = 10 * heldIdle
)

// Every route vera serves, its own included, ends a request that declares
// a body and sends none: answered 408 where the route reads the body, at
// once where it does not need it or refuses the request; and either way
// the connection is closed rather than held for the body.
func TestHeldBodyIsEndedOnEveryRoute(t *testing.T) {
	up := ollamatest.New(t)
	conf := veratest.WriteConfig(t, fmt.Sprintf("[server]\ntrust_loopback = false\nbody_idle_timeout = %q\n", heldIdle))
	p := veratest.Start(t, "VERA_OLLAMA_URL="+up.URL, "VERA_CONFIG_DIR="+conf, "VERA_API_KEYS=k1", "VERA_ADMIN_TOKEN=adm")
	key, admin := []string{"Authorization", "Bearer k1"}, []string{"Authorization", "Bearer adm"}
	mcp := append([]string{"Accept", "application/json, text/event-stream"}, key...)
	cases := []struct {
		name, method, path string
		headers            []string
		want               int
	}{
		{"healthz", "GET", "/healthz", nil, http.StatusOK},
		{"metrics", "GET", "/metrics", nil, http.StatusOK},
		{"ui", "GET", "/ui/", nil, http.StatusOK},
		{"mcp", "POST", "/mcp", mcp, http.StatusRequestTimeout},
		{"memories import", "POST", "/memories/import", admin, http.StatusRequestTimeout},
		{"memories add", "POST", "/memories", admin, http.StatusRequestTimeout},
		{"curator run", "POST", "/curator/run?dry_run=true", admin, http.StatusOK},
		{"admin route without the token", "POST", "/memories/import", key, http.StatusUnauthorized},
		{"tags without a key", "GET", "/api/tags", nil, http.StatusUnauthorized},
		{"chat without a key", "POST", "/api/chat", nil, http.StatusUnauthorized},
		{"origin not allowed", "POST", "/api/chat", append([]string{"Origin", "https://evil.example"}, key...), http.StatusForbidden},
		{"chat", "POST", "/api/chat", key, http.StatusRequestTimeout},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, body := sendHeldBody(t, p.Addr, tc.method, tc.path, tc.headers...)
			assert.Equal(t, tc.want, res.StatusCode, body)
			assert.True(t, res.Close, "the answer says the connection closes")
			if tc.want == http.StatusRequestTimeout {
				assert.Contains(t, body, `"error"`, "in the route's error shape")
			}
		})
	}
}

// sendHeldBody sends a request that declares a body of 100 bytes and
// sends none, with headers (name, value pairs), and returns the answer
// that came before the connection closed. It fails if the connection is
// still open after heldBound.
func sendHeldBody(t *testing.T, addr, method, path string, headers ...string) (*http.Response, string) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer conn.Close()
	var req strings.Builder
	fmt.Fprintf(&req, "%s %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 100\r\n", method, path, addr)
	for i := 0; i < len(headers); i += 2 {
		fmt.Fprintf(&req, "%s: %s\r\n", headers[i], headers[i+1])
	}
	req.WriteString("\r\n")
	_, err = io.WriteString(conn, req.String())
	require.NoError(t, err)
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(heldBound)))
	got, err := io.ReadAll(conn)
	require.NoError(t, err, "the connection is closed, not held for the body that never comes (got %q)", got)
	res, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(got)), nil)
	require.NoError(t, err, "answered before the connection closed")
	body, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return res, string(body)
}
