package memory

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// VectorSpacer is a store that must be told which embedding model made its
// vectors (the embedded store drops vectors of an older model so they are
// made again).
type VectorSpacer interface {
	VectorSpace(ctx context.Context, model string, dim int) (reset bool, err error)
}

// probeEvery limits how often calls made while the gate is closed try the
// model again.
const probeEvery = 2 * time.Second

// Gate passes embedding calls through once the model's dimension is known
// and the store has accepted it; until then it answers ErrUnavailable, so
// memory works lexically and turns wait for their vectors. While closed,
// calls retry the probe (at most every two seconds), so memory recovers as
// soon as the model is there.
type Gate struct {
	e     Embedder
	model string
	store VectorSpacer
	log   *slog.Logger
	dim   atomic.Int64

	probing sync.Mutex // one probe at a time
	tried   time.Time  // guarded by probing
	lastErr atomic.Pointer[string]
}

// NewGate wraps e, which embeds with model into store's vector space.
func NewGate(e Embedder, model string, store VectorSpacer, logger *slog.Logger) *Gate {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Gate{e: e, model: model, store: store, log: logger}
}

// Embed implements Embedder.
func (g *Gate) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if g.dim.Load() == 0 && !g.probe(ctx, false) {
		return nil, fmt.Errorf("%w: embedding model %q is not available: %s", ErrUnavailable, g.model, g.Err())
	}
	return g.e.Embed(ctx, texts)
}

// Dim returns the probed dimension, 0 until known.
func (g *Gate) Dim() int { return int(g.dim.Load()) }

// Model returns the embedding model's name.
func (g *Gate) Model() string { return g.model }

// Err returns why the gate is still closed ("" once open or before the
// first probe).
func (g *Gate) Err() string {
	if e := g.lastErr.Load(); e != nil && g.dim.Load() == 0 {
		return *e
	}
	return ""
}

// probe tries to open the gate. Unless force, it tries at most every
// probeEvery and never waits for a probe already running elsewhere: a chat
// must not queue behind a slow model load.
func (g *Gate) probe(ctx context.Context, force bool) bool {
	if force {
		g.probing.Lock()
	} else if !g.probing.TryLock() {
		return g.dim.Load() > 0
	}
	defer g.probing.Unlock()
	if g.dim.Load() > 0 {
		return true
	}
	if !force && time.Since(g.tried) < probeEvery {
		return false
	}
	g.tried = time.Now()
	dim, err := Probe(ctx, g.e)
	if err == nil && g.store != nil {
		var reset bool
		reset, err = g.store.VectorSpace(ctx, g.model, dim)
		if reset {
			g.log.Warn("embedding model changed: stored vectors dropped and will be made again", slog.String("model", g.model), slog.Int("dim", dim))
		}
	}
	if err != nil {
		msg := err.Error()
		if old := g.lastErr.Swap(&msg); old == nil || *old != msg {
			g.log.Warn("embedder not available; memory is lexical until it is", slog.String("model", g.model), slog.Any("error", err))
		}
		return false
	}
	g.dim.Store(int64(dim))
	g.log.Info("embedder ready", slog.String("model", g.model), slog.Int("dim", dim))
	return true
}

// Settle probes the model every retry until the gate opens or ctx ends.
// Each probe may take up to a minute (a cold model load).
func (g *Gate) Settle(ctx context.Context, retry time.Duration) {
	for {
		pctx, cancel := context.WithTimeout(ctx, time.Minute)
		ok := g.probe(pctx, true)
		cancel()
		if ok {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(retry):
		}
	}
}
