// Package admin serves vera's own routes, apart from Ollama's surface:
// /healthz, and /curator/run and /curator/status behind the admin guard.
// The proxy mounts them on its router, so they get its request
// log, panic recovery and body idle limit (a stalled body is answered 408).
package admin

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/vera-proxy/vera/config"
	"github.com/vera-proxy/vera/curator"
	"github.com/vera-proxy/vera/httperr"
	"github.com/vera-proxy/vera/memory"
	"github.com/vera-proxy/vera/ollama"
)

// Curator is the curator as the admin routes see it.
type Curator interface {
	Run(ctx context.Context, o curator.Options) curator.Result
	Last() map[string]curator.Result
	Running() bool
}

var _ Curator = (*curator.Curator)(nil)

// Server serves vera's own routes. Set the optional fields before the
// first request.
type Server struct {
	// Token guards the admin routes; empty serves them to loopback clients
	// only, and only while TrustLoopback is set.
	Token string
	// TrustLoopback serves the admin routes without a token to a client on
	// this machine: a loopback peer, no forwarding header, a loopback Host
	// (server.trust_loopback). An API key never opens them.
	TrustLoopback bool
	// MemoryHealth reports the store and the embedder for /healthz; nil
	// leaves those sections out (memory disabled).
	MemoryHealth func(context.Context) (StoreHealth, EmbedderHealth)
	// Curator serves /curator/run and /curator/status; nil answers 503.
	Curator Curator
	// CuratorSchedule and CuratorNext describe the schedule for status and
	// /healthz.
	CuratorSchedule string
	CuratorNext     func() time.Time
	// CloudHealth describes the cloud for /healthz; nil: no cloud.
	CloudHealth func() CloudHealth
	// AccessHealth describes access for /healthz; nil: left out.
	AccessHealth func() AccessHealth
	// Memories serves /memories*; nil: memory is off.
	Memories *memory.Service
	// Metrics is the registry /metrics serves; nil: no /metrics.
	Metrics *prometheus.Registry

	version string
	ollama  *ollama.Client // probed by /healthz
}

// New returns a Server reporting version and probing the Ollama behind oc.
func New(version string, oc *ollama.Client) *Server {
	return &Server{version: version, ollama: oc}
}

// Mount registers vera's own routes on e.
func (s *Server) Mount(e *gin.Engine) {
	e.GET("/healthz", handle(s.healthz))
	if s.Metrics != nil {
		// No token: scrapers read it; no label holds a namespace.
		e.GET("/metrics", gin.WrapH(promhttp.HandlerFor(s.Metrics, promhttp.HandlerOpts{})))
	}
	e.POST("/curator/run", s.guard, handle(s.curatorRun))
	e.GET("/curator/status", s.guard, handle(s.curatorStatus))
	s.mountMemories(e)
	s.mountUI(e)
}

// guard guards the admin routes: with a token set, a request needs
// "Authorization: Bearer <token>"; without one, only clients on this
// machine are served, and only while TrustLoopback is set (behind a reverse
// proxy on the same host every client would look local). Either way, a
// browser request from another site is refused, and without a token the
// Host must name this machine: a web page cannot then use a browser on
// this machine to reach the admin routes (a cross-site POST, or DNS
// rebinding). An API key opens Ollama's routes, never these.
func (s *Server) guard(c *gin.Context) {
	if err := sameSite(c.Request); err != nil {
		writeError(c.Writer, err)
		c.Abort()
		return
	}
	if s.Token != "" {
		got, ok := bearer(c.GetHeader("Authorization"))
		if !ok || subtle.ConstantTimeCompare([]byte(strings.TrimSpace(got)), []byte(s.Token)) != 1 {
			c.Header("WWW-Authenticate", `Bearer realm="vera admin"`)
			writeError(c.Writer, httpError(http.StatusUnauthorized, "admin routes need Authorization: Bearer <VERA_ADMIN_TOKEN>"))
			c.Abort()
			return
		}
		c.Next()
		return
	}
	if !s.TrustLoopback {
		writeError(c.Writer, httpError(http.StatusForbidden, "admin routes need VERA_ADMIN_TOKEN: with server.trust_loopback = false no client is trusted as this machine's; "+
			"set VERA_ADMIN_TOKEN (server.admin_token) and send Authorization: Bearer <token>"))
		c.Abort()
		return
	}
	if !config.LoopbackPeer(c.Request.RemoteAddr) || config.Forwarded(c.Request) {
		// A request a reverse proxy forwarded comes from elsewhere, even
		// if the proxy runs on this host.
		writeError(c.Writer, httpError(http.StatusForbidden, "admin routes are served only to loopback clients unless VERA_ADMIN_TOKEN is set"))
		c.Abort()
		return
	}
	if !config.LoopbackHost(c.Request.Host) {
		writeError(c.Writer, httpError(http.StatusForbidden, fmt.Sprintf(
			"admin routes without VERA_ADMIN_TOKEN are served only at localhost or 127.0.0.1, not at %q; set VERA_ADMIN_TOKEN to use another name", c.Request.Host)))
		c.Abort()
		return
	}
	c.Next()
}

// sameSite refuses a browser's request that another site made: its
// Sec-Fetch-Site says cross-site, or its Origin is not the host it was
// sent to. Clients that are not browsers send neither header.
func sameSite(r *http.Request) error {
	if r.Header.Get("Sec-Fetch-Site") == "cross-site" {
		return httpError(http.StatusForbidden, "admin routes refuse requests another web site makes from a browser")
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return nil
	}
	u, err := url.Parse(origin)
	if err != nil || !strings.EqualFold(u.Host, r.Host) {
		return httpError(http.StatusForbidden, fmt.Sprintf("admin routes refuse requests from another origin (%q)", origin))
	}
	return nil
}

// bearer returns the token of an "Authorization: Bearer <token>" header.
// The scheme is matched in any case (RFC 9110 §11.1: "bearer" is as good as
// "Bearer").
func bearer(h string) (string, bool) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(h), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return token, true
}

// httpError returns an error answered with code and msg.
func httpError(code int, msg string) error { return httperr.New(code, msg, nil) }

// handle adapts a handler that returns an error: the error becomes a status
// and Ollama's {"error":"..."} body, unless bytes have already gone out, in
// which case the connection is aborted so the client cannot mistake it for
// a clean end.
func handle(h func(*gin.Context) error) gin.HandlerFunc {
	return func(c *gin.Context) {
		err := h(c)
		if err == nil {
			return
		}
		if c.Writer.Written() {
			panic(http.ErrAbortHandler)
		}
		if bodyStalled(c.Request) {
			// Whatever the handler made of the failed read (a bad line, bad
			// JSON), the client stopped sending.
			err = httpError(http.StatusRequestTimeout, "request body stalled: the client sent nothing for too long (server.body_idle_timeout)")
		}
		writeError(c.Writer, err)
	}
}

// bodyStalled reports whether r's body was ended for sending nothing: the
// proxy's body idle limit (server.body_idle_timeout), which holds every
// route's body, says so.
func bodyStalled(r *http.Request) bool {
	b, ok := r.Body.(interface{ Stalled() bool })
	return ok && b.Stalled()
}

// writeError answers err in Ollama's shape, {"error":"..."}, as every
// route vera serves does outside /v1.
func writeError(w http.ResponseWriter, err error) {
	code := httperr.Status(err)
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Del("Content-Length")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
}
