package app

import (
	"context"
	"log/slog"
	"maps"
	"net/http"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/vera-proxy/vera/cloud"
	"github.com/vera-proxy/vera/config"
	"github.com/vera-proxy/vera/curator"
	"github.com/vera-proxy/vera/memory"
	"github.com/vera-proxy/vera/memory/conversation"
	"github.com/vera-proxy/vera/memory/embedded"
	"github.com/vera-proxy/vera/memory/qdrant"
	"github.com/vera-proxy/vera/ollama"
	"github.com/vera-proxy/vera/prompts"
	"github.com/vera-proxy/vera/proxy"
	"github.com/vera-proxy/vera/proxy/vram"
	"github.com/vera-proxy/vera/text"
)

var _ memory.Withdrawer = (*conversation.Set)(nil)

// appOptions chooses the parts a command needs beyond the Ollama client
// and the embedder, which every app has.
type appOptions struct {
	// Store opens the store the config selects (Qdrant, or else the
	// embedded file) and nothing else: no queue, no writer.
	Store bool
	// Tokenizer loads the tokenizer (Memory implies it).
	Tokenizer bool
	// Memory opens the store and the local queue, starts the writer and
	// the background work, and builds the context builder and the curator.
	Memory bool
	// Schedule starts the curator's schedule (with Memory).
	Schedule bool
	// Background opens the embedded store at once, its index loading in
	// the background (serve listens at once, whatever the store's size);
	// otherwise newApp returns once it is loaded.
	Background bool
}

// app holds every part vera runs on, each built once from the resolved
// config, and stops them in order: the background work and the schedule
// first, then the writer (it commits what handlers recorded), then the
// stores.
type app struct {
	cfg    config.Config
	logger *slog.Logger

	// metrics is the one registry /metrics serves; each part registers
	// its own metrics on it.
	metrics *prometheus.Registry
	// calibrator learns each model's tokens, kept in the data dir.
	calibrator   *proxy.Calibrator
	transport    *http.Transport
	ollama       *ollama.Client  // the one client for Ollama's own API
	cloud        *cloud.Provider // nil unless [cloud] is enabled
	vram         *vram.Manager   // nil unless [vram] is enabled
	storesClosed bool            // closeStores ran (it may be called again)
	embedder     *memory.OllamaEmbedder
	tok          *text.Tokenizer

	store memory.Store
	local *embedded.DB // the durable queue; with the embedded backend, the store too
	// directory tells who each namespace is (GET /namespaces).
	directory *memory.Directory
	// usage counts the answers each memory was injected into.
	usage *memory.Usage
	// history records every change of a memory; withheld keeps out of
	// chats what the curator wrote from a memory since removed.
	history  *memory.History
	withheld *memory.Withheld
	qdrant   *qdrant.Store

	prompts *prompts.Dir
	// convs are the running conversations, shared by the proxy and the
	// admin routes; nil until server builds them.
	convs   *conversation.Set
	gate    *memory.Gate
	writer  *memory.Writer
	builder *memory.Builder
	// commands carries out "remember that" and "forget that".
	commands *memory.Commands
	curator  *curator.Curator
	sched    *curator.Scheduler

	// bg lives until Close: the background work (gate probes, the token
	// backfill, scheduled curator runs) stops with it.
	bg     context.Context
	cancel context.CancelFunc
	bgWork sync.WaitGroup // background work that uses the store
}

// newApp builds the parts opts asks for, in order. On error, what was
// built is closed again.
func newApp(ctx context.Context, cfg config.Config, logger *slog.Logger, opts appOptions) (*app, error) {
	a := &app{cfg: cfg, logger: logger, metrics: prometheus.NewRegistry()}
	a.metrics.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	a.bg, a.cancel = context.WithCancel(context.WithoutCancel(ctx))
	a.transport = ollama.NewTransport(cfg.General.ResponseHeaderTimeout.Duration)
	a.ollama = ollama.New(cfg.OllamaURL, a.transport)
	if cfg.CloudURL != nil {
		a.cloud = a.newCloud()
	}
	a.embedder = memory.NewEmbedder(a.ollama, cfg.General.EmbeddingModel)
	err := a.build(ctx, opts)
	if err != nil {
		a.Close()
		return nil, err
	}
	return a, nil
}

// newCloud builds the OpenAI-compatible provider of [cloud], its models
// named as the config names them, and the fallback model under its own
// name unless the config names it otherwise.
func (a *app) newCloud() *cloud.Provider {
	cfg := a.cfg
	models := maps.Clone(cfg.Cloud.Models)
	if models == nil {
		models = map[string]string{}
	}
	if f := cfg.Cloud.FallbackModel; f != "" {
		if _, ok := models[f]; !ok {
			models[f] = f // a cloud model named as it is
		}
	}
	p := cloud.New(cloud.Config{
		Base: cfg.CloudURL, Key: cfg.CloudKey, Models: models, Headers: cfg.Cloud.Headers,
		ResponseHeaderTimeout: cfg.Cloud.ResponseHeaderTimeout.Duration,
	}, nil)
	p.Observe = cloud.NewMetrics(a.metrics).Observe
	return p
}

// build opens the store and starts the work opts asks for.
func (a *app) build(ctx context.Context, opts appOptions) error {
	if opts.Tokenizer || opts.Memory {
		tok, err := text.NewTokenizer()
		if err != nil {
			return err
		}
		a.tok = tok
	}
	switch {
	case opts.Memory:
		if err := a.openMemory(ctx, opts.Background); err != nil {
			return err
		}
	case opts.Store:
		if err := a.openStore(ctx); err != nil {
			return err
		}
	}
	if opts.Schedule && a.curator != nil {
		return a.schedule()
	}
	return nil
}

// Close stops the background work and the schedule (a scheduled run stops
// at its next step: what it applied is safe, the next run finishes the
// rest), commits recorded turns to the queue, and closes the stores.
func (a *app) Close() error {
	a.cancel()
	if a.vram != nil {
		a.vram.Close() // its unloads and pre-warms finish first
	}
	if a.sched != nil {
		a.sched.Stop()
	}
	a.bgWork.Wait()
	a.calibrator.Close() // what it learnt is saved
	if a.convs != nil {
		a.convs.Close() // the summaries under way stop
	}
	if a.writer != nil {
		a.writer.Close()
	}
	err := a.closeStores()
	a.transport.CloseIdleConnections()
	return err
}
