package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
)

// defaultBodyIdle is server.body_idle_timeout's default.
const defaultBodyIdle = 60 * time.Second

// errBodyIdle is a request body that stopped sending.
var errBodyIdle = errors.New("request body stalled")

// idleBody ends a request body that sends nothing for timeout
// (server.body_idle_timeout): the connection's read deadline is pushed
// forward before every read, so a body that keeps flowing, a blob of
// gigabytes included, is never cut, while a stalled one cannot hold its
// connection forever.
type idleBody struct {
	io.ReadCloser
	rc      *http.ResponseController
	timeout time.Duration
	stalled bool
}

func (b *idleBody) Read(p []byte) (int, error) {
	if err := b.rc.SetReadDeadline(time.Now().Add(b.timeout)); err != nil {
		return b.ReadCloser.Read(p) // not a connection that takes deadlines
	}
	n, err := b.ReadCloser.Read(p)
	var ne interface{ Timeout() bool }
	if err != nil && errors.As(err, &ne) && ne.Timeout() {
		b.stalled = true
		return n, fmt.Errorf("%w: no data for %s", errBodyIdle, b.timeout)
	}
	if err != nil {
		// The body is over: the server sets its own deadlines for the
		// next request.
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

// limitBodyIdle wraps every request body in an idleBody.
func (s *Server) limitBodyIdle(c *gin.Context) {
	r := c.Request
	if r.Body == nil || r.Body == http.NoBody {
		c.Next()
		return
	}
	timeout := s.BodyIdleTimeout
	if timeout <= 0 {
		timeout = defaultBodyIdle
	}
	b := &idleBody{ReadCloser: r.Body, rc: http.NewResponseController(c.Writer), timeout: timeout}
	r.Body = b
	c.Request = r.WithContext(context.WithValue(r.Context(), idleKey{}, b))
	c.Next()
	_ = b.rc.SetReadDeadline(time.Time{})
}

type idleKey struct{}

// bodyStalled reports whether r's body was ended for sending nothing.
func bodyStalled(r *http.Request) bool {
	b, ok := r.Context().Value(idleKey{}).(*idleBody)
	return ok && b.stalled
}
