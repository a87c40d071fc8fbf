// Package proxy is vera's HTTP face: it answers every Ollama route by
// forwarding it to Ollama unchanged and streaming the answer back as it
// comes, intercepts /api/chat to capture (and, with memory, to extend) the
// conversation, and serves vera's own routes such as /healthz.
package proxy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/vera-proxy/vera/memory"
)

// maxChatBody bounds an /api/chat request body, which vera must read whole
// to work on its messages. Images travel inside it as base64.
const maxChatBody = 256 << 20

// Recorder receives each finished chat turn. Record is called after the
// answer has reached the client and must not block on slow work.
type Recorder interface {
	Record(memory.Turn)
}

// Server is vera's HTTP handler. Set the optional fields before calling
// Handler.
type Server struct {
	// Recorder receives finished turns; nil records nothing.
	Recorder Recorder
	// NamespaceHeader names the request header that scopes memory; empty
	// means X-OpenWebUI-User-Id.
	NamespaceHeader string
	// Version is reported by /healthz.
	Version string

	upstream *url.URL
	log      *slog.Logger
	rp       *httputil.ReverseProxy
	probe    *http.Client
}

// New returns a Server forwarding to the Ollama at upstream through
// transport. A nil logger discards.
func New(upstream *url.URL, transport http.RoundTripper, logger *slog.Logger) *Server {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{
		upstream: upstream,
		log:      logger,
		probe:    &http.Client{Transport: transport, Timeout: 3 * time.Second},
	}
	s.rp = s.newReverseProxy(transport)
	return s
}

// Handler returns the router serving every route.
func (s *Server) Handler() http.Handler {
	e := gin.New()
	e.ContextWithFallback = true
	// Anything vera does not own goes to Ollama as it is: no redirects for
	// trailing slashes, no 405s of gin's own.
	e.RedirectTrailingSlash = false
	e.RedirectFixedPath = false
	e.HandleMethodNotAllowed = false
	e.Use(s.logRequests, s.recoverPanics)

	e.GET("/healthz", s.handle(s.healthz))
	e.POST("/api/chat", s.handle(s.chat))
	e.NoRoute(func(c *gin.Context) { s.passthrough(c.Writer, c.Request) })
	return e
}

// handle adapts a handler that returns an error: the error becomes a status
// and an error body, unless bytes have already gone out, in which case the
// connection is aborted so the client cannot mistake it for a clean end.
func (s *Server) handle(h func(*gin.Context) error) gin.HandlerFunc {
	return func(c *gin.Context) {
		err := h(c)
		if err == nil {
			return
		}
		if c.Writer.Written() {
			panic(http.ErrAbortHandler)
		}
		writeError(c.Writer, c.Request, err)
	}
}

// chat forwards /api/chat, teeing the answer so the finished turn can be
// recorded once the client has it.
func (s *Server) chat(c *gin.Context) error {
	r := c.Request
	body, err := io.ReadAll(http.MaxBytesReader(c.Writer, r.Body, maxChatBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return httpError(http.StatusRequestEntityTooLarge, "request body too large", nil)
		}
		if r.Context().Err() != nil {
			return httpError(StatusClientClosed, "client closed request", err)
		}
		return httpError(http.StatusBadRequest, "reading request body", err)
	}
	req, err := ParseChatRequest(body)
	if err != nil {
		return httpError(http.StatusBadRequest, err.Error(), nil)
	}

	out := r.Clone(r.Context())
	out.Body = io.NopCloser(bytes.NewReader(body))
	out.ContentLength = int64(len(body))
	out.GetBody = nil

	var tee *answerTee
	if s.Recorder != nil && !memoryOff(r) {
		tee = &answerTee{}
		out = out.WithContext(withTee(out.Context(), tee))
	}
	s.rp.ServeHTTP(c.Writer, out)

	// Reached only when the whole answer went out (a broken stream panics
	// with http.ErrAbortHandler inside ServeHTTP).
	if tee == nil {
		return nil
	}
	answer, ok := tee.Answer()
	if !ok || req.LastUser() == "" {
		return nil
	}
	s.Recorder.Record(memory.Turn{
		Namespace: s.namespace(r),
		Model:     req.Model,
		User:      req.LastUser(),
		Assistant: answer,
		Time:      time.Now().UTC(),
	})
	return nil
}

// namespace scopes a request's memory: the namespace header, else "default".
func (s *Server) namespace(r *http.Request) string {
	h := s.NamespaceHeader
	if h == "" {
		h = "X-OpenWebUI-User-Id"
	}
	if ns := strings.TrimSpace(r.Header.Get(h)); ns != "" {
		return ns
	}
	return memory.DefaultNamespace
}

// memoryOff reports whether the client asked for no memory on this request.
func memoryOff(r *http.Request) bool {
	return strings.EqualFold(strings.TrimSpace(r.Header.Get("X-Vera-Memory")), "off")
}

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
		if !completed {
			attrs = append(attrs, slog.Bool("aborted", true))
			level = slog.LevelWarn
			if r.Context().Err() != nil {
				level = slog.LevelDebug // the client hung up: its choice
			}
		}
		s.log.LogAttrs(r.Context(), level, "request", attrs...)
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
		writeError(c.Writer, c.Request, httpError(http.StatusInternalServerError, fmt.Sprintf("internal error: %v", v), nil))
	}()
	c.Next()
}

// newRequestID returns a short random id for correlating log lines.
func newRequestID() string {
	return fmt.Sprintf("%016x", rand.Uint64())
}

// slogAdapter routes the ReverseProxy's own log lines (mostly clients
// hanging up mid-stream) to slog at debug level.
func slogAdapter(l *slog.Logger) *log.Logger {
	return slog.NewLogLogger(l.Handler(), slog.LevelDebug)
}
