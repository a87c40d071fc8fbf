package proxy

import (
	"errors"
	"fmt"
	"log"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
)

// Every request gets an id, one log line when it ends (also when its
// stream was aborted) and a recovery from a panic of its handler.

// statusWriter is satisfied by gin's ResponseWriter; it lets the log line
// report what went out.
type statusWriter interface {
	Status() int
	Size() int
}

// logRequests writes one line per request, also for requests whose stream
// was aborted (the panic passes through after the line is written).
func (s *Server) logRequests(c *gin.Context) {
	start := time.Now()
	id := newRequestID()
	c.Set(requestIDKey, id)
	ctx, note := withErrorNote(c.Request.Context())
	note.start = start
	c.Request = c.Request.WithContext(ctx)
	r := c.Request
	completed := false
	defer func() {
		var w statusWriter = c.Writer
		level := slog.LevelInfo
		attrs := []slog.Attr{
			slog.String("method", r.Method),
			slog.String("path", r.URL.Path),
			slog.Int("status", w.Status()),
			slog.Int("bytes", max(w.Size(), 0)),
			slog.Duration("duration", time.Since(start)),
			slog.String("request_id", id),
		}
		if note.err != nil {
			attrs = append(attrs, slog.Any("error", note.err))
		}
		if !completed {
			attrs = append(attrs, slog.Bool("aborted", true))
			level = slog.LevelWarn
			if r.Context().Err() != nil {
				level = slog.LevelDebug // the client hung up: its choice
			}
		}
		s.log.LogAttrs(r.Context(), level, "request", attrs...)
		s.Metrics.request(c.FullPath(), dialectIn(c), w.Status(), time.Since(start))
	}()
	c.Next()
	completed = true
}

// recoverPanics turns a handler panic into a 500 (or an aborted connection
// once the response has started). http.ErrAbortHandler passes through, as it
// is how a broken stream is cut: gin's own recovery would turn it into a
// clean end of the response.
func (s *Server) recoverPanics(c *gin.Context) {
	defer func() {
		v := recover()
		if v == nil {
			return
		}
		if err, ok := v.(error); ok && errors.Is(err, http.ErrAbortHandler) {
			panic(v)
		}
		s.log.Error("panic in handler", slog.String("path", c.Request.URL.Path), slog.Any("panic", v))
		if c.Writer.Written() {
			panic(http.ErrAbortHandler)
		}
		writeError(c.Writer, c.Request.Context(), dialectIn(c), httpError(http.StatusInternalServerError, fmt.Sprintf("internal error: %v", v), nil))
	}()
	c.Next()
}

// requestIDKey holds the request id in the gin context.
const requestIDKey = "vera.request_id"

// newRequestID returns a short random id for correlating log lines.
func newRequestID() string {
	return fmt.Sprintf("%016x", rand.Uint64())
}

// slogAdapter routes the ReverseProxy's own log lines (mostly clients
// hanging up mid-stream) to slog at debug level.
func slogAdapter(l *slog.Logger) *log.Logger {
	return slog.NewLogLogger(l.Handler(), slog.LevelDebug)
}
