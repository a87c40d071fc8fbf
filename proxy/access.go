package proxy

import (
	"crypto/subtle"
	"log/slog"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/vera-proxy/vera/config"
	"github.com/vera-proxy/vera/dialect"
)

// requireKey enforces server.api_keys: with keys set, every
// route (Ollama's included) needs one, as "Authorization: Bearer <key>" or
// "x-api-key: <key>" (what Anthropic clients send); the admin token
// passes too. /healthz, /metrics and the static page /ui/ need none, nor
// loopback clients while TrustLoopback is on (the ollama CLI cannot send
// a key) unless a reverse proxy forwarded them, nor CORS preflights
// (browsers send no credentials with them).
func (s *Server) requireKey(c *gin.Context) {
	forwarded := s.forwardedFromLoopback(c.Request)
	r := c.Request
	if len(s.keys.api) == 0 || r.Method == http.MethodOptions && r.Header.Get("Origin") != "" {
		// A browser's preflight carries no credentials; the browser guard
		// has judged its origin.
		return
	}
	switch p := r.URL.Path; {
	case (p == "/healthz" || p == "/metrics") && (r.Method == http.MethodGet || r.Method == http.MethodHead):
		return
	case (p == "/ui" || strings.HasPrefix(p, "/ui/")) && (c.Request.Method == http.MethodGet || c.Request.Method == http.MethodHead):
		// The admin page is static and public (a browser opening it
		// cannot send a key); the API it calls is guarded.
		return
	}
	if s.TrustLoopback && !forwarded && config.LoopbackPeer(c.Request.RemoteAddr) && config.LoopbackHost(c.Request.Host) {
		// A request a reverse proxy on this host forwarded is not
		// trusted: its client is elsewhere. Nor is one whose Host is not
		// this machine's name: a web page that rebinds its own name to
		// 127.0.0.1 would otherwise reach vera through the browser.
		return
	}
	if s.keys.valid(presentedKey(c.Request)) {
		return
	}
	c.Header("WWW-Authenticate", `Bearer realm="vera"`)
	writeError(c.Writer, c.Request.Context(), dialect.Of(c.Request.URL.Path),
		httpError(http.StatusUnauthorized, "this vera needs an API key: send Authorization: Bearer <key> or x-api-key: <key>", nil))
	c.Abort()
}

// presentedKey is the key a request carries, if any.
func presentedKey(r *http.Request) string {
	if k := strings.TrimSpace(r.Header.Get("X-Api-Key")); k != "" {
		return k
	}
	return bearerToken(r.Header.Get("Authorization"))
}

// bearerToken is the token of an "Authorization: Bearer <token>" value
// (the scheme in any case), "" for any other.
func bearerToken(h string) string {
	scheme, token, ok := strings.Cut(strings.TrimSpace(h), " ")
	if ok && strings.EqualFold(scheme, "Bearer") {
		return strings.TrimSpace(token)
	}
	return ""
}

// keys are the credentials vera accepts: server.api_keys, and the admin
// token.
type keys struct {
	api   []string
	admin string
}

// valid compares k in constant time with every key and the admin token.
func (ks keys) valid(k string) bool {
	if k == "" {
		return false
	}
	ok := false
	for _, want := range append(ks.api[:len(ks.api):len(ks.api)], ks.admin) {
		if want != "" && subtle.ConstantTimeCompare([]byte(k), []byte(want)) == 1 {
			ok = true
		}
	}
	return ok
}

// forwardedFromLoopback reports whether a reverse proxy on this host
// forwarded r (it comes from loopback with Forwarded, X-Forwarded-For or
// X-Real-IP). While TrustLoopback is on, it counts such requests and warns
// once: behind a reverse proxy on the same host, server.trust_loopback
// should be false.
func (s *Server) forwardedFromLoopback(r *http.Request) bool {
	if !config.Forwarded(r) || !config.LoopbackPeer(r.RemoteAddr) {
		return false
	}
	if !s.TrustLoopback {
		return true
	}
	if s.forwarded.Add(1) == 1 {
		s.log.Warn("a loopback client sent forwarding headers: a reverse proxy on this host makes every client look local; "+
			"vera does not trust these requests as local, and server.trust_loopback should be false (see vera check)", slog.String("path", r.URL.Path))
	}
	return true
}

// ForwardedLoopback counts the loopback requests that carried forwarding
// headers while TrustLoopback was on.
func (s *Server) ForwardedLoopback() int64 { return s.forwarded.Load() }
