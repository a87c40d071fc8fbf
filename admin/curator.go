package admin

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/vera-proxy/vera/curator"
)

// errCuratorOff answers the curator's routes when memory is disabled.
var errCuratorOff = httpError(http.StatusServiceUnavailable, "the curator is off (memory.enabled = false)")

// curatorRun serves POST /curator/run[?dry_run=true][&namespace=NS]: one
// run, answered with its result (409 while another runs).
func (s *Server) curatorRun(c *gin.Context) error {
	if s.Curator == nil {
		return errCuratorOff
	}
	var o curator.Options
	if v := c.Query("dry_run"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return httpError(http.StatusBadRequest, "dry_run: want true or false")
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
		return errCuratorOff
	}
	st := gin.H{"running": s.Curator.Running(), "last": s.Curator.Last(), "schedule": s.CuratorSchedule}
	if next := s.nextRun(); next != "" {
		st["next_run"] = next
	}
	c.JSON(http.StatusOK, st)
	return nil
}

// nextRun is the time of the next scheduled run, "" when none is known.
func (s *Server) nextRun() string {
	if s.CuratorNext == nil {
		return ""
	}
	next := s.CuratorNext()
	if next.IsZero() {
		return ""
	}
	return next.Format(time.RFC3339)
}
