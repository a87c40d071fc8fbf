package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/vera-proxy/vera/admin"
	"github.com/vera-proxy/vera/config"
	"github.com/vera-proxy/vera/curator"
	"github.com/vera-proxy/vera/memory"
	"github.com/vera-proxy/vera/memory/embedded"
	"github.com/vera-proxy/vera/memory/qdrant"
	"github.com/vera-proxy/vera/ollama"
	"github.com/vera-proxy/vera/prompts"
	"github.com/vera-proxy/vera/proxy"
)

// memoryStack is everything long-term memory runs on, in the order it must
// be stopped: the writer first (it commits what handlers recorded), then
// the store, then the local file.
type memoryStack struct {
	store   memory.Store
	local   *embedded.DB // the durable queue; with the embedded backend, the store too
	qdrant  *qdrant.Store
	gate    *memory.Gate
	writer  *memory.Writer
	builder *memory.Builder
	curator *curator.Curator
	sched   *curator.Scheduler
	spec    string
	// bg lives until close: the background work (gate probes, scheduled
	// curator runs) stops with it.
	bg     context.Context
	cancel context.CancelFunc
	bgWork sync.WaitGroup // background work that uses the store
}

// openMemory opens the store and starts the writer and the embedder probe.
// The store is the embedded file, or Qdrant when general.qdrant_host is
// set; either way finished turns are first committed to the local file's
// queue, so a Qdrant outage loses nothing.
func openMemory(ctx context.Context, cfg config.Config, upstream *url.URL, transport http.RoundTripper, logger *slog.Logger) (*memoryStack, error) {
	local, err := embedded.Open(ctx, cfg.Memory.DataDir)
	if err != nil {
		return nil, err
	}
	m := &memoryStack{store: local, local: local}
	model := cfg.General.EmbeddingModel
	// One client for every part that asks Ollama: the embedder and the
	// curator's model.
	oc := ollama.New(upstream, transport)
	embedder := memory.NewEmbedder(oc, model)
	var space memory.VectorSpacer = local
	if cfg.QdrantURL != nil {
		q, err := qdrant.Open(ctx, qdrant.Options{URL: cfg.QdrantURL.String(), Collection: cfg.General.QdrantCollection, APIKey: cfg.QdrantAPIKey})
		if err != nil {
			local.Close()
			return nil, err
		}
		if err := checkVectorSpace(ctx, q, embedder, model, logger); err != nil {
			q.Close()
			local.Close()
			return nil, err
		}
		m.store, m.qdrant, space = q, q, q
	}
	tok, err := memory.NewTokenizer()
	if err != nil {
		m.closeStores()
		return nil, err
	}
	m.gate = memory.NewGate(embedder, model, space, logger)
	bg, cancel := context.WithCancel(context.WithoutCancel(ctx))
	m.bg, m.cancel = bg, cancel

	m.writer = memory.NewWriter(m.store, local, m.gate, tok, logger)
	m.writer.MaxTurnTokens = cfg.Memory.MaxTurnTokens
	m.writer.Start()
	go func() {
		m.gate.Settle(bg, 30*time.Second)
		// A write that raced the first probe failed with "not available":
		// retry it now, not at the writer's next retry, so health is right.
		m.writer.Nudge()
	}()
	if tc, ok := m.store.(memory.TokenCounter); ok {
		// Turns stored by earlier versions went through a queue that lost
		// their counts; count them once, in the background, not at open.
		m.bgWork.Go(func() {
			n, err := memory.BackfillTokens(bg, tc, tok.Count)
			switch {
			case err != nil && bg.Err() == nil:
				logger.Warn("counting the tokens of stored memories", slog.Int("counted", n), slog.Any("error", err))
			case n > 0:
				logger.Info("counted the tokens of stored memories", slog.Int("counted", n))
			}
		})
	}
	b := memory.NewBuilder(m.store, m.gate, tok)
	b.SemanticBudget = cfg.Layers.SemanticTokenBudget
	b.RecentBudget = cfg.Layers.ContextTokenBudget
	b.Threshold = cfg.Layers.SemanticScoreThreshold
	b.RecentTurns = cfg.Layers.RecentTurns
	b.RulesBudget = cfg.Layers.RulesTokenBudget
	dir := prompts.New(cfg.Prompts.Dir)
	b.SystemPrompt = dir.System
	m.builder = b
	m.curator = newCurator(cfg, m.store, m.gate, tok, dir, oc, logger)
	if q := m.qdrant; q != nil {
		// Instances sharing the collection curate one at a time. A run
		// that outlives the TTL (a crashed holder) frees the lock.
		m.curator.Lock = func(ctx context.Context) (func(), bool, error) { return q.Lock(ctx, "curator", 2*time.Hour) }
	}
	if m.qdrant != nil {
		logger.Info("memory", slog.String("backend", "qdrant"), slog.String("qdrant", m.qdrant.Addr()),
			slog.String("collection", m.qdrant.Collection()), slog.String("queue", local.Path()), slog.String("embedding_model", model))
	} else {
		logger.Info("memory", slog.String("backend", "embedded"), slog.String("path", local.Path()), slog.String("embedding_model", model))
	}
	return m, nil
}

// newCurator builds the curator on store.
func newCurator(cfg config.Config, store memory.Store, embedder memory.Embedder, tok *memory.Tokenizer, dir *prompts.Dir,
	oc *ollama.Client, logger *slog.Logger) *curator.Curator {
	model := curator.NewOllamaModel(oc, cfg.Curator.CuratorModel)
	// Room for a batch (3000 tokens), the prompt, the curated sample and
	// the answer; Ollama's default 4096 would cut the batch.
	model.NumCtx = 8192
	return &curator.Curator{
		Store: store, Model: model, Embedder: embedder, Tokens: tok, Prompts: dir,
		ModelName: cfg.Curator.CuratorModel, Location: cfg.CuratorLocation, Log: logger,
	}
}

// schedule starts the curator's schedule.
func (m *memoryStack) schedule(cfg config.Config, logger *slog.Logger) error {
	sched, err := m.curator.Schedule(m.bg, cfg.CuratorSpec, m.curator.Location)
	if err != nil {
		return err
	}
	m.spec, m.sched = cfg.CuratorSpec, sched
	logger.Info("curator", slog.String("schedule", m.spec), slog.String("timezone", m.curator.Location.String()),
		slog.String("model", m.curator.ModelName), slog.Time("next_run", m.sched.Next()))
	return nil
}

// checkVectorSpace makes a Qdrant collection that holds another model's
// vectors a startup error, as the issue of mixed sizes is best caught
// before the first chat. When the embedder or Qdrant cannot be reached yet,
// vera starts anyway (degraded) and the gate checks again later.
func checkVectorSpace(ctx context.Context, q *qdrant.Store, e memory.Embedder, model string, logger *slog.Logger) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	dim, err := memory.Probe(ctx, e)
	if err != nil {
		logger.Warn("embedder not available at start; the Qdrant collection is checked once it is", slog.Any("error", err))
		return nil
	}
	if _, err := q.VectorSpace(ctx, model, dim); err != nil && !errors.Is(err, memory.ErrUnavailable) {
		return err
	}
	return nil
}

// attach wires memory into the proxy and vera's own routes.
func (m *memoryStack) attach(srv *proxy.Server, adm *admin.Server) {
	srv.Recorder = m.writer
	srv.Memory = m.builder
	adm.MemoryHealth = m.health
	adm.Curator = m.curator
	adm.CuratorSchedule = m.spec
	adm.CuratorNext = m.sched.Next
}

func (m *memoryStack) health(ctx context.Context) (admin.StoreHealth, admin.EmbedderHealth) {
	st := m.writer.Status(ctx)
	sh := admin.StoreHealth{OK: st.StoreOK, Backend: "embedded", Path: m.local.Path(), Pending: st.Pending, Error: st.StoreError}
	if m.qdrant != nil {
		sh.Backend, sh.URL, sh.Collection, sh.Queue = "qdrant", m.qdrant.Addr(), m.qdrant.Collection(), m.local.Path()
		sh.Path = ""
		if err := m.qdrant.Ping(ctx); err != nil {
			sh.OK, sh.Error = false, err.Error()
		}
	}
	eh := admin.EmbedderHealth{OK: st.EmbedderOK, Model: m.gate.Model(), Dim: m.gate.Dim(), Error: st.EmbedderError}
	if m.gate.Dim() == 0 {
		eh.OK, eh.Error = false, m.gate.Err()
	}
	return sh, eh
}

// close commits recorded turns to the queue and closes the stores.
func (m *memoryStack) close() error {
	// A scheduled run stops at its next step (what it applied is safe;
	// the next run finishes the rest), then the schedule stops.
	m.cancel()
	m.sched.Stop()
	m.bgWork.Wait()
	m.writer.Close()
	return m.closeStores()
}

func (m *memoryStack) closeStores() error {
	var errs []error
	if m.qdrant != nil {
		errs = append(errs, m.qdrant.Close())
	}
	if err := m.local.Close(); err != nil {
		errs = append(errs, fmt.Errorf("closing the store: %w", err))
	}
	return errors.Join(errs...)
}
