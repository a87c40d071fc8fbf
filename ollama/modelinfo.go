package ollama

import (
	"context"
	"strings"
	"sync"
	"time"
)

// DefaultContextLength is the window Ollama gives a model when neither the
// request nor the model sets one and its server sets none either: 4096
// below 24 GiB of VRAM. memory.DefaultContextLength is the same number.
const DefaultContextLength = 4096

// How long answers of /api/show (a model's settings change only when it is
// re-created) and /api/ps (what is loaded, and with which window) are
// trusted, and how soon a failed /api/show is asked again.
const (
	showTTL    = 5 * time.Minute
	psTTL      = 10 * time.Second
	showRetry  = 30 * time.Second
	askTimeout = 2 * time.Second
)

// ModelInfo caches what a chat needs to know about its model on every
// request: the context window Ollama will run it with, so that injected
// memory never pushes a prompt past it, and its Modelfile SYSTEM prompt.
// A failure to ask is never an error: the window falls back to the
// default, the SYSTEM to none, and Ollama is asked again soon.
//
// Ollama picks a window, in order: the request's options.num_ctx, the
// model's own num_ctx parameter, the server's OLLAMA_CONTEXT_LENGTH or its
// VRAM-based default, capped by what the model was trained for. vera sees
// the first two directly (the request, and /api/show), and the running
// window of a loaded model in /api/ps; otherwise it assumes
// DefaultContextLength, capped by the model's trained length.
type ModelInfo struct {
	client *Client
	// Now is the clock; nil means time.Now.
	Now func() time.Time

	mu   sync.Mutex
	show map[string]shown
	ps   map[string]int // context length by name, as /api/ps says
	psAt time.Time
}

// shown is what is kept of one model's /api/show.
type shown struct {
	numCtx, trained, vocab int
	system                 string
	// until is when the entry must be asked again.
	until time.Time
}

// NewModelInfo returns an empty cache that asks c.
func NewModelInfo(c *Client) *ModelInfo {
	return &ModelInfo{client: c}
}

// Client returns the client the cache asks.
func (m *ModelInfo) Client() *Client { return m.client }

func (m *ModelInfo) now() time.Time {
	if m.Now != nil {
		return m.Now()
	}
	return time.Now()
}

// Window returns the context window Ollama will run model with, for a
// request that sets no options.num_ctx of its own.
func (m *ModelInfo) Window(ctx context.Context, model string) int {
	s := m.shown(ctx, model)
	if s.numCtx > 0 {
		return s.numCtx
	}
	if n := m.running(ctx, model); n > 0 {
		return n
	}
	n := DefaultContextLength
	if s.trained > 0 {
		n = min(n, s.trained)
	}
	return n
}

// Trained returns the context length model was trained for, 0 when
// unknown. Ollama clamps a larger num_ctx to it ("requested context size
// too large for model").
func (m *ModelInfo) Trained(ctx context.Context, model string) int {
	return m.shown(ctx, model).trained
}

// Vocab returns the size of model's vocabulary, 0 when unknown.
func (m *ModelInfo) Vocab(ctx context.Context, model string) int {
	return m.shown(ctx, model).vocab
}

// System returns model's Modelfile SYSTEM prompt, "" when it has none or
// Ollama cannot say.
func (m *ModelInfo) System(ctx context.Context, model string) string {
	return m.shown(ctx, model).system
}

// shown returns model's /api/show, cached.
func (m *ModelInfo) shown(ctx context.Context, model string) shown {
	now := m.now()
	m.mu.Lock()
	if s, ok := m.show[model]; ok && now.Before(s.until) {
		m.mu.Unlock()
		return s
	}
	m.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, askTimeout)
	defer cancel()
	var s shown
	if info, err := m.client.Show(ctx, model); err == nil {
		s = shown{numCtx: info.NumCtx(), trained: info.ContextLength(), vocab: info.VocabSize(), system: info.System, until: now.Add(showTTL)}
	} else {
		s.until = now.Add(showRetry)
	}
	m.mu.Lock()
	if m.show == nil {
		m.show = map[string]shown{}
	}
	m.show[model] = s
	m.mu.Unlock()
	return s
}

// running returns the window model is loaded with, 0 when it is not
// loaded (or Ollama cannot say).
func (m *ModelInfo) running(ctx context.Context, model string) int {
	now := m.now()
	m.mu.Lock()
	if m.ps != nil && now.Sub(m.psAt) < psTTL {
		n := lookupTag(m.ps, model)
		m.mu.Unlock()
		return n
	}
	m.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, askTimeout)
	defer cancel()
	ps := map[string]int{}
	if models, err := m.client.PS(ctx); err == nil {
		for _, r := range models {
			ps[r.Name], ps[r.Model] = r.ContextLength, r.ContextLength
		}
	}
	m.mu.Lock()
	m.ps, m.psAt = ps, now
	m.mu.Unlock()
	return lookupTag(ps, model)
}

// lookupTag finds model in m, also as "model:latest", which is how Ollama
// names an untagged model (a registry's port, "host:5000/model", is no
// tag).
func lookupTag(m map[string]int, model string) int {
	if n, ok := m[model]; ok {
		return n
	}
	if !strings.Contains(model[strings.LastIndex(model, "/")+1:], ":") {
		return m[model+":latest"]
	}
	return 0
}
