// Package proxy is vera's HTTP face: it answers every Ollama route by
// forwarding it to Ollama unchanged and streaming the answer back as it
// comes, intercepts /api/chat and /v1/chat/completions to capture (and,
// with memory, to extend) the conversation, and serves vera's own routes
// such as /healthz.
package proxy

import (
	"bytes"
	"context"
	"encoding/json"
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
	"sync/atomic"
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

// Recaller decides what memory to inject into a chat.
type Recaller interface {
	Build(ctx context.Context, req memory.Request) *memory.Context
}

var _ Recaller = (*memory.Builder)(nil)

// Server is vera's HTTP handler. Set the optional fields before calling
// Handler.
type Server struct {
	// Recorder receives finished turns; nil records nothing.
	Recorder Recorder
	// Memory builds the injected layers; nil forwards chats as they are.
	Memory Recaller
	// Debug, when set, gets one JSON line per chat.
	Debug *DebugLog
	// MemoryHealth reports the store and the embedder for /healthz; nil
	// leaves those sections out (memory disabled).
	MemoryHealth func(context.Context) (StoreHealth, EmbedderHealth)
	// NamespaceHeader names the request header that scopes memory; empty
	// means X-OpenWebUI-User-Id.
	NamespaceHeader string
	// Version is reported by /healthz.
	Version string
	// Curator serves /curator/run and /curator/status; nil answers 503.
	Curator Curator
	// CuratorSchedule and CuratorNext describe the schedule for status.
	CuratorSchedule string
	CuratorNext     func() time.Time
	// AdminToken guards the admin routes; empty serves them to loopback
	// clients only.
	AdminToken string

	upstream *url.URL
	log      *slog.Logger
	rp       *httputil.ReverseProxy
	probe    *http.Client
	windows  *contextWindows
	// memoryDown is set while memory fails, so that the failure is logged
	// once, when it starts, and its end once too.
	memoryDown atomic.Bool
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
	s.windows = &contextWindows{
		client: &http.Client{Transport: transport},
		base:   func(p string) string { return upstream.JoinPath(p).String() },
	}
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
	e.POST("/curator/run", s.admin, s.handle(s.curatorRun))
	e.GET("/curator/status", s.admin, s.handle(s.curatorStatus))
	e.POST("/api/chat", s.handle(s.chat))
	e.POST("/v1/chat/completions", s.handle(s.openAIChat))
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

// chatRequest is what memory needs from a chat request, whichever API it
// came through: Ollama's /api/chat or the OpenAI-compatible
// /v1/chat/completions.
type chatRequest interface {
	model() string
	memoryMessages() []memory.Message
	// options returns num_ctx and the answer's token cap; 0 when unset.
	options() (numCtx, numPredict int)
	lastUser() string
	// withMemory returns the request to forward with mc's layers in place,
	// or nil when they change nothing (the original bytes then go out).
	withMemory(mc *memory.Context) any
}

// chat serves /api/chat.
func (s *Server) chat(c *gin.Context) error {
	return s.serveChat(c, false, func(b []byte) (chatRequest, error) { return ParseChatRequest(b) })
}

// openAIChat serves /v1/chat/completions.
func (s *Server) openAIChat(c *gin.Context) error {
	return s.serveChat(c, true, func(b []byte) (chatRequest, error) { return ParseOpenAIRequest(b) })
}

// serveChat injects memory into a chat, forwards it, and tees the answer so
// the finished turn can be recorded once the client has it.
func (s *Server) serveChat(c *gin.Context, openai bool, parse func([]byte) (chatRequest, error)) error {
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
	req, err := parse(body)
	if err != nil {
		return httpError(http.StatusBadRequest, err.Error(), nil)
	}

	ns := s.namespace(r)
	off := memoryOff(r)
	var mc *memory.Context
	if s.Memory != nil {
		mc = s.recall(c, req, ns, off)
		if forward := req.withMemory(mc); forward != nil {
			if body, err = json.Marshal(forward); err != nil {
				return fmt.Errorf("encoding the chat request: %w", err)
			}
		}
		c.Writer.Header().Set("X-Vera-Context", fmt.Sprintf("semantic=%d; recent=%d; tokens=%d", len(mc.Semantic), len(mc.RecentIDs), mc.Tokens()))
	}

	out := r.Clone(r.Context())
	out.Body = io.NopCloser(bytes.NewReader(body))
	out.ContentLength = int64(len(body))
	out.Header.Del("Content-Length")
	out.GetBody = nil

	var tee *answerTee
	if (s.Recorder != nil && !off) || s.Debug != nil {
		tee = &answerTee{openai: openai}
		out = out.WithContext(withTee(out.Context(), tee))
	}
	s.rp.ServeHTTP(c.Writer, out)

	// Reached only when the whole answer went out (a broken stream panics
	// with http.ErrAbortHandler inside ServeHTTP).
	if tee == nil {
		return nil
	}
	answer, ok := tee.Answer()
	if s.Debug != nil {
		s.Debug.Chat(c.GetString(requestIDKey), ns, req.model(), mc, body, len(answer), ok)
	}
	user := req.lastUser()
	if !ok || off || s.Recorder == nil || user == "" {
		return nil
	}
	s.Recorder.Record(memory.Turn{
		Namespace: ns,
		Model:     req.model(),
		User:      user,
		Assistant: answer,
		Time:      time.Now().UTC(),
	})
	return nil
}

// recall builds the memory layers for a chat. It never fails the chat: a
// memory failure is logged and the chat goes on without memory.
func (s *Server) recall(c *gin.Context, req chatRequest, ns string, off bool) *memory.Context {
	ctx := c.Request.Context()
	numCtx, numPredict := req.options()
	mreq := memory.Request{Namespace: ns, NoMemory: off, ContextLength: numCtx, AnswerTokens: max(numPredict, 0)}
	if !off && numCtx <= 0 {
		mreq.ContextLength = s.windows.lookup(ctx, req.model())
	}
	mreq.Messages = req.memoryMessages()
	mc := s.Memory.Build(ctx, mreq)
	id := slog.String("request_id", c.GetString(requestIDKey))
	switch {
	case mc.Err != nil && s.memoryDown.CompareAndSwap(false, true):
		s.log.Warn("memory failing: chats are answered without it until it recovers",
			slog.String("namespace", ns), slog.Any("error", mc.Err), id)
	case mc.Err != nil:
		s.log.Debug("chat answered without memory", slog.String("namespace", ns), slog.Any("error", mc.Err), id)
	case s.memoryDown.CompareAndSwap(true, false):
		s.log.Info("memory recovered", id)
	}
	return mc
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
	c.Set(requestIDKey, id)
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
