package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/vera-proxy/vera/config"
	"github.com/vera-proxy/vera/memory"
	"github.com/vera-proxy/vera/memory/embedded"
	"github.com/vera-proxy/vera/prompts"
	"github.com/vera-proxy/vera/proxy"
)

// memoryStack is everything long-term memory runs on, in the order it must
// be stopped: the writer first (it commits what handlers recorded), then
// the store.
type memoryStack struct {
	db      *embedded.DB
	gate    *memory.Gate
	writer  *memory.Writer
	builder *memory.Builder
	cancel  context.CancelFunc
}

// openMemory opens the store and starts the writer and the embedder probe.
func openMemory(ctx context.Context, cfg config.Config, upstream *url.URL, transport http.RoundTripper, logger *slog.Logger) (*memoryStack, error) {
	if cfg.General.QdrantHost != "" {
		return nil, errors.New("general.qdrant_host (VERA_QDRANT_URL) is set, but this build has no Qdrant backend yet; unset it to use the embedded store")
	}
	db, err := embedded.Open(ctx, cfg.Memory.DataDir)
	if err != nil {
		return nil, err
	}
	tok, err := memory.NewTokenizer()
	if err != nil {
		db.Close()
		return nil, err
	}
	client := &http.Client{Transport: transport}
	gate := memory.NewGate(memory.NewOllamaEmbedder(upstream, cfg.General.EmbeddingModel, client), cfg.General.EmbeddingModel, db, logger)
	bg, cancel := context.WithCancel(context.WithoutCancel(ctx))
	go gate.Settle(bg, 30*time.Second)

	w := memory.NewWriter(db, db, gate, tok, logger)
	w.Start()
	b := memory.NewBuilder(db, gate, tok)
	b.SemanticBudget = cfg.Layers.SemanticTokenBudget
	b.RecentBudget = cfg.Layers.ContextTokenBudget
	b.Threshold = cfg.Layers.SemanticScoreThreshold
	b.RecentTurns = cfg.Layers.RecentTurns
	b.SystemPrompt = prompts.New(cfg.Prompts.Dir).System
	logger.Info("memory", slog.String("backend", "embedded"), slog.String("path", db.Path()),
		slog.String("embedding_model", cfg.General.EmbeddingModel))
	return &memoryStack{db: db, gate: gate, writer: w, builder: b, cancel: cancel}, nil
}

// attach wires memory into the proxy.
func (m *memoryStack) attach(srv *proxy.Server) {
	srv.Recorder = m.writer
	srv.Memory = m.builder
	srv.MemoryHealth = m.health
}

func (m *memoryStack) health(ctx context.Context) (proxy.StoreHealth, proxy.EmbedderHealth) {
	st := m.writer.Status(ctx)
	sh := proxy.StoreHealth{OK: st.StoreOK, Backend: "embedded", Path: m.db.Path(), Pending: st.Pending, Error: st.StoreError}
	eh := proxy.EmbedderHealth{OK: st.EmbedderOK, Model: m.gate.Model(), Dim: m.gate.Dim(), Error: st.EmbedderError}
	if m.gate.Dim() == 0 {
		eh.OK, eh.Error = false, m.gate.Err()
	}
	return sh, eh
}

// close commits recorded turns to the queue and closes the store.
func (m *memoryStack) close() error {
	m.cancel()
	m.writer.Close()
	if err := m.db.Close(); err != nil {
		return fmt.Errorf("closing the store: %w", err)
	}
	return nil
}
