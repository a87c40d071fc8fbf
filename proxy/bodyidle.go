package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/vera-proxy/vera/httperr"
)

// defaultBodyIdle is server.body_idle_timeout's default.
const defaultBodyIdle = 60 * time.Second

// drainGrace is how long, at most, a request whose body its route left
// unread may go on sending it once answered, before its connection is
// closed: enough for a client that sent its whole body to read the answer
// rather than a reset connection (net/http waits half a second for the same
// reason), too short for one that sends nothing to hold the connection.
const drainGrace = time.Second

// errBodyIdle is a request body that stopped sending: 408 on every route.
var errBodyIdle = httperr.New(http.StatusRequestTimeout, "request body stalled", nil)

// idleBody ends a request body that sends nothing for timeout
// (server.body_idle_timeout): the connection's read deadline is pushed
// forward before every read, so a body that keeps flowing, a blob of
// gigabytes included, is never cut, while a stalled one cannot hold its
// connection forever.
type idleBody struct {
	io.ReadCloser
	rc      *http.ResponseController
	timeout time.Duration
	// Set by the reads, which may run on another goroutine than the
	// handler's (a passthrough's Transport).
	eof     atomic.Bool
	stalled atomic.Bool
}

func (b *idleBody) Read(p []byte) (int, error) {
	if err := b.rc.SetReadDeadline(time.Now().Add(b.timeout)); err != nil {
		return b.ReadCloser.Read(p) // not a connection that takes deadlines
	}
	n, err := b.ReadCloser.Read(p)
	var ne interface{ Timeout() bool }
	switch {
	case err == nil:
	case errors.As(err, &ne) && ne.Timeout():
		b.stalled.Store(true)
		return n, fmt.Errorf("%w: no data for %s", errBodyIdle, b.timeout)
	default:
		if err == io.EOF {
			b.eof.Store(true)
		}
		// The body is over: the server sets its own deadlines for the next
		// request, and its background read of the connection (which cancels
		// the request when the client goes) must not time out under a
		// long answer.
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

// Stalled reports whether the body was ended for sending nothing; the
// admin routes ask it of their request's body.
func (b *idleBody) Stalled() bool { return b.stalled.Load() }

// limitBodyIdle holds every request body to server.body_idle_timeout, on
// every route (vera's own, /mcp and the refusals of the access checks
// included), while the handler runs and after it returns. net/http reads
// what a handler left of a body, to keep the connection for the next
// request: before it sends the answer, and again once the handler is done,
// both with no deadline of their own. A client that declares a body and
// sends nothing would hold the connection as long as it likes.
func (s *Server) limitBodyIdle(c *gin.Context) {
	r := c.Request
	if r.Body == nil || r.Body == http.NoBody {
		c.Next()
		return
	}
	b := &idleBody{ReadCloser: r.Body, rc: http.NewResponseController(c.Writer), timeout: s.bodyIdle()}
	// Until the handler reads the body, any read of it that the handler
	// does not make (closing it drains it) waits no longer either.
	_ = b.rc.SetReadDeadline(time.Now().Add(b.timeout))
	w := &unreadWriter{ResponseWriter: c.Writer, body: b}
	c.Writer = w
	r.Body = b
	c.Request = r.WithContext(context.WithValue(r.Context(), idleKey{}, b))
	c.Next()
	w.finish()
}

// bodyIdle is the body idle timeout in force.
func (s *Server) bodyIdle() time.Duration {
	if s.BodyIdleTimeout <= 0 {
		return defaultBodyIdle
	}
	return s.BodyIdleTimeout
}

// unreadWriter marks an answer "Connection: close" when it goes out before
// its request's body was read to the end (a route that does not need it, a
// refusal, a stall): net/http then sends it at once, where it would first
// read the rest of the body, and ends the connection after it.
type unreadWriter struct {
	gin.ResponseWriter
	body *idleBody
}

// closeIfUnread runs just before the answer's header goes out.
func (w *unreadWriter) closeIfUnread() {
	if !w.ResponseWriter.Written() && !w.body.eof.Load() {
		w.Header().Set("Connection", "close")
	}
}

func (w *unreadWriter) Write(p []byte) (int, error) {
	w.closeIfUnread()
	return w.ResponseWriter.Write(p)
}

func (w *unreadWriter) WriteString(s string) (int, error) {
	w.closeIfUnread()
	return w.ResponseWriter.WriteString(s)
}

func (w *unreadWriter) WriteHeaderNow() {
	w.closeIfUnread()
	w.ResponseWriter.WriteHeaderNow()
}

func (w *unreadWriter) Flush() {
	w.closeIfUnread()
	w.ResponseWriter.Flush()
}

func (w *unreadWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// finish runs once the handler is done. A body read to its end is left to
// the server; one that is not is not waited for: the answer (if nothing
// went out yet) closes the connection, and what net/http reads of the rest
// gets drainGrace at most, nothing after a stall.
func (w *unreadWriter) finish() {
	b := w.body
	if b.eof.Load() {
		return
	}
	w.closeIfUnread()
	grace := min(b.timeout, drainGrace)
	if b.stalled.Load() {
		grace = 0
	}
	_ = b.rc.SetReadDeadline(time.Now().Add(grace))
}

type idleKey struct{}

// bodyStalled reports whether r's body was ended for sending nothing.
func bodyStalled(r *http.Request) bool {
	b, ok := r.Context().Value(idleKey{}).(*idleBody)
	return ok && b.stalled.Load()
}
