package admin

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/curator"
	"github.com/vera-proxy/vera/memory"
	"github.com/vera-proxy/vera/ollama"
)

func TestMain(m *testing.M) {
	gin.SetMode(gin.ReleaseMode)
	m.Run()
}

type fakeCurator struct{ runs int }

func (f *fakeCurator) Run(context.Context, curator.Options) curator.Result {
	f.runs++
	return curator.Result{Status: "ok", Mode: curator.Daily}
}
func (f *fakeCurator) Last() map[string]curator.Result { return nil }
func (f *fakeCurator) Running() bool                   { return false }

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	require.NoError(t, err)
	return u
}

// newTestServer returns a Server probing the Ollama at upstream, on a
// transport of its own so tests do not share connections.
func newTestServer(t *testing.T, upstream string) *Server {
	t.Helper()
	tr := ollama.NewTransport(time.Second)
	t.Cleanup(tr.CloseIdleConnections)
	s := New("test", ollama.New(mustURL(t, upstream), tr))
	s.TrustLoopback = true // the default: server.trust_loopback = true
	return s
}

// handler returns a router with s's routes mounted.
func handler(s *Server) http.Handler {
	e := gin.New()
	s.Mount(e)
	return e
}

func TestAdminAccess(t *testing.T) {
	tests := []struct {
		name, token, remote, auth string
		want                      int
	}{
		{"no token, loopback", "", "127.0.0.1:5000", "", http.StatusOK},
		{"no token, IPv6 loopback", "", "[::1]:5000", "", http.StatusOK},
		{"no token, from the network", "", "192.168.1.20:5000", "", http.StatusForbidden},
		{"no token, loopback, a rebound name", "", "127.0.0.1:5000", "host=evil.example", http.StatusForbidden},
		{"no token, loopback, another site's page", "", "127.0.0.1:5000", "origin=https://evil.example", http.StatusForbidden},
		{"no token, loopback, forwarded by a reverse proxy", "", "127.0.0.1:5000", "forwarded", http.StatusForbidden},
		// Behind a reverse proxy that adds no forwarding header: the
		// deployment sets trust_loopback = false, and with no admin token
		// nobody is an admin, a key holder least of all.
		{"no token, loopback, trust_loopback off", "", "127.0.0.1:5000", "distrust", http.StatusForbidden},
		{"no token, trust_loopback off, an API key", "", "127.0.0.1:5000", "distrust Bearer some-api-key", http.StatusForbidden},
		{"token, another site's page", "s3cret", "192.168.1.20:5000", "origin=https://evil.example", http.StatusForbidden},
		{"token, none sent", "s3cret", "127.0.0.1:5000", "", http.StatusUnauthorized},
		{"token, wrong one", "s3cret", "127.0.0.1:5000", "Bearer nope", http.StatusUnauthorized},
		{"token, right one from the network", "s3cret", "192.168.1.20:5000", "Bearer s3cret", http.StatusOK},
		{"token, scheme in lower case", "s3cret", "192.168.1.20:5000", "bearer s3cret", http.StatusOK},
		{"token, scheme in upper case", "s3cret", "192.168.1.20:5000", "BEARER s3cret", http.StatusOK},
		{"token, another scheme", "s3cret", "192.168.1.20:5000", "Basic s3cret", http.StatusUnauthorized},
		{"token, no space", "s3cret", "192.168.1.20:5000", "Bearers3cret", http.StatusUnauthorized},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fc := &fakeCurator{}
			s := newTestServer(t, "http://127.0.0.1:1")
			s.Curator, s.Token = fc, tt.token
			req := httptest.NewRequest(http.MethodPost, "/curator/run", nil)
			req.RemoteAddr = tt.remote
			req.Host = "127.0.0.1:11434" // a loopback client names this machine
			switch {
			case strings.HasPrefix(tt.auth, "host="):
				req.Host = strings.TrimPrefix(tt.auth, "host=")
			case tt.auth == "forwarded":
				req.Header.Set("X-Forwarded-For", "203.0.113.9")
			case strings.HasPrefix(tt.auth, "distrust"):
				s.TrustLoopback = false
				if k := strings.TrimSpace(strings.TrimPrefix(tt.auth, "distrust")); k != "" {
					req.Header.Set("Authorization", k)
				}
			case strings.HasPrefix(tt.auth, "origin="):
				req.Header.Set("Origin", strings.TrimPrefix(tt.auth, "origin="))
				req.Header.Set("Authorization", "Bearer s3cret")
			case tt.auth != "":
				req.Header.Set("Authorization", tt.auth)
			}
			w := httptest.NewRecorder()
			handler(s).ServeHTTP(w, req)
			assert.Equal(t, tt.want, w.Code, w.Body.String())
			assert.Equal(t, tt.want == http.StatusOK, fc.runs == 1)
			if !s.TrustLoopback {
				assert.Contains(t, w.Body.String(), "VERA_ADMIN_TOKEN", "the refusal names the remedy")
			}
		})
	}
}

func TestCuratorRunBadQuery(t *testing.T) {
	s := newTestServer(t, "http://127.0.0.1:1")
	s.Curator = &fakeCurator{}
	req := httptest.NewRequest(http.MethodPost, "/curator/run?dry_run=perhaps", nil)
	req.RemoteAddr = "127.0.0.1:5000"
	req.Host = "127.0.0.1:11434" // a loopback client names this machine
	w := httptest.NewRecorder()
	handler(s).ServeHTTP(w, req)
	assert.Equal(t, http.StatusBadRequest, w.Code)
	assert.Contains(t, w.Body.String(), "dry_run")
}

func TestAdminErrorsInOllamasShape(t *testing.T) {
	tests := []struct {
		name, token, remote, path string
		curator                   bool
		code                      int
		body                      string
	}{
		{"not loopback", "", "192.168.1.20:5000", "/curator/status", true, http.StatusForbidden,
			"admin routes are served only to loopback clients unless VERA_ADMIN_TOKEN is set"},
		{"no token sent", "s3cret", "127.0.0.1:5000", "/curator/status", true, http.StatusUnauthorized,
			"admin routes need Authorization: Bearer <VERA_ADMIN_TOKEN>"},
		{"curator off", "", "127.0.0.1:5000", "/curator/status", false, http.StatusServiceUnavailable,
			"the curator is off (memory.enabled = false)"},
		{"bad dry_run", "", "127.0.0.1:5000", "/curator/run?dry_run=perhaps", true, http.StatusBadRequest,
			"dry_run: want true or false"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newTestServer(t, "http://127.0.0.1:1")
			s.Token = tt.token
			if tt.curator {
				s.Curator = &fakeCurator{}
			}
			method := http.MethodGet
			if strings.HasPrefix(tt.path, "/curator/run") {
				method = http.MethodPost
			}
			req := httptest.NewRequest(method, tt.path, nil)
			req.RemoteAddr = tt.remote
			req.Host = "127.0.0.1:11434" // a loopback client names this machine
			w := httptest.NewRecorder()
			handler(s).ServeHTTP(w, req)
			assert.Equal(t, tt.code, w.Code)
			assert.Equal(t, "application/json; charset=utf-8", w.Header().Get("Content-Type"))
			var body map[string]string
			require.NoError(t, json.Unmarshal(w.Body.Bytes(), &body), w.Body.String())
			assert.Equal(t, map[string]string{"error": tt.body}, body)
			assert.Equal(t, tt.code == http.StatusUnauthorized, w.Header().Get("WWW-Authenticate") != "")
		})
	}
}

// Bodies that are not what a route takes get a message about the request,
// never about Go's types.
func TestJSONProblemsSpeakOfTheRequest(t *testing.T) {
	for body, want := range map[string]string{
		`{"text":5}`:                           `field "text": want a string`,
		`{"namespace":"a","text":`:             "the JSON ends too early",
		`{"namespace":"a",}`:                   "not valid JSON (at byte 18)",
		`[1]`:                                  "want a JSON object",
		`{"timestamp":5,"text":"x"}`:           `field "timestamp": want an RFC 3339 time`,
		`{"timestamp":"yesterday","text":"x"}`: `field "timestamp": want an RFC 3339 time`,
		``:                                     "it is empty",
	} {
		var m memory.JSON
		err := json.NewDecoder(strings.NewReader(body)).Decode(&m)
		require.Error(t, err, body)
		got := jsonProblem(err)
		assert.Contains(t, got, want, body)
		assert.NotContains(t, got, "Go ", body)
		assert.NotContains(t, got, "memory.JSON", body)
		assert.NotContains(t, got, "2006-01-02T15:04:05", body)
	}
}
