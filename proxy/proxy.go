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
	"slices"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/gin-gonic/gin"

	"github.com/vera-proxy/vera/memory"
	"github.com/vera-proxy/vera/ollama"
)

// maxChatBody bounds an /api/chat request body, which vera must read whole
// to work on its messages. Images travel inside it as base64.
const maxChatBody = 256 << 20

// Recorder receives each finished chat turn. Record is called before the
// end of the answer reaches the client, and returns once the turn is
// committed durably or ctx ends.
type Recorder interface {
	Record(ctx context.Context, t memory.Turn) error
}

var _ Recorder = (*memory.Writer)(nil)

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
	// RecordTasks gives Open WebUI's background task requests memory like
	// any chat; the default (false) leaves them alone (memory.skip_tasks).
	RecordTasks bool
	// BodyIdleTimeout ends a request body that sends no byte for this
	// long; 0 means 60s.
	BodyIdleTimeout time.Duration

	upstream *url.URL
	log      *slog.Logger
	rp       *httputil.ReverseProxy
	probe    *http.Client
	windows  *ollama.ModelInfo
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
	s.windows = ollama.NewModelInfo(ollama.New(upstream, transport))
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
	e.Use(s.logRequests, s.recoverPanics, s.limitBodyIdle)

	e.GET("/healthz", s.handle(s.healthz))
	e.POST("/curator/run", s.admin, s.handle(s.curatorRun))
	e.GET("/curator/status", s.admin, s.handle(s.curatorStatus))
	for route, d := range map[string]dialect{
		"/api/chat":            ollamaChat,
		"/api/generate":        ollamaGenerate,
		"/v1/chat/completions": openAIChat,
		"/v1/responses":        openAIResponses,
		"/v1/messages":         anthropicMessages,
	} {
		e.POST(route, s.handle(func(c *gin.Context) error { return s.serveChat(c, d) }))
	}
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

// chatRequest is what memory needs from a chat request, whichever dialect
// it came in.
type chatRequest interface {
	model() string
	// conversation reports whether the request carries a conversation
	// vera works on; one that does not (a load or unload call, a raw
	// prompt...) is forwarded byte for byte.
	conversation() bool
	memoryMessages() []memory.Message
	// options returns num_ctx and the answer's token cap; 0 when unset.
	options() (numCtx, numPredict int)
	lastUser() string
	// withMemory returns the request to forward with mc's layers in place,
	// or nil when they change nothing (the original bytes then go out).
	withMemory(mc *memory.Context) any
}

// maxHold bounds how long the end of an answer waits for its turn to be
// committed (SPEC §4): past it the answer ends anyway and health says why.
const maxHold = time.Second

// exposedHeaders lists every X-Vera-* header vera sends, so browser
// clients may read them (SPEC §3).
const exposedHeaders = "X-Vera-Context, X-Vera-Memories, X-Vera-Tier, X-Vera-Fallback, X-Vera-Forgot, X-Vera-VRAM"

// maxMemoriesHeader is how many ids X-Vera-Memories lists at most.
const maxMemoriesHeader = 50

// serveChat injects memory into a chat, forwards it, and tees the answer so
// the finished turn is committed before the client has the answer's end.
func (s *Server) serveChat(c *gin.Context, d dialect) error {
	r := c.Request
	body, err := readChatBody(c.Writer, r)
	if err != nil {
		return err
	}
	req, err := d.parse(body)
	if err != nil {
		return httpError(http.StatusBadRequest, err.Error(), nil)
	}
	ns, err := s.namespace(r)
	if err != nil {
		return err
	}
	off, err := memoryOff(r)
	if err != nil {
		return err
	}
	if !req.conversation() {
		// A load or unload call (no messages, an empty prompt), a raw
		// prompt, a code completion: it goes out exactly as it came.
		return s.forward(c, body, nil)
	}
	msgs := req.memoryMessages()
	user := req.lastUser()
	if task := s.task(r, msgs, user); task != "" {
		c.Set(taskKey, task)
		return s.forward(c, body, nil)
	}
	recallMsgs := msgs
	if q, ok := ragUserQuery(user); ok {
		// Open WebUI's RAG template: memory is about the user's own
		// question, never the template or the retrieved documents (which
		// still size the prompt: they are forwarded).
		user = q
		recallMsgs = slices.Clone(msgs)
		for i := len(recallMsgs) - 1; i >= 0; i-- {
			if recallMsgs[i].Role == "user" {
				recallMsgs[i].Content = q
				break
			}
		}
	}

	var mc *memory.Context
	if s.Memory != nil {
		mc = s.recall(c, req, msgs, recallMsgs, ns, off)
		if forward := req.withMemory(mc); forward != nil {
			if body, err = json.Marshal(forward); err != nil {
				return fmt.Errorf("encoding the chat request: %w", err)
			}
		}
		setMemoryHeaders(c.Writer.Header(), mc)
	}

	var tee *answerTee
	if (s.Recorder != nil && !off) || s.Debug != nil {
		tee = &answerTee{d: d}
		if s.Recorder != nil && !off && strings.TrimSpace(user) != "" {
			tee.onEnd = s.commitTurn(c, memory.Turn{Namespace: ns, Model: req.model(), User: user})
		}
	}
	if err := s.forward(c, body, tee); err != nil {
		return err
	}
	if tee != nil && s.Debug != nil {
		answer, ok := tee.Answer()
		s.Debug.Chat(c.GetString(requestIDKey), ns, req.model(), mc, body, len(answer), ok)
	}
	return nil
}

// readChatBody reads a chat request's body, which vera must have whole to
// work on its messages. A body declared too large is refused before a
// byte of it is read.
func readChatBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if r.ContentLength > maxChatBody {
		// Closing is the only way not to read what was announced.
		w.Header().Set("Connection", "close")
		return nil, httpError(http.StatusRequestEntityTooLarge, fmt.Sprintf("request body too large: %d bytes, the limit is %d", r.ContentLength, maxChatBody), nil)
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxChatBody))
	if err == nil {
		return body, nil
	}
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		w.Header().Set("Connection", "close")
		return nil, httpError(http.StatusRequestEntityTooLarge, fmt.Sprintf("request body too large: the limit is %d bytes", maxChatBody), nil)
	case errors.Is(err, errBodyIdle):
		w.Header().Set("Connection", "close")
		return nil, httpError(http.StatusRequestTimeout, err.Error(), nil)
	case r.Context().Err() != nil:
		return nil, httpError(StatusClientClosed, "client closed request", err)
	}
	return nil, httpError(http.StatusBadRequest, "reading request body", err)
}

// forward sends body upstream in place of the request's own, teeing the
// answer through tee when it is set. It returns only once the whole answer
// went out (a broken stream panics with http.ErrAbortHandler inside
// ServeHTTP).
func (s *Server) forward(c *gin.Context, body []byte, tee *answerTee) error {
	r := c.Request
	out := r.Clone(r.Context())
	out.Body = io.NopCloser(bytes.NewReader(body))
	out.ContentLength = int64(len(body))
	out.Header.Del("Content-Length")
	out.GetBody = nil
	rp := s.rp
	if tee != nil {
		// The tee reaches the response through this request's own copy
		// of the proxy (a shallow copy: the transport is shared).
		teed := *s.rp
		teed.ModifyResponse = func(res *http.Response) error {
			res.Body = guardStream(res, tee.wrap(res, res.Body))
			return nil
		}
		rp = &teed
	}
	rp.ServeHTTP(c.Writer, out)
	return nil
}

// commitTurn returns the tee's onEnd for a chat: it commits the finished
// turn to the durable queue, waiting at most maxHold, so that the client
// has its whole answer only once the turn survives a crash.
func (s *Server) commitTurn(c *gin.Context, t memory.Turn) func(string) {
	ctx := context.WithoutCancel(c.Request.Context())
	return func(answer string) {
		t.Assistant, t.Time = answer, time.Now().UTC()
		hctx, cancel := context.WithTimeout(ctx, maxHold)
		defer cancel()
		if err := s.Recorder.Record(hctx, t); err != nil {
			s.log.Debug("answer released before its turn was committed", slog.String("request_id", c.GetString(requestIDKey)), slog.Any("error", err))
		}
	}
}

// setMemoryHeaders reports what was injected (SPEC §3).
func setMemoryHeaders(h http.Header, mc *memory.Context) {
	h.Set("X-Vera-Context", fmt.Sprintf("semantic=%d; recent=%d; rules=%d; tokens=%d", len(mc.Semantic), len(mc.RecentIDs), len(mc.RuleIDs), mc.Tokens()))
	if ids := mc.IDs(); len(ids) > 0 {
		h.Set("X-Vera-Memories", strings.Join(ids[:min(len(ids), maxMemoriesHeader)], ","))
	}
	h.Add("Access-Control-Expose-Headers", exposedHeaders)
}

// task names the background task a request is (SPEC §4, memory.skip_tasks),
// or "" for a conversation.
func (s *Server) task(r *http.Request, msgs []memory.Message, lastUser string) string {
	if s.RecordTasks {
		return ""
	}
	for _, h := range []string{"X-OpenWebUI-Task", "X-Vera-Task"} {
		if v := strings.TrimSpace(r.Header.Get(h)); v != "" {
			return v
		}
	}
	if task := openWebUITask(lastUser); task != "" {
		return task
	}
	if msgs[0].Role == "system" {
		// Open WebUI's tool-calling task puts its template in the system
		// message; its user message is a bare "Query: ...".
		return openWebUITask(msgs[0].Content)
	}
	return ""
}

// recall builds the memory layers for a chat. It never fails the chat: a
// memory failure is logged and the chat goes on without memory.
func (s *Server) recall(c *gin.Context, req chatRequest, msgs, recallMsgs []memory.Message, ns string, off bool) *memory.Context {
	ctx := c.Request.Context()
	numCtx, numPredict := req.options()
	mreq := memory.Request{Namespace: ns, NoMemory: off, ContextLength: numCtx, AnswerTokens: max(numPredict, 0), Messages: msgs}
	if len(recallMsgs) > 0 && &recallMsgs[0] != &msgs[0] {
		mreq.Recall = recallMsgs
	}
	if msgs[0].Role != "system" {
		// Ollama adds the Modelfile's SYSTEM only to requests without a
		// system message: once vera sends one, it must carry it.
		mreq.ModelSystem = s.windows.System(ctx, req.model())
	}
	if !off && numCtx <= 0 {
		mreq.ContextLength = s.windows.Window(ctx, req.model())
	}
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

// maxNamespace is the longest namespace accepted, in bytes (SPEC §4).
const maxNamespace = 256

// namespace scopes a request's memory: the namespace header, else
// "default". A namespace that is not valid UTF-8 or is too long is
// refused: stores would otherwise change its bytes and merge namespaces.
func (s *Server) namespace(r *http.Request) (string, error) {
	h := s.NamespaceHeader
	if h == "" {
		h = "X-OpenWebUI-User-Id"
	}
	ns := strings.TrimSpace(r.Header.Get(h))
	switch {
	case ns == "":
		return memory.DefaultNamespace, nil
	case !utf8.ValidString(ns):
		return "", httpError(http.StatusBadRequest, fmt.Sprintf("header %s: the namespace must be valid UTF-8", h), nil)
	case len(ns) > maxNamespace:
		return "", httpError(http.StatusBadRequest, fmt.Sprintf("header %s: the namespace is %d bytes long; at most %d are allowed", h, len(ns), maxNamespace), nil)
	}
	return ns, nil
}

// memoryOff reads X-Vera-Memory (SPEC §4): off, false, 0 or no (any case)
// turn memory off for the request; on, true, 1, yes or no header leave it
// on; anything else is a mistake worth telling.
func memoryOff(r *http.Request) (bool, error) {
	switch v := strings.ToLower(strings.TrimSpace(r.Header.Get("X-Vera-Memory"))); v {
	case "off", "false", "0", "no":
		return true, nil
	case "", "on", "true", "1", "yes":
		return false, nil
	default:
		return false, httpError(http.StatusBadRequest, fmt.Sprintf("header X-Vera-Memory: %q is not one of on, off, true, false, 1, 0, yes, no", v), nil)
	}
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

// requestIDKey holds the request id in the gin context; taskKey the name
// of the background task a request was taken for.
const (
	requestIDKey = "vera.request_id"
	taskKey      = "vera.task"
)

// newRequestID returns a short random id for correlating log lines.
func newRequestID() string {
	return fmt.Sprintf("%016x", rand.Uint64())
}

// slogAdapter routes the ReverseProxy's own log lines (mostly clients
// hanging up mid-stream) to slog at debug level.
func slogAdapter(l *slog.Logger) *log.Logger {
	return slog.NewLogLogger(l.Handler(), slog.LevelDebug)
}
