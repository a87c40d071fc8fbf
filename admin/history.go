package admin

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/vera-proxy/vera/memory"
)

// The history of every memory: who created, edited, forgot, restored,
// superseded, curated, deleted or erased it, and when. Entries hold no
// text, so a memory's history outlives its erasure; a namespace's goes
// with it.

// mountHistory registers the history routes, guarded.
func (s *Server) mountHistory(e *gin.Engine) {
	e.GET("/memories/:id/history", s.guard, handle(s.memoryHistory))
	e.GET("/audit", s.guard, handle(s.audit))
}

// memoryHistory serves GET /memories/{id}/history, oldest first. An
// erased memory still has one; with ?namespace=NS, a memory of another
// namespace has none.
func (s *Server) memoryHistory(c *gin.Context) error {
	ctx, id := c.Request.Context(), c.Param("id")
	es, err := s.Memories.History.Of(ctx, id)
	if err != nil {
		return httpError(http.StatusServiceUnavailable, "reading the history: "+err.Error())
	}
	ns := strings.TrimSpace(c.Query("namespace"))
	if len(es) == 0 || ns != "" && es[0].Namespace != ns {
		if _, err := s.lookup(c); err != nil {
			return err // no such memory, here
		}
		es = []memory.Entry{} // one written before histories were kept
	}
	for i := range es {
		es[i].Namespace = ""
	}
	c.JSON(http.StatusOK, gin.H{"history": es})
	return nil
}

// audit serves GET /audit?namespace=&since=&limit=&cursor=: every change,
// newest first, a page at a time.
func (s *Server) audit(c *gin.Context) error {
	q := memory.AuditQuery{Namespace: strings.TrimSpace(c.Query("namespace")), Cursor: c.Query("cursor"), Limit: 100}
	if v := c.Query("since"); v != "" {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return httpError(http.StatusBadRequest, fmt.Sprintf("since: %q is not an RFC 3339 time such as 2026-11-22T10:00:00Z", v))
		}
		q.Since = t
	}
	if v := c.Query("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			return httpError(http.StatusBadRequest, "limit: want a number from 1 to 1000")
		}
		q.Limit = n
	}
	es, next, err := s.Memories.History.Audit(c.Request.Context(), q)
	if errors.Is(err, memory.ErrBadCursor) {
		return httpError(http.StatusBadRequest, "cursor: not one this audit gave")
	}
	if err != nil {
		return httpError(http.StatusServiceUnavailable, "reading the history: "+err.Error())
	}
	c.JSON(http.StatusOK, gin.H{"history": es, "next_cursor": next})
	return nil
}
