package admin

import (
	"context"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/vera-proxy/vera/config"
	"github.com/vera-proxy/vera/memory"
	"github.com/vera-proxy/vera/ollama"
)

// OllamaHealth is Ollama's part of /healthz and of `vera check`.
type OllamaHealth struct {
	OK        bool    `json:"ok"`
	URL       string  `json:"url"`
	Version   string  `json:"version,omitempty"`
	LatencyMS float64 `json:"latency_ms"`
	Error     string  `json:"error,omitempty"`
}

// StoreHealth is the memory store's part of /healthz.
type StoreHealth struct {
	OK      bool   `json:"ok"`
	Backend string `json:"backend"` // embedded | qdrant
	Path    string `json:"path,omitempty"`
	// URL and Collection locate Qdrant; Queue is the local file that holds
	// turns until Qdrant has them.
	URL        string `json:"url,omitempty"`
	Collection string `json:"collection,omitempty"`
	Queue      string `json:"queue,omitempty"`
	// Pending counts turns committed locally but not yet in the store.
	Pending int    `json:"pending"`
	Error   string `json:"error,omitempty"`
	// Loading is the progress of the index's load after a start; nil once
	// it is loaded. Chats go without memory meanwhile.
	Loading *memory.Progress `json:"loading,omitempty"`
}

// EmbedderHealth is the embedding model's part of /healthz.
type EmbedderHealth struct {
	OK    bool   `json:"ok"`
	Model string `json:"model"`
	Dim   int    `json:"dim,omitempty"`
	Error string `json:"error,omitempty"`
}

// Health is the /healthz document.
type Health struct {
	Status   string          `json:"status"` // ok | degraded | loading
	Version  string          `json:"version"`
	Ollama   OllamaHealth    `json:"ollama"`
	Store    *StoreHealth    `json:"store,omitempty"`
	Embedder *EmbedderHealth `json:"embedder,omitempty"`
	Curator  *CuratorHealth  `json:"curator,omitempty"`
	Cloud    *CloudHealth    `json:"cloud,omitempty"`
	Access   *AccessHealth   `json:"access,omitempty"`
}

// AccessHealth is how clients are let in: whether loopback clients pass
// without a key, and how many requests from loopback carried forwarding
// headers (a reverse proxy on the same host), which `vera check` warns of.
type AccessHealth struct {
	APIKeys           bool  `json:"api_keys"`
	VerifiedIdentity  bool  `json:"verified_identity"`
	TrustLoopback     bool  `json:"trust_loopback"`
	ForwardedLoopback int64 `json:"forwarded_loopback_requests"`
}

// CloudHealth is the cloud's part of /healthz: its provider and models,
// and the fallback model, active while Ollama cannot be reached. The key
// is never in it.
type CloudHealth struct {
	Provider       string   `json:"provider"`
	Models         []string `json:"models"`
	KeySet         bool     `json:"key_set"`
	FallbackModel  string   `json:"fallback_model,omitempty"`
	FallbackActive bool     `json:"fallback_active,omitempty"`
}

// CuratorHealth is the curator's part of /healthz. A failed last run is
// reported, not counted as degraded: chats are not affected.
type CuratorHealth struct {
	Running bool   `json:"running"`
	NextRun string `json:"next_run,omitempty"`
	// LastStatus is the status of the latest run of any namespace.
	LastStatus string `json:"last_status,omitempty"`
	LastRun    string `json:"last_run,omitempty"`
	LastError  string `json:"last_error,omitempty"`
}

// healthz reports whether vera and what it depends on are working. Ollama
// being down makes vera degraded, not dead: vera still answers its own
// routes and reports the error of every forwarded one.
func (s *Server) healthz(c *gin.Context) error {
	ctx := c.Request.Context()
	h := Health{Status: "ok", Version: s.version, Ollama: s.checkOllama(ctx)}
	if !h.Ollama.OK {
		h.Status = "degraded"
	}
	if s.MemoryHealth != nil {
		st, em := s.memoryHealth(ctx, h.Ollama.OK)
		h.Store, h.Embedder = &st, &em
		switch {
		case st.Loading != nil:
			// Just started: everything is served, chats without memory
			// until the store's index is loaded.
			h.Status = "loading"
		case !st.OK || !em.OK:
			h.Status = "degraded"
		}
	}
	if s.Curator != nil {
		h.Curator = s.curatorHealth()
	}
	if s.AccessHealth != nil {
		ah := s.AccessHealth()
		h.Access = &ah
	}
	if s.CloudHealth != nil {
		ch := s.CloudHealth()
		ch.FallbackActive = ch.FallbackModel != "" && !h.Ollama.OK
		h.Cloud = &ch
	}
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusOK, h)
	return nil
}

// memoryHealth asks MemoryHealth, with its errors redacted.
func (s *Server) memoryHealth(ctx context.Context, ollamaOK bool) (StoreHealth, EmbedderHealth) {
	st, em := s.MemoryHealth(ctx)
	// The embedder's error comes from a request to Ollama's URL.
	st.Error, em.Error = config.RedactText(st.Error), config.RedactIn(em.Error, s.ollama.Base())
	if !ollamaOK {
		// The embedding model runs on Ollama: what the embedder last
		// knew (a vector size learnt at start) says nothing now.
		em.OK, em.Error = false, "ollama unreachable: the embedding model runs on it"
	}
	return st, em
}

// curatorHealth reports the curator's schedule and its latest run.
func (s *Server) curatorHealth() *CuratorHealth {
	ch := &CuratorHealth{Running: s.Curator.Running(), NextRun: s.nextRun()}
	var latest time.Time
	for _, r := range s.Curator.Last() {
		if r.Finished.After(latest) {
			latest = r.Finished
			ch.LastStatus, ch.LastRun, ch.LastError = string(r.Status), r.Finished.Format(time.RFC3339), r.Error
		}
	}
	return ch
}

// checkOllama asks Ollama for its version, with a short timeout.
func (s *Server) checkOllama(ctx context.Context) OllamaHealth {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	return ProbeOllama(ctx, s.ollama)
}

// ProbeOllama asks the Ollama behind c for its version. The URL is shown
// redacted, also inside errors (Go's quote the URL they failed on), since
// /healthz needs no token.
func ProbeOllama(ctx context.Context, c *ollama.Client) OllamaHealth {
	base := c.Base()
	h := OllamaHealth{URL: config.Redact(base)}
	start := time.Now()
	v, err := c.Version(ctx)
	h.LatencyMS = float64(time.Since(start).Microseconds()) / 1000
	if err != nil {
		h.Error = config.RedactIn(err.Error(), base)
		return h
	}
	h.OK, h.Version = true, v
	return h
}
