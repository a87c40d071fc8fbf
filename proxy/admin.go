package proxy

import (
	"context"
	"crypto/subtle"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/vera-proxy/vera/curator"
)

// Curator is the curator as the HTTP routes see it.
type Curator interface {
	Run(ctx context.Context, o curator.Options) curator.Result
	Last() map[string]curator.Result
	Running() bool
}

// admin guards vera's admin routes (SPEC §6): with an admin token set, a
// request needs "Authorization: Bearer <token>"; without one, only
// loopback clients are served.
func (s *Server) admin(c *gin.Context) {
	if s.AdminToken != "" {
		got, ok := bearer(c.GetHeader("Authorization"))
		if !ok || subtle.ConstantTimeCompare([]byte(strings.TrimSpace(got)), []byte(s.AdminToken)) != 1 {
			c.Header("WWW-Authenticate", `Bearer realm="vera admin"`)
			writeError(c.Writer, c.Request, httpError(http.StatusUnauthorized, "admin routes need Authorization: Bearer <VERA_ADMIN_TOKEN>", nil))
			c.Abort()
			return
		}
		c.Next()
		return
	}
	host, _, err := net.SplitHostPort(c.Request.RemoteAddr)
	if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
		writeError(c.Writer, c.Request, httpError(http.StatusForbidden, "admin routes are served only to loopback clients unless VERA_ADMIN_TOKEN is set", nil))
		c.Abort()
		return
	}
	c.Next()
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

// curatorRun serves POST /curator/run[?dry_run=true][&namespace=NS]: one
// run, answered with its result (409 while another runs).
func (s *Server) curatorRun(c *gin.Context) error {
	if s.Curator == nil {
		return httpError(http.StatusServiceUnavailable, "the curator is off (memory.enabled = false)", nil)
	}
	var o curator.Options
	if v := c.Query("dry_run"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return httpError(http.StatusBadRequest, "dry_run: want true or false", nil)
		}
		o.DryRun = b
	}
	o.Namespace = strings.TrimSpace(c.Query("namespace"))
	// The run finishes even if the client hangs up: half a run is worse.
	res := s.Curator.Run(context.WithoutCancel(c.Request.Context()), o)
	code := http.StatusOK
	switch res.Status {
	case curator.StatusBusy:
		code = http.StatusConflict
	case curator.StatusError:
		code = http.StatusInternalServerError
	}
	c.JSON(code, res)
	return nil
}

// curatorStatus serves GET /curator/status.
func (s *Server) curatorStatus(c *gin.Context) error {
	if s.Curator == nil {
		return httpError(http.StatusServiceUnavailable, "the curator is off (memory.enabled = false)", nil)
	}
	st := gin.H{"running": s.Curator.Running(), "last": s.Curator.Last(), "schedule": s.CuratorSchedule}
	if s.CuratorNext != nil {
		if next := s.CuratorNext(); !next.IsZero() {
			st["next_run"] = next.Format(time.RFC3339)
		}
	}
	c.JSON(http.StatusOK, st)
	return nil
}
