package proxy

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// heldIdle is the body idle timeout of these tests; heldBound how long a
// connection whose body never comes may last at most: a bound, generous
// for -race on a busy machine, not a measure of speed.
const (
	heldIdle  = 300 * time.Millisecond
	heldBound = 10 * heldIdle
)

// sendHeld sends a request that declares a body of 100 bytes and sends
// none, with headers (name, value pairs), and returns the answer that came
// before the connection closed. It fails if the connection is still open
// after heldBound.
func sendHeld(t *testing.T, addr, method, path string, headers ...string) (*http.Response, string) {
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

// Every route ends a request whose body never comes: a route that reads
// it answers 408, one that does not need it (vera's own GETs, the
// refusals of the access checks, a preflight) answers at once; either
// way the connection is closed instead of waiting for the body.
func TestHeldBodyDoesNotHoldTheConnection(t *testing.T) {
	up := newFakeOllama(t)
	base := startVera(t, up.srv.URL, func(s *Server) {
		s.BodyIdleTimeout = heldIdle
		s.APIKeys = []string{"k1"}
		s.AllowedOrigins = []string{"https://app.example"}
		s.Own = func(e *gin.Engine) {
			e.GET("/own/small", func(c *gin.Context) { c.JSON(http.StatusOK, gin.H{"status": "ok"}) })
			// More than net/http buffers: its header goes out while the
			// handler still runs, where net/http drains the body first.
			e.GET("/own/big", func(c *gin.Context) { c.String(http.StatusOK, strings.Repeat("metric 1\n", 4096)) })
			e.POST("/own/nothing", func(c *gin.Context) {}) // never writes: net/http answers 200
		}
	})
	addr := strings.TrimPrefix(base, "http://")
	key := []string{"Authorization", "Bearer k1"}
	cases := []struct {
		name, method, path string
		headers            []string
		want               int
	}{
		{"own route, small answer", "GET", "/own/small", key, http.StatusOK},
		{"own route, large answer", "GET", "/own/big", key, http.StatusOK},
		{"own route, no answer written", "POST", "/own/nothing", key, http.StatusOK},
		{"no key on an Ollama route", "GET", "/api/tags", nil, http.StatusUnauthorized},
		{"no key on a chat", "POST", "/api/chat", nil, http.StatusUnauthorized},
		{"origin not allowed", "GET", "/api/tags", append([]string{"Origin", "https://evil.example"}, key...), http.StatusForbidden},
		{"preflight", "OPTIONS", "/api/chat", []string{"Origin", "https://app.example", "Access-Control-Request-Method", "POST"}, http.StatusNoContent},
		{"chat reads its body", "POST", "/api/chat", key, http.StatusRequestTimeout},
		{"forwarded route reads its body", "POST", "/api/show", key, http.StatusRequestTimeout},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, body := sendHeld(t, addr, tc.method, tc.path, tc.headers...)
			assert.Equal(t, tc.want, res.StatusCode, body)
			assert.True(t, res.Close, "the answer says the connection closes")
		})
	}
}

// A body read to its end leaves the connection to the next request, on a
// chat and on a forwarded route alike.
func TestReadBodyKeepsTheConnection(t *testing.T) {
	up := newFakeOllama(t)
	base := startVera(t, up.srv.URL, func(s *Server) { s.BodyIdleTimeout = heldIdle })
	chat := `{"model":"llama3.2","stream":false,"messages":[{"role":"user","content":"hi"}]}`
	for _, path := range []string{"/api/chat", "/api/show"} {
		t.Run(path, func(t *testing.T) {
			conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
			require.NoError(t, err)
			defer conn.Close()
			require.NoError(t, conn.SetDeadline(time.Now().Add(30*time.Second)))
			br := bufio.NewReader(conn)
			for i := range 3 {
				fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", path, len(chat), chat)
				res, err := http.ReadResponse(br, nil)
				require.NoError(t, err, "request %d on one connection", i)
				_, err = io.Copy(io.Discard, res.Body)
				require.NoError(t, err)
				res.Body.Close()
				assert.Equal(t, http.StatusOK, res.StatusCode)
				assert.False(t, res.Close, "request %d: the connection stays open", i)
			}
		})
	}
}

// A slow upload that keeps flowing passes whole, however much longer
// than the idle timeout it takes: 8 MiB in 16 pieces, each after a pause
// of a quarter of the idle timeout (four idle timeouts in all).
func TestSlowSteadyUploadPasses(t *testing.T) {
	const size, pieces = 8 << 20, 16
	up := newFakeOllama(t)
	type upload struct {
		n   int64
		sum [sha256.Size]byte
	}
	arrived := make(chan upload, 1)
	up.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := sha256.New()
		n, _ := io.Copy(h, r.Body)
		var u upload
		u.n = n
		copy(u.sum[:], h.Sum(nil))
		arrived <- u
		w.WriteHeader(http.StatusCreated)
	})
	base := startVera(t, up.srv.URL, func(s *Server) { s.BodyIdleTimeout = heldIdle })

	blob := bytes.Repeat([]byte("0123456789abcdef"), size/16)
	pr, pw := io.Pipe()
	go func() {
		for i := range pieces {
			time.Sleep(heldIdle / 4)
			if _, err := pw.Write(blob[i*size/pieces : (i+1)*size/pieces]); err != nil {
				pw.CloseWithError(err)
				return
			}
		}
		pw.Close()
	}()
	digest := fmt.Sprintf("sha256:%x", sha256.Sum256(blob))
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, base+"/api/blobs/"+digest, pr)
	require.NoError(t, err)
	req.ContentLength = size
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	res.Body.Close()
	assert.Equal(t, http.StatusCreated, res.StatusCode)
	got := waitFor(t, arrived, "the upload at the upstream")
	assert.Equal(t, int64(size), got.n, "every byte arrived")
	assert.Equal(t, sha256.Sum256(blob), got.sum, "in order")
}

func TestStalledBodyIsEnded(t *testing.T) {
	up := newFakeOllama(t)
	base := startVera(t, up.srv.URL, func(s *Server) { s.BodyIdleTimeout = 200 * time.Millisecond })
	for _, path := range []string{"/api/chat", "/api/blobs/sha256:abc"} {
		t.Run(path, func(t *testing.T) {
			conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
			require.NoError(t, err)
			defer conn.Close()
			fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{\"model\"", path)
			require.NoError(t, conn.SetReadDeadline(time.Now().Add(10*time.Second)))
			res, err := http.ReadResponse(bufio.NewReader(conn), nil)
			require.NoError(t, err, "the stalled request is answered, not left open")
			res.Body.Close()
			assert.Equal(t, http.StatusRequestTimeout, res.StatusCode)
		})
	}
}

// A body that keeps flowing is never cut, however long it takes.
func TestSlowFlowingBodyIsNotCut(t *testing.T) {
	up := newFakeOllama(t)
	var got []byte
	done := make(chan struct{})
	up.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, _ = io.ReadAll(r.Body)
		close(done)
	})
	base := startVera(t, up.srv.URL, func(s *Server) { s.BodyIdleTimeout = 150 * time.Millisecond })
	pr, pw := io.Pipe()
	go func() {
		for range 10 {
			pw.Write([]byte("0123456789"))
			time.Sleep(50 * time.Millisecond)
		}
		pw.Close()
	}()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, base+"/api/blobs/sha256:abc", pr)
	require.NoError(t, err)
	req.ContentLength = 100
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	res.Body.Close()
	waitFor(t, done, "the upload")
	assert.Equal(t, http.StatusOK, res.StatusCode)
	assert.Len(t, got, 100, "every byte arrived")
}
