package app

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/vera-proxy/vera/admin"
	"github.com/vera-proxy/vera/config"
	"github.com/vera-proxy/vera/mcp"
	"github.com/vera-proxy/vera/memory"
	"github.com/vera-proxy/vera/memory/conversation"
	"github.com/vera-proxy/vera/prompts"
	"github.com/vera-proxy/vera/proxy"
	"github.com/vera-proxy/vera/proxy/tier"
	"github.com/vera-proxy/vera/proxy/vram"
)

// server builds Ollama's surface and vera's own routes on the app's
// parts: the one place they are wired.
func (a *app) server() (*proxy.Server, error) {
	cfg := a.cfg
	srv := proxy.New(cfg.OllamaURL, a.transport, a.logger)
	srv.Ollama = a.ollama                 // one client for Ollama's API in the process
	srv.Conversations = a.conversations() // the admin routes reach them too (attach)
	adm := admin.New(Version(), a.ollama)
	adm.Token, adm.TrustLoopback = cfg.Server.AdminToken, cfg.Server.TrustLoopback
	srv.Own = adm.Mount
	a.configureChats(srv)
	a.configureCloud(srv, adm)
	srv.Metrics = proxy.NewMetrics(a.metrics)
	adm.Metrics = a.metrics
	a.calibrator = a.newCalibrator(srv.Metrics)
	srv.Calibrator = a.calibrator
	a.configureAccess(srv, adm)
	if cfg.VRAM.Enabled {
		a.vram = a.newVRAM()
		srv.VRAM = a.vram
	}
	if cfg.Routing.Enabled {
		routing, err := a.routing()
		if err != nil {
			return nil, err
		}
		srv.Routing = routing
	}
	a.attach(srv, adm)
	return srv, nil
}

// conversations builds the running conversations, shared by the proxy
// and the admin routes.
func (a *app) conversations() *conversation.Set {
	a.convs = conversation.New(0)
	a.convs.CompactAt = a.cfg.Memory.CompactAt
	if ps, ok := a.store.(memory.PlanStore); ok {
		// Plans outlive a restart, and are shared by the instances on
		// one Qdrant.
		a.convs.Plans = ps
	}
	if a.tok != nil {
		a.convs.Tokens = a.tok
	}
	return a.convs
}

// configureChats sets how chats are read and recorded: the identity
// headers, the memory policies, what is stripped and kept.
func (a *app) configureChats(srv *proxy.Server) {
	cfg := a.cfg
	srv.NamespaceHeader, srv.ChatIDHeader = cfg.Memory.NamespaceHeader, cfg.Memory.ChatIDHeader
	srv.AllowedOrigins = cfg.Server.AllowedOrigins
	if cfg.Memory.JWTSecret != "" {
		srv.Identity = &proxy.Identity{Secret: []byte(cfg.Memory.JWTSecret), Require: cfg.Memory.RequireIdentity}
	}
	srv.BodyIdleTimeout = cfg.Server.BodyIdleTimeout.Duration
	srv.RecordTasks = !cfg.Memory.SkipTasks
	srv.OpenWebUIMemory = cfg.Memory.OpenWebUIMemory
	srv.RecallEveryTurn = !cfg.Memory.StablePrefix
	srv.Policies = proxy.Policies{Cloud: memory.Policy(cfg.CloudMemory), Models: map[string]memory.Policy{}}
	for pattern, p := range cfg.Memory.Models {
		srv.Policies.Models[pattern] = memory.Policy(p)
	}
	srv.StripThink = cfg.Routing.StripThink
}

// configureCloud plugs the cloud provider, when [cloud] is enabled, into
// the proxy and /healthz.
func (a *app) configureCloud(srv *proxy.Server, adm *admin.Server) {
	if a.cloud == nil {
		return
	}
	cfg := a.cfg
	srv.Cloud = a.cloud
	srv.FallbackModel = cfg.Cloud.FallbackModel
	adm.CloudHealth = func() admin.CloudHealth {
		return admin.CloudHealth{Provider: a.cloud.Host(), Models: a.cloud.Names(), KeySet: cfg.CloudKey != "", FallbackModel: cfg.Cloud.FallbackModel}
	}
}

// configureAccess sets who may use the proxy and the admin routes, and
// what /healthz says of it.
func (a *app) configureAccess(srv *proxy.Server, adm *admin.Server) {
	cfg := a.cfg
	srv.APIKeys, srv.TrustLoopback, srv.AdminToken = cfg.Server.APIKeys, cfg.Server.TrustLoopback, cfg.Server.AdminToken
	adm.AccessHealth = func() admin.AccessHealth {
		return admin.AccessHealth{APIKeys: len(cfg.Server.APIKeys) > 0, VerifiedIdentity: cfg.Memory.JWTSecret != "",
			TrustLoopback: cfg.Server.TrustLoopback, ForwardedLoopback: srv.ForwardedLoopback()}
	}
}

// newVRAM builds the manager of the models loaded in VRAM, from [vram].
func (a *app) newVRAM() *vram.Manager {
	cfg := a.cfg
	var prewarm []string
	if cfg.VRAM.Prewarm {
		prewarm = []string{cfg.Routing.Medium, cfg.Routing.Light}
	}
	return vram.New(a.ollama, vram.Config{
		Large: cfg.VRAM.LargeModels, TotalMB: cfg.VRAM.TotalMB,
		FlushTimeout: cfg.VRAM.FlushTimeout.Duration, PollInterval: cfg.VRAM.PollInterval.Duration,
		Prewarm: prewarm, MaxLarge: cfg.VRAM.MaxLargeConcurrency, Keep: []string{cfg.General.EmbeddingModel},
	}, a.logger)
}

// routing builds the tier routing of the virtual model, from [routing].
func (a *app) routing() (*proxy.Routing, error) {
	cfg := a.cfg
	dir := prompts.New(cfg.Prompts.Dir)
	r, err := newRouter(cfg, a.embedder, func() map[tier.Tier][]string { return tierExamples(dir) })
	if err != nil {
		return nil, err
	}
	return &proxy.Routing{Router: r, Virtual: cfg.Routing.VirtualModel, Deep: cfg.Routing.DeepModel,
		Models: map[tier.Tier]string{tier.Light: cfg.Routing.Light, tier.Medium: cfg.Routing.Medium, tier.Complex: cfg.Routing.Complex}}, nil
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
	adm.Memories = a.memoryService()
	adm.Memories.Conversations = a.convs
	a.withheld.Withdraw = func(ids ...string) { a.convs.Withdraw("", ids...) }
	tools := mcp.New(adm.Memories, Version())
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

// memoryService is what the memory routes and the MCP tools work on: the
// store, the queue and the writer (a deleted memory must not arrive later
// from either).
func (a *app) memoryService() *memory.Service {
	m := &memory.Service{Store: a.store, Tokens: a.tok, MaxTokens: a.cfg.Memory.MaxTurnTokens, Embed: a.embedder.Embed,
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

// The parts app wires, checked at compile time.
var (
	_ proxy.MCPServer = (*mcp.Server)(nil)
	_ mcp.Memories    = (*memory.Service)(nil)
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
