package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/vera-proxy/vera/admin"
	"github.com/vera-proxy/vera/config"
	"github.com/vera-proxy/vera/prompts"
	"github.com/vera-proxy/vera/proxy"
	"github.com/vera-proxy/vera/proxy/tier"
	"github.com/vera-proxy/vera/proxy/vram"
)

// serve runs the proxy until ctx is cancelled, then stops accepting and lets
// running requests (streams included) finish within the shutdown grace
// period.
func serve(ctx context.Context, cfg config.Config, stderr io.Writer, ready func(addr string)) error {
	logger := newLogger(stderr, cfg.General.Debug)
	for _, w := range cfg.Warnings {
		logger.Warn("config", slog.String("warning", w))
	}
	if exposedWithoutIdentity(cfg) {
		logger.Warn(exposedWarning, slog.String("listen", cfg.Server.Listen))
	}
	if proxy.AllowsEveryOrigin(cfg.Server.AllowedOrigins) {
		logger.Warn(everyOriginWarning, slog.Any("allowed_origins", cfg.Server.AllowedOrigins))
	}
	if cfg.Memory.Enabled {
		if path, n := legacyRules(cfg.Prompts.Dir); n > 0 {
			logger.Warn(legacyRulesWarning, slog.String("file", path), slog.Int("lines", n))
		}
	}
	gin.SetMode(gin.ReleaseMode)
	a, err := newApp(ctx, cfg, logger, appOptions{Memory: cfg.Memory.Enabled, Schedule: cfg.Memory.Enabled})
	if err != nil {
		return err
	}
	// Runs after the server has stopped, so every recorded turn is
	// committed before the store closes.
	defer func() {
		if err := a.Close(); err != nil {
			logger.Error("memory", slog.Any("error", err))
		}
	}()
	srv, err := newServer(cfg, a, logger)
	if err != nil {
		return err
	}
	if cfg.General.Debug {
		srv.Debug = proxy.NewDebugLog(cfg.General.LogDir, logger)
		defer srv.Debug.Close()
	}

	ln, err := net.Listen("tcp", cfg.Server.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Server.Listen, err)
	}
	srv.Listen = ln.Addr()
	hs := &http.Server{
		Handler:           srv.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       5 * time.Minute,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelDebug),
	}
	logger.Info("listening", slog.String("addr", ln.Addr().String()), slog.String("ollama", config.Redact(cfg.OllamaURL)),
		slog.String("version", version), slog.String("config", cfg.Path))
	if ready != nil {
		ready(ln.Addr().String())
	}

	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}

	grace := cfg.Server.ShutdownTimeout.Duration
	logger.Info("shutting down", slog.Duration("grace", grace))
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		logger.Warn("grace period over, closing open connections", slog.Any("error", err))
		_ = hs.Close()
	}
	logger.Info("stopped")
	return nil
}

// newServer builds Ollama's surface and vera's own routes on the app's
// parts.
func newServer(cfg config.Config, a *app, logger *slog.Logger) (*proxy.Server, error) {
	srv := proxy.New(cfg.OllamaURL, a.transport, logger)
	srv.Ollama = a.ollama // one client for Ollama's API in the process
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
	srv.RecallEveryTurn = !cfg.Memory.StablePrefix
	if a.cloud != nil {
		srv.Cloud = a.cloud
		srv.FallbackModel = cfg.Cloud.FallbackModel
		adm.CloudHealth = func() admin.CloudHealth {
			return admin.CloudHealth{Provider: a.cloud.Host(), Models: a.cloud.Names(), KeySet: cfg.CloudKey != "", FallbackModel: cfg.Cloud.FallbackModel}
		}
	}
	srv.KeepMemoryLocal = !cfg.Cloud.InjectMemory
	srv.StripThink = cfg.Routing.StripThink
	srv.Metrics = proxy.NewMetrics(a.metrics)
	adm.Metrics = a.metrics
	if a.cloud != nil {
		a.cloud.Observe = srv.Metrics.CloudAttempt
	}
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
