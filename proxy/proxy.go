// Package proxy is vera's HTTP face: it answers every Ollama route by
// forwarding it to Ollama unchanged and streaming the answer back as it
// comes, and intercepts the chat routes of every dialect to capture (and,
// with memory, to extend) the conversation. vera's own routes (package
// admin) are mounted on its router through Server.Own.
package proxy

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/vera-proxy/vera/cloud"
	"github.com/vera-proxy/vera/dialect"
	"github.com/vera-proxy/vera/memory"
	"github.com/vera-proxy/vera/memory/conversation"
	"github.com/vera-proxy/vera/ollama"
	"github.com/vera-proxy/vera/proxy/vram"
)

// Recorder receives each finished chat turn. Record is called before the
// end of the answer reaches the client, and returns once the turn is
// committed durably or ctx ends.
type Recorder interface {
	Record(ctx context.Context, t memory.Turn) error
}

var _ Recorder = (*memory.Writer)(nil)

// Recaller decides what memory to inject into a chat.
type Recaller interface {
	Recall(ctx context.Context, req memory.Request) *memory.Context
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
	// NamespaceHeader names the request header that scopes memory; empty
	// means X-OpenWebUI-User-Id.
	NamespaceHeader string
	// Commands carries out "remember that ..." and "forget that ..." at
	// the start of a user's message; nil: none.
	Commands *memory.Commands
	// Identity, when it has a secret, verifies Open WebUI's signed user
	// token and takes the namespace from it alone (memory.jwt_secret).
	Identity *Identity
	// RecordTasks gives Open WebUI's background task requests memory like
	// any chat; the default (false) leaves them alone (memory.skip_tasks).
	RecordTasks bool
	// OpenWebUIMemory is what becomes of Open WebUI's own memory block in
	// a system message (memory.open_webui_memory): OpenWebUIKeep (also
	// "") forwards it, OpenWebUIDrop removes it. Either way vera counts
	// its facts, injects none of its memories that say the same, and
	// never stores it.
	OpenWebUIMemory string
	// BodyIdleTimeout ends a request body that sends no byte for this
	// long, on every route; 0 means 60s. A body a route leaves unread is
	// not waited for: the answer closes the connection.
	BodyIdleTimeout time.Duration
	// Own registers vera's own routes, before Ollama's surface, so they
	// get the same request log, panic recovery and body idle limit; nil:
	// none.
	Own func(*gin.Engine)
	// Ollama is the client for Ollama's own API (the model-info lookups);
	// nil: one made from New's address and transport.
	Ollama *ollama.Client
	// RecallEveryTurn chooses the layers afresh on every turn of a
	// conversation (memory.stable_prefix = false); by default a
	// conversation's later turns keep its first turn's layers byte for
	// byte, so that Ollama's prompt cache holds.
	RecallEveryTurn bool
	// Conversations are the running conversations, which the admin
	// routes reach too (memory/conversation); nil: a set of its own.
	Conversations *conversation.Set
	// Calibrator learns each model's tokens from its answers, so that
	// budgets count in them; nil: a safe prior for every model.
	Calibrator *Calibrator
	// Cloud serves the names in [cloud.models]; nil: no cloud models.
	Cloud *cloud.Provider
	// Routing sends virtual model names to tier models; nil: off.
	Routing *Routing
	// APIKeys, when set, are needed by every client but loopback ones
	// (while TrustLoopback) on every route but /healthz and /metrics
	// (server.api_keys); AdminToken passes too.
	APIKeys       []string
	TrustLoopback bool
	AdminToken    string
	// Listen is the address vera listens on: while it is a loopback
	// address, a request whose Host is not one of this machine's names is
	// refused (DNS rebinding); nil: no Host check.
	Listen net.Addr
	// AllowedOrigins are browser origins allowed beside Ollama's default
	// list (server.allowed_origins).
	AllowedOrigins []string
	// ChatIDHeader names the header of Open WebUI's chat id; empty means
	// X-OpenWebUI-Chat-Id (memory.chat_id_header).
	ChatIDHeader string
	// Metrics, when set, counts requests, recalls, tier decisions, flushes
	// and fallbacks.
	Metrics *Metrics
	// VRAM makes room on the GPU before large models; nil: off.
	VRAM *vram.Manager
	// StripThink takes <think> blocks that models write inline out of
	// Ollama-dialect answers (routing.strip_think).
	StripThink bool
	// FallbackModel, a cloud name, answers chats for local models while
	// Ollama cannot be reached (cloud.fallback_model); "": none.
	FallbackModel string
	// MCP serves the memory tools on /mcp, for the namespace of each
	// request's identity (as a chat's); nil: no /mcp.
	MCP MCPServer
	// Directory notes who each namespace is, from Open WebUI's user
	// headers; nil: nobody.
	Directory *memory.Directory
	// Usage counts the answers each memory was injected into; nil:
	// none are counted.
	Usage *memory.Usage
	// Policies decide what each model is sent of memory; their turns are
	// stored whatever they are sent.
	Policies Policies

	ollama  upstream
	log     *slog.Logger
	started time.Time // when the names vera lists itself were "modified"
	// forwarded counts loopback requests that carried forwarding headers.
	forwarded atomic.Int64

	// Made once by Handler, from the settings above: the chat pipeline,
	// the passthroughs that forward the routes vera does not own to
	// Ollama (one per dialect a path tells: the shape of their errors),
	// the names vera lists, and the access and browser guards' decisions.
	chats        *pipeline
	passthroughs map[dialect.Dialect]*httputil.ReverseProxy
	catalog      *catalog
	keys         keys
	origins      *Origins
	hosts        hosts
	checkHost    bool
	allowHeaders string
}

// New returns a Server forwarding to the Ollama at base through
// transport. A nil logger discards.
func New(base *url.URL, transport http.RoundTripper, logger *slog.Logger) *Server {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Server{log: logger, ollama: upstream{url: base, transport: transport}, started: time.Now().UTC()}
}

// MCPServer serves the MCP tools (mcp.Server).
type MCPServer interface {
	Handler(namespace func(*http.Request) (string, error), refuse func(http.ResponseWriter, *http.Request, error)) http.Handler
}

// Handler returns the router serving every route.
func (s *Server) Handler() http.Handler {
	s.build()
	e := gin.New()
	e.ContextWithFallback = true
	// Anything vera does not own goes to Ollama as it is: no redirects for
	// trailing slashes, no 405s of gin's own.
	e.RedirectTrailingSlash = false
	e.RedirectFixedPath = false
	e.HandleMethodNotAllowed = false
	// The body idle limit comes first: a refusal by the access checks must
	// not wait for a body either.
	e.Use(s.limitBodyIdle, s.logRequests, s.recoverPanics, s.guardBrowser, s.requireKey)

	if s.Own != nil {
		s.Own(e)
	}
	if s.Cloud != nil || s.Routing != nil {
		s.ownModelLists(e)
	}
	if s.MCP != nil {
		h := gin.WrapH(s.MCP.Handler(s.namespace, func(w http.ResponseWriter, r *http.Request, err error) {
			writeError(w, r.Context(), dialect.Of(r.URL.Path), err)
		}))
		e.POST("/mcp", h)
		e.GET("/mcp", h)
		e.DELETE("/mcp", h)
	}
	for route, d := range map[string]dialect.Dialect{
		"/api/chat":            dialect.OllamaChat{},
		"/api/generate":        dialect.OllamaGenerate{},
		"/v1/chat/completions": dialect.OpenAIChat{},
		"/v1/responses":        dialect.OpenAIResponses{},
		"/v1/messages":         dialect.AnthropicMessages{},
	} {
		e.POST(route, withDialect(d), s.handle(func(c *gin.Context) error {
			return s.chats.serve(c.Writer, c.Request, d, c.GetString(requestIDKey))
		}))
	}
	e.NoRoute(func(c *gin.Context) {
		// The one place a dialect is read off a path: routes vera does
		// not own, for the shape of an error.
		d := dialect.Of(c.Request.URL.Path)
		c.Set(dialectKey, d)
		s.passthrough(c.Writer, c.Request, d)
	})
	return e
}

// build makes, once, what the routes share, from the settings: the
// forwarding to Ollama, the names vera lists, the access and browser
// guards' decisions, and the chat pipeline.
func (s *Server) build() {
	client := s.Ollama
	if client == nil {
		client = ollama.New(s.ollama.url, s.ollama.transport)
	}
	if s.ChatIDHeader == "" {
		s.ChatIDHeader = "X-OpenWebUI-Chat-Id"
	}
	s.keys = keys{api: s.APIKeys, admin: s.AdminToken}
	fw := &forwarder{keys: s.keys, buffers: &bufferPool{}, metrics: s.Metrics, log: s.log}
	s.passthroughs = make(map[dialect.Dialect]*httputil.ReverseProxy)
	for _, d := range dialect.All() {
		s.passthroughs[d] = fw.reverseProxy(s.ollama, d, nil, nil, false)
	}
	s.catalog = &catalog{cloud: s.Cloud, routing: s.Routing, ollama: client}
	s.origins, s.hosts = NewOrigins(s.AllowedOrigins), newHosts()
	if a, ok := s.Listen.(*net.TCPAddr); ok && a.IP.IsLoopback() {
		s.checkHost = true
	}
	s.allowHeaders = allowedHeaders(s.NamespaceHeader, s.ChatIDHeader, identityHeader)
	s.chats = s.newPipeline(fw, client)
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
		writeError(c.Writer, c.Request.Context(), dialectIn(c), err)
	}
}

// dialectKey holds a request's dialect in the gin context, for the error
// writers of middleware that run around the handler.
const dialectKey = "vera.dialect"

// withDialect records the dialect of a route's requests.
func withDialect(d dialect.Dialect) gin.HandlerFunc {
	return func(c *gin.Context) { c.Set(dialectKey, d) }
}

// dialectIn returns the request's dialect: its route's, else the one its
// path tells (vera's own routes).
func dialectIn(c *gin.Context) dialect.Dialect {
	if d, ok := c.Get(dialectKey); ok {
		return d.(dialect.Dialect)
	}
	return dialect.Of(c.Request.URL.Path)
}
