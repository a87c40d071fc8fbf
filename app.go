package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/vera-proxy/vera/admin"
	"github.com/vera-proxy/vera/cloud"
	"github.com/vera-proxy/vera/config"
	"github.com/vera-proxy/vera/curator"
	"github.com/vera-proxy/vera/mcp"
	"github.com/vera-proxy/vera/memory"
	"github.com/vera-proxy/vera/memory/conversation"
	"github.com/vera-proxy/vera/memory/embedded"
	"github.com/vera-proxy/vera/memory/qdrant"
	"github.com/vera-proxy/vera/ollama"
	"github.com/vera-proxy/vera/prompts"
	"github.com/vera-proxy/vera/proxy"
	"github.com/vera-proxy/vera/proxy/tier"
	"github.com/vera-proxy/vera/proxy/vram"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "0.1.0-dev"

var _ admin.Withdrawer = (*conversation.Set)(nil)

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
	tok          *memory.Tokenizer

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
		models := maps.Clone(cfg.Cloud.Models)
		if models == nil {
			models = map[string]string{}
		}
		if f := cfg.Cloud.FallbackModel; f != "" {
			if _, ok := models[f]; !ok {
				models[f] = f // a cloud model named as it is
			}
		}
		a.cloud = cloud.New(cloud.Config{
			Base: cfg.CloudURL, Key: cfg.CloudKey, Models: models, Headers: cfg.Cloud.Headers,
			ResponseHeaderTimeout: cfg.Cloud.ResponseHeaderTimeout.Duration,
		}, nil)
		a.cloud.Observe = cloud.NewMetrics(a.metrics).Observe
	}
	a.embedder = memory.NewEmbedder(a.ollama, cfg.General.EmbeddingModel)
	err := a.build(ctx, opts)
	if err != nil {
		a.Close()
		return nil, err
	}
	return a, nil
}

func (a *app) build(ctx context.Context, opts appOptions) error {
	if opts.Tokenizer || opts.Memory {
		tok, err := memory.NewTokenizer()
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

// openStore opens the store the config selects: Qdrant when
// general.qdrant_host is set, else the embedded file.
func (a *app) openStore(ctx context.Context) error {
	if a.cfg.QdrantURL != nil {
		return a.openQdrant(ctx)
	}
	return a.openLocal(ctx, false)
}

// openLocal opens the embedded file in the data dir. It is the store
// unless Qdrant is opened too. In the background, its index loads after
// it returns.
func (a *app) openLocal(ctx context.Context, background bool) error {
	open := embedded.Open
	if background {
		open = embedded.Start
	}
	db, err := open(ctx, a.cfg.Memory.DataDir)
	if err != nil {
		return err
	}
	a.local = db
	if a.qdrant == nil {
		a.store = db
	}
	if background {
		a.bgWork.Go(func() {
			if err := db.Wait(a.bg); err != nil {
				if a.bg.Err() == nil {
					a.logger.Error("memory index", slog.Any("error", err))
				}
				return
			}
			from, took := db.LoadedFrom()
			p, _ := db.Loading()
			a.logger.Info("memory index loaded", slog.Int("memories", p.Total), slog.String("from", from), slog.Duration("took", took))
			// What loading read and dropped (texts, batches) goes back
			// to the system now, not at the next GC cycles.
			debug.FreeOSMemory()
		})
	}
	return nil
}

// openQdrant opens the Qdrant collection, which becomes the store.
func (a *app) openQdrant(ctx context.Context) error {
	q, err := qdrant.Open(ctx, qdrant.Options{URL: a.cfg.QdrantURL.String(), Collection: a.cfg.General.QdrantCollection, APIKey: a.cfg.QdrantAPIKey})
	if err != nil {
		return err
	}
	a.qdrant, a.store = q, q
	return nil
}

// openMemory opens the store and starts the writer and the embedder probe.
// The store is the embedded file, or Qdrant when general.qdrant_host is
// set; either way finished turns are first committed to the local file's
// queue, so a Qdrant outage loses nothing.
func (a *app) openMemory(ctx context.Context, background bool) error {
	if err := a.openLocal(ctx, background); err != nil {
		return err
	}
	model := a.cfg.General.EmbeddingModel
	var space memory.VectorSpacer = a.local
	if a.cfg.QdrantURL != nil {
		if err := a.openQdrant(ctx); err != nil {
			return err
		}
		if err := checkVectorSpace(ctx, a.qdrant, a.embedder, model, a.logger); err != nil {
			return err
		}
		space = a.qdrant
	}
	a.prompts = prompts.New(a.cfg.Prompts.Dir)
	admin.RegisterStore(a.metrics, a.store, a.local)
	a.gate = memory.NewGate(a.embedder, model, space, a.logger)
	if err := a.startHistory(ctx); err != nil {
		return err
	}
	a.startWriter()
	a.backfillTokens()
	a.startDirectory()
	a.startUsage()
	a.builder = a.newBuilder()
	a.commands = &memory.Commands{Store: a.store, Queue: a.local, Skip: a.writer.Forget, Embed: a.gate, Tokens: a.tok, Phrases: a.prompts.Commands,
		MaxTokens: a.cfg.Memory.MaxTurnTokens, History: a.history, Withheld: a.withheld}
	a.curator = a.newCurator()
	a.withheld.Rewrite = a.rewriteWithheld
	if a.qdrant != nil {
		a.logger.Info("memory", slog.String("backend", "qdrant"), slog.String("qdrant", a.qdrant.Addr()),
			slog.String("collection", a.qdrant.Collection()), slog.String("queue", a.local.Path()), slog.String("embedding_model", model))
	} else {
		a.logger.Info("memory", slog.String("backend", "embedded"), slog.String("path", a.local.Path()), slog.String("embedding_model", model))
	}
	return nil
}

// startWriter starts the writer, and the gate's first probe.
func (a *app) startWriter() {
	a.writer = memory.NewWriter(a.store, a.local, a.gate, a.tok, a.logger)
	a.writer.MaxTurnTokens = a.cfg.Memory.MaxTurnTokens
	a.writer.History = a.history
	a.writer.Start()
	a.bgWork.Go(func() {
		a.gate.Settle(a.bg, 30*time.Second)
		// A write that raced the first probe failed with "not available":
		// retry it now, not at the writer's next retry, so health is right.
		a.writer.Nudge()
	})
}

// startDirectory keeps who each namespace is in the local file, flushed
// every few seconds and when the app closes.
func (a *app) startDirectory() {
	a.directory = memory.NewDirectory(a.local)
	a.flushEvery(10*time.Second, "keeping the namespaces seen", a.directory.Flush)
}

// startUsage counts the answers each memory was injected into, in the
// local file, written every two seconds off the chat path and when the
// app closes.
func (a *app) startUsage() {
	a.usage = memory.NewUsage(a.local)
	a.flushEvery(2*time.Second, "counting the memories used", a.usage.Flush)
}

// startHistory keeps the history of every memory in the local file (what
// a failing write refused is written again every two seconds), and reads
// what is withheld from chats.
func (a *app) startHistory(ctx context.Context) error {
	a.history = memory.NewHistory(a.local)
	a.flushEvery(2*time.Second, "keeping the history of memories", a.history.Flush)
	var err error
	a.withheld, err = memory.NewWithheld(ctx, a.local, a.store)
	return err
}

// rewriteWithheld has the curator rewrite namespace ns's withheld
// memories now, in the background; while another run goes it tries again
// every 30 s, for half an hour (the scheduled runs rewrite them too).
func (a *app) rewriteWithheld(ns string) {
	if a.bg.Err() != nil {
		return // closing: the next start rewrites them
	}
	a.bgWork.Go(func() {
		for range 60 {
			if a.curator.RewriteWithheld(a.bg, ns).Status != curator.StatusBusy {
				return
			}
			select {
			case <-a.bg.Done():
				return
			case <-time.After(30 * time.Second):
			}
		}
	})
}

// flushEvery runs flush in the background every period, and once more
// when the app closes; what fails is logged as what.
func (a *app) flushEvery(period time.Duration, what string, flush func(context.Context) error) {
	a.bgWork.Go(func() {
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-a.bg.Done():
				ctx, cancel := context.WithTimeout(context.WithoutCancel(a.bg), 5*time.Second)
				defer cancel()
				if err := flush(ctx); err != nil {
					a.logger.Warn(what, slog.Any("error", err))
				}
				return
			case <-t.C:
				if err := flush(a.bg); err != nil && a.bg.Err() == nil {
					a.logger.Warn(what, slog.Any("error", err))
				}
			}
		}
	})
}

// backfillTokens counts, in the background, the tokens of turns stored by
// earlier versions, whose queue lost their counts.
func (a *app) backfillTokens() {
	ti, terms := a.store.(memory.TermsIndexer)
	tc, tokens := a.store.(memory.TokenCounter)
	if !terms && !tokens {
		return
	}
	a.bgWork.Go(func() {
		// One after the other: re-indexing writes memories whole, and
		// must not race with the counts being set.
		if terms {
			n, err := memory.BackfillTerms(a.bg, ti)
			switch {
			case err != nil && a.bg.Err() == nil:
				a.logger.Warn("indexing stored memories for this version's lexical search", slog.Int("indexed", n), slog.Any("error", err))
			case n > 0:
				a.logger.Info("indexed stored memories for this version's lexical search", slog.Int("indexed", n))
			}
		}
		if tokens {
			n, err := memory.BackfillTokens(a.bg, tc, a.tok.Count)
			switch {
			case err != nil && a.bg.Err() == nil:
				a.logger.Warn("counting the tokens of stored memories", slog.Int("counted", n), slog.Any("error", err))
			case n > 0:
				a.logger.Info("counted the tokens of stored memories", slog.Int("counted", n))
			}
		}
	})
}

func (a *app) newBuilder() *memory.Builder {
	l := a.cfg.Layers
	b := memory.NewBuilder(a.store, a.gate, a.tok)
	b.SemanticBudget = l.SemanticTokenBudget
	b.RecentBudget = l.ContextTokenBudget
	b.Threshold = l.SemanticScoreThreshold
	b.RecentTurns = l.RecentTurns
	b.RulesBudget = l.RulesTokenBudget
	b.ProfileBudget = l.ProfileTokenBudget
	b.SystemPrompt = a.prompts.System
	b.Withheld = a.withheld
	return b
}

func (a *app) newCurator() *curator.Curator {
	name := a.cfg.Curator.CuratorModel
	model := curator.NewOllamaModel(a.ollama, name)
	// Room for a batch (3000 tokens), the prompt, the curated sample and
	// the answer; Ollama's default 4096 would cut the batch.
	model.NumCtx = 8192
	if base, tag, _ := strings.Cut(name, ":"); strings.HasSuffix(base, "-cloud") || strings.HasSuffix(tag, "-cloud") || tag == "cloud" {
		a.logger.Warn("curator.curator_model is one of Ollama's cloud models: every raw turn, private ones too, leaves this machine to be curated; pick a local model to keep them here",
			slog.String("curator_model", name))
	}
	c := &curator.Curator{
		Store: a.store, Model: model, Embedder: a.gate, Tokens: a.tok, Prompts: a.prompts,
		ModelName: name, Location: a.cfg.CuratorLocation, Log: a.logger,
		Observe:       curator.NewMetrics(a.metrics).Observe,
		ProfileTokens: a.cfg.Layers.ProfileTokenBudget,
		MaxTokens:     a.cfg.Memory.MaxTurnTokens,
		History:       a.history,
		Withheld:      a.withheld,
	}
	if q := a.qdrant; q != nil {
		// Instances sharing the collection curate one at a time. A run
		// that outlives the TTL (a crashed holder) frees the lock.
		c.Lock = func(ctx context.Context) (func(), bool, error) { return q.Lock(ctx, "curator", 2*time.Hour) }
	}
	return c
}

// schedule starts the curator's schedule.
func (a *app) schedule() error {
	sched, err := a.curator.Schedule(a.bg, a.cfg.CuratorSpec, a.curator.Location)
	if err != nil {
		return err
	}
	a.sched = sched
	a.logger.Info("curator", slog.String("schedule", a.cfg.CuratorSpec), slog.String("timezone", a.curator.Location.String()),
		slog.String("model", a.curator.ModelName), slog.Time("next_run", sched.Next()))
	for _, ns := range a.withheld.Namespaces() {
		a.rewriteWithheld(ns) // withheld before a restart, or by `vera memories` on the store
	}
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

// server builds Ollama's surface and vera's own routes on the app's
// parts: the one place they are wired.
func (a *app) server() (*proxy.Server, error) {
	cfg, logger := a.cfg, a.logger
	srv := proxy.New(cfg.OllamaURL, a.transport, logger)
	srv.Ollama = a.ollama // one client for Ollama's API in the process
	a.convs = conversation.New(0)
	a.convs.CompactAt = cfg.Memory.CompactAt
	if ps, ok := a.store.(memory.PlanStore); ok {
		// Plans outlive a restart, and are shared by the instances on
		// one Qdrant.
		a.convs.Plans = ps
	}
	if a.tok != nil {
		a.convs.Tokens = a.tok
	}
	srv.Conversations = a.convs // the admin routes reach them too (attach)
	adm := admin.New(version, a.ollama)
	adm.Token, adm.TrustLoopback = cfg.Server.AdminToken, cfg.Server.TrustLoopback
	srv.Own = adm.Mount
	srv.NamespaceHeader, srv.ChatIDHeader = cfg.Memory.NamespaceHeader, cfg.Memory.ChatIDHeader
	srv.AllowedOrigins = cfg.Server.AllowedOrigins
	if cfg.Memory.JWTSecret != "" {
		srv.Identity = &proxy.Identity{Secret: []byte(cfg.Memory.JWTSecret), Require: cfg.Memory.RequireIdentity}
	}
	srv.BodyIdleTimeout = cfg.Server.BodyIdleTimeout.Duration
	srv.RecordTasks = !cfg.Memory.SkipTasks
	srv.OpenWebUIMemory = cfg.Memory.OpenWebUIMemory
	srv.RecallEveryTurn = !cfg.Memory.StablePrefix
	if a.cloud != nil {
		srv.Cloud = a.cloud
		srv.FallbackModel = cfg.Cloud.FallbackModel
		adm.CloudHealth = func() admin.CloudHealth {
			return admin.CloudHealth{Provider: a.cloud.Host(), Models: a.cloud.Names(), KeySet: cfg.CloudKey != "", FallbackModel: cfg.Cloud.FallbackModel}
		}
	}
	srv.Policies = proxy.Policies{Cloud: memory.Policy(cfg.CloudMemory), Models: map[string]memory.Policy{}}
	for pattern, p := range cfg.Memory.Models {
		srv.Policies.Models[pattern] = memory.Policy(p)
	}
	srv.StripThink = cfg.Routing.StripThink
	srv.Metrics = proxy.NewMetrics(a.metrics)
	adm.Metrics = a.metrics
	a.calibrator = a.newCalibrator(srv.Metrics)
	srv.Calibrator = a.calibrator
	srv.APIKeys, srv.TrustLoopback, srv.AdminToken = cfg.Server.APIKeys, cfg.Server.TrustLoopback, cfg.Server.AdminToken
	adm.AccessHealth = func() admin.AccessHealth {
		return admin.AccessHealth{APIKeys: len(cfg.Server.APIKeys) > 0, VerifiedIdentity: cfg.Memory.JWTSecret != "",
			TrustLoopback: cfg.Server.TrustLoopback, ForwardedLoopback: srv.ForwardedLoopback()}
	}
	if cfg.VRAM.Enabled {
		var prewarm []string
		if cfg.VRAM.Prewarm {
			prewarm = []string{cfg.Routing.Medium, cfg.Routing.Light}
		}
		a.vram = vram.New(a.ollama, vram.Config{
			Large: cfg.VRAM.LargeModels, TotalMB: cfg.VRAM.TotalMB,
			FlushTimeout: cfg.VRAM.FlushTimeout.Duration, PollInterval: cfg.VRAM.PollInterval.Duration,
			Prewarm: prewarm, MaxLarge: cfg.VRAM.MaxLargeConcurrency, Keep: []string{cfg.General.EmbeddingModel},
		}, logger)
		srv.VRAM = a.vram
	}
	if cfg.Routing.Enabled {
		dir := prompts.New(cfg.Prompts.Dir)
		r, err := newRouter(cfg, a.embedder, func() map[tier.Tier][]string { return tierExamples(dir) })
		if err != nil {
			return nil, err
		}
		srv.Routing = &proxy.Routing{Router: r, Virtual: cfg.Routing.VirtualModel, Deep: cfg.Routing.DeepModel,
			Models: map[tier.Tier]string{tier.Light: cfg.Routing.Light, tier.Medium: cfg.Routing.Medium, tier.Complex: cfg.Routing.Complex}}
	}
	a.attach(srv, adm)
	return srv, nil
}

// newRouter builds the tier classifier from [routing].
func newRouter(cfg config.Config, emb tier.Embedder, examples func() map[tier.Tier][]string) (*tier.Router, error) {
	rules := cfg.Routing.Rules
	r, err := tier.New(map[tier.Tier][]string{tier.Light: rules.Light, tier.Medium: rules.Medium, tier.Complex: rules.Complex}, emb)
	if err != nil {
		return nil, err
	}
	r.Margin, r.AutoComplex, r.Examples = cfg.Routing.Margin, cfg.Routing.AutoComplex, examples
	return r, nil
}

// tierExamples reads prompts/tiers/*.txt.
func tierExamples(dir *prompts.Dir) map[tier.Tier][]string {
	out := map[tier.Tier][]string{}
	for t, lines := range dir.Tiers() {
		out[tier.Tier(t)] = lines
	}
	return out
}

// attach wires memory into the proxy and vera's own routes.
func (a *app) attach(srv *proxy.Server, adm *admin.Server) {
	if a.writer == nil {
		return
	}
	srv.Recorder = a.writer
	srv.Directory = a.directory
	srv.Usage = a.usage
	srv.Memory = a.builder
	srv.Commands = a.commands
	adm.MemoryHealth = a.health
	adm.Memories = a.adminMemories()
	adm.Memories.Conversations = a.convs
	a.withheld.Withdraw = func(ids ...string) { a.convs.Withdraw("", ids...) }
	tools := mcp.New(adm.Memories, version)
	tools.Metrics = mcp.NewMetrics(a.metrics)
	srv.MCP = tools
	adm.Curator = a.curator
	if a.sched != nil {
		adm.CuratorSchedule = a.cfg.CuratorSpec
		adm.CuratorNext = a.sched.Next
	}
}

// loading reports whether the store's index is still loading.
func (a *app) loading() bool {
	if l, ok := a.store.(memory.Loader); ok {
		_, loading := l.Loading()
		return loading
	}
	return false
}

// adminMemories is what the memory routes work on: the store, the queue
// and the writer (a deleted memory must not arrive later from either).
func (a *app) adminMemories() *admin.Memories {
	m := &admin.Memories{Store: a.store, Tokens: a.tok, MaxTokens: a.cfg.Memory.MaxTurnTokens, Embed: a.embedder.Embed,
		Threshold: a.cfg.Layers.SemanticScoreThreshold, Directory: a.directory, Usage: a.usage,
		History: a.history, Withheld: a.withheld}
	if a.local != nil {
		m.Queue = a.local
	}
	if a.writer != nil {
		m.Forget, m.ForgetNamespace = a.writer.Forget, a.writer.ForgetNamespace
	}
	return m
}

func (a *app) health(ctx context.Context) (admin.StoreHealth, admin.EmbedderHealth) {
	st := a.writer.Status(ctx)
	sh := admin.StoreHealth{OK: st.StoreOK, Backend: "embedded", Path: a.local.Path(), Pending: st.Pending, Error: st.StoreError}
	if l, ok := a.store.(memory.Loader); ok {
		if p, loading := l.Loading(); loading {
			sh.Loading = &p
		}
	}
	if a.qdrant != nil {
		sh.Backend, sh.URL, sh.Collection, sh.Queue = "qdrant", a.qdrant.Addr(), a.qdrant.Collection(), a.local.Path()
		sh.Path = ""
		if err := a.qdrant.Ping(ctx); err != nil {
			sh.OK, sh.Error = false, err.Error()
		}
	}
	eh := admin.EmbedderHealth{OK: st.EmbedderOK, Model: a.gate.Model(), Dim: a.gate.Dim(), Error: st.EmbedderError}
	if a.gate.Dim() == 0 {
		eh.OK, eh.Error = false, a.gate.Err()
	}
	return sh, eh
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

// closeStores closes the stores opened so far; a second call does nothing.
func (a *app) closeStores() error {
	// The fields stay set: a /healthz still running after a forced
	// shutdown reads them (and finds the stores closed), it must not
	// find nil.
	if a.storesClosed {
		return nil
	}
	a.storesClosed = true
	var errs []error
	if a.qdrant != nil {
		errs = append(errs, a.qdrant.Close())
	}
	if a.local != nil {
		if err := a.local.Close(); err != nil {
			errs = append(errs, fmt.Errorf("closing the store: %w", err))
		}
	}
	return errors.Join(errs...)
}

// What the commands share besides the app: the flags that choose the
// config the app is built from, the usage error, and the logger.

// configFlags declares, on fs into f, the flags every command takes to
// choose its config: --config, --ollama-url and --data-dir.
func configFlags(fs *flag.FlagSet, f *config.Flags) {
	fs.StringVar(&f.ConfigPath, "config", "", "")
	fs.StringVar(&f.OllamaURL, "ollama-url", "", "")
	fs.StringVar(&f.DataDir, "data-dir", "", "")
}

// usageError is a command line vera does not understand: exit status 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// newLogger logs to w at info level, or debug with debug; every value is
// redacted by redactAttr.
func newLogger(w io.Writer, debug bool) *slog.Logger {
	level := slog.LevelInfo
	if debug {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level, ReplaceAttr: redactAttr}))
}

// redactAttr masks the passwords of URLs in every logged value:
// vera shows its own URLs redacted, and this catches those quoted by
// errors from below, such as net/http's, which keep a URL's query.
func redactAttr(_ []string, a slog.Attr) slog.Attr {
	var s string
	switch a.Value.Kind() {
	case slog.KindString:
		s = a.Value.String()
	case slog.KindAny:
		switch v := a.Value.Any().(type) {
		case error:
			s = v.Error()
		case fmt.Stringer:
			s = v.String()
		default:
			return a
		}
	default:
		return a
	}
	if r := config.RedactText(s); r != s {
		a.Value = slog.StringValue(r)
	}
	return a
}

// The parts app wires, checked at compile time.
var (
	_ proxy.MCPServer = (*mcp.Server)(nil)
	_ mcp.Memories    = (*admin.Memories)(nil)
)

// newCalibrator starts learning each model's tokens from its answers,
// from what was learnt before (memory.data_dir/token_scales.json).
func (a *app) newCalibrator(m *proxy.Metrics) *proxy.Calibrator {
	path := filepath.Join(a.cfg.Memory.DataDir, "token_scales.json")
	if err := os.MkdirAll(a.cfg.Memory.DataDir, 0o700); err != nil {
		a.logger.Warn("the models' token scales are kept in memory only", slog.Any("error", err))
		path = ""
	}
	scales, err := memory.OpenScales(path)
	if err != nil {
		a.logger.Warn("the models' token scales", slog.Any("error", err))
	}
	c := proxy.NewCalibrator(scales, a.tok, a.logger)
	c.Overflowed = m.Overflowed
	return c
}
