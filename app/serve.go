package app

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"runtime/debug"
	"runtime/metrics"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/vera-proxy/vera/config"
	"github.com/vera-proxy/vera/prompts"
	"github.com/vera-proxy/vera/proxy"
)

// serve runs the proxy until ctx is cancelled, then stops accepting and lets
// running requests (streams included) finish within the shutdown grace
// period.
func serve(ctx context.Context, cfg config.Config, stderr io.Writer, ready func(addr string)) error {
	// The address first: when it is taken (by Ollama itself, on a first
	// run), vera says so, and only that, and leaves nothing behind.
	ln, err := listen(ctx, cfg.Server.Listen)
	if err != nil {
		return err
	}
	defer ln.Close()
	logger := newLogger(stderr, cfg.General.Debug)
	warnAtStart(cfg, logger)
	gin.SetMode(gin.ReleaseMode)
	a, err := newApp(ctx, cfg, logger, appOptions{Memory: cfg.Memory.Enabled, Schedule: cfg.Memory.Enabled, Background: true})
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
	srv, err := a.server()
	if err != nil {
		return err
	}
	if cfg.General.Debug {
		srv.Debug = proxy.NewDebugLog(cfg.General.LogDir, logger)
		defer srv.Debug.Close()
	}
	srv.Listen = ln.Addr()
	hs := httpServer(srv.Handler(), logger)
	logger.Info("listening", slog.String("addr", ln.Addr().String()), slog.String("ollama", config.Redact(cfg.OllamaURL)),
		slog.String("version", Version()), slog.String("config", cfg.Path))
	if ready != nil {
		ready(ln.Addr().String())
	}
	return serveUntilDone(ctx, hs, ln, a.loading, cfg.Server.ShutdownTimeout.Duration, logger)
}

// warnAtStart logs what the config leaves open or out of date: its own
// warnings, an address anyone may reach without an identity, every
// browser origin allowed, rules in the place of an older version.
func warnAtStart(cfg config.Config, logger *slog.Logger) {
	for _, w := range cfg.Warnings {
		logger.Warn("config", slog.String("warning", w))
	}
	if cfg.ExposedWithoutIdentity() {
		logger.Warn(config.ExposedWarning, slog.String("listen", cfg.Server.Listen))
	}
	if proxy.AllowsEveryOrigin(cfg.Server.AllowedOrigins) {
		logger.Warn(config.EveryOriginWarning, slog.Any("allowed_origins", cfg.Server.AllowedOrigins))
	}
	if cfg.Memory.Enabled {
		if path, n := prompts.LegacyRules(cfg.Prompts.Dir); n > 0 {
			logger.Warn(prompts.LegacyRulesWarning, slog.String("file", path), slog.Int("lines", n))
		}
	}
}

// httpServer serves h. No ReadTimeout: a blob upload of gigabytes must
// pass however long it takes. The handler holds every request body, on
// every route, to server.body_idle_timeout instead, and does not wait for
// a body its route leaves unread.
func httpServer(h http.Handler, logger *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       5 * time.Minute,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelDebug),
	}
}

// serveUntilDone serves on ln until ctx is cancelled, tuning the heap's
// limit meanwhile, then shuts down: running requests get grace to
// finish, the connections still open after it are closed.
func serveUntilDone(ctx context.Context, hs *http.Server, ln net.Listener, loading func() bool, grace time.Duration, logger *slog.Logger) error {
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	limitCtx, stopLimit := context.WithCancel(ctx)
	defer stopLimit()
	go tuneMemoryLimit(limitCtx, loading)
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}

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

// tuneMemoryLimit keeps the Go heap's limit a quarter above what is live
// (and 32 MiB), so that a large store's index costs about its own size in
// memory instead of GOGC's doubling of it; never under 128 MiB, where
// GOGC's own target is lower anyway. While the store loads (its heap
// grows fast) there is no limit: the collector would run all the time. A
// GOMEMLIMIT set by the user is left alone.
func tuneMemoryLimit(ctx context.Context, loading func() bool) {
	tuneMemoryLimitEvery(ctx, loading, 5*time.Second)
}

// tuneMemoryLimitEvery is tuneMemoryLimit, looking every tick.
func tuneMemoryLimitEvery(ctx context.Context, loading func() bool, tick time.Duration) {
	if debug.SetMemoryLimit(-1) != math.MaxInt64 {
		return
	}
	defer debug.SetMemoryLimit(math.MaxInt64)
	live := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			metrics.Read(live)
			if live[0].Value.Kind() == metrics.KindUint64 {
				debug.SetMemoryLimit(memoryLimit(live[0].Value.Uint64(), loading()))
			}
		}
	}
}

// memoryLimit is the heap's limit for live bytes live: none while the
// store loads.
func memoryLimit(live uint64, loading bool) int64 {
	if loading {
		return math.MaxInt64
	}
	return int64(max(live+live/4+32<<20, 128<<20))
}
