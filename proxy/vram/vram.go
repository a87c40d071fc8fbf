// Package vram makes room on one small GPU before a large model answers
// ([vram]): the other loaded models are unloaded and /api/ps is
// polled until they are gone; afterwards a model listed as large is
// unloaded again and the everyday models are pre-warmed, in the
// background. Requests for large models are serialised, and other
// requests wait while a flush is under way instead of reloading what was
// just evicted. It is built on the ollama client; it serves no HTTP.
package vram

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/vera-proxy/vera/ollama"
)

// Ollama is what the manager needs of Ollama (ollama.Client has it).
type Ollama interface {
	PS(ctx context.Context) ([]ollama.Running, error)
	Load(ctx context.Context, model string) error
	Unload(ctx context.Context, model string) error
}

var _ Ollama = (*ollama.Client)(nil)

// Config is [vram], resolved.
type Config struct {
	Large        []string // large_models
	TotalMB      int      // total_mb
	FlushTimeout time.Duration
	PollInterval time.Duration
	Prewarm      []string // pre-warmed after a large model, in order (medium, light)
	MaxLarge     int      // max_large_concurrency
	Keep         []string // never unloaded (the embedding model)
}

// Manager runs the flushes of one GPU.
type Manager struct {
	o   Ollama
	cfg Config
	log *slog.Logger

	large chan struct{} // one token per large request allowed at once

	flushMu  sync.Mutex // one flush at a time
	mu       sync.Mutex
	flushing chan struct{} // closed when the flush under way ends; nil: none
	sizes    map[string]int64
	active   map[string]int // large models answering now: no flush evicts them

	bg     context.Context
	stop   context.CancelFunc
	bgWork sync.WaitGroup
}

// New returns a Manager; Close drains its background work.
func New(o Ollama, cfg Config, logger *slog.Logger) *Manager {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxLarge < 1 {
		cfg.MaxLarge = 1
	}
	if cfg.FlushTimeout <= 0 {
		cfg.FlushTimeout = 15 * time.Second
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = 250 * time.Millisecond
	}
	m := &Manager{o: o, cfg: cfg, log: logger, large: make(chan struct{}, cfg.MaxLarge), sizes: map[string]int64{}, active: map[string]int{}}
	m.bg, m.stop = context.WithCancel(context.Background())
	return m
}

// Close waits for the background work (unloads, pre-warms) to end.
func (m *Manager) Close() {
	m.bgWork.Wait()
	m.stop()
}

// ErrFlushTimeout: the other models were still loaded when flush_timeout
// passed.
var ErrFlushTimeout = errors.New("the other models did not leave VRAM in time")

// Before prepares the GPU for a request for model. For a large model it
// waits its turn, unloads every other model and polls until they are
// gone; for any other it waits while a flush is under way. It returns the
// function to call once the answer is over, and ErrFlushTimeout when the
// room could not be made (the caller then chooses another model; after
// is still to be called). A client that hangs up while waiting gets
// ctx's error.
func (m *Manager) Before(ctx context.Context, model string) (after func(), err error) {
	listed := m.listed(model)
	if !listed && !m.tooBig(ctx, model) {
		if err := m.waitFlush(ctx); err != nil {
			return func() {}, err
		}
		return func() {}, nil
	}
	select {
	case m.large <- struct{}{}:
	case <-ctx.Done():
		return func() {}, ctx.Err()
	}
	key := canonical(model)
	m.mu.Lock()
	m.active[key]++
	m.mu.Unlock()
	var once sync.Once
	after = func() {
		once.Do(func() {
			m.mu.Lock()
			if m.active[key]--; m.active[key] <= 0 {
				delete(m.active, key)
			}
			m.mu.Unlock()
			<-m.large
			if listed {
				m.afterLarge(model)
			}
		})
	}
	if err := m.flush(ctx, model); err != nil {
		if !errors.Is(err, ErrFlushTimeout) {
			after()
			return func() {}, err
		}
		// The caller may still send the chat to the model it named: it
		// keeps its turn until after.
		return after, err
	}
	return after, nil
}

// listed reports whether model is in large_models.
func (m *Manager) listed(model string) bool {
	return slices.ContainsFunc(m.cfg.Large, func(l string) bool { return same(l, model) })
}

// tooBig reports whether model, by the size it had when last seen loaded,
// does not fit beside what is loaded now.
func (m *Manager) tooBig(ctx context.Context, model string) bool {
	m.mu.Lock()
	size, known := m.sizes[canonical(model)]
	m.mu.Unlock()
	if !known || m.cfg.TotalMB <= 0 {
		return false
	}
	running, err := m.o.PS(ctx)
	if err != nil {
		return false
	}
	m.remember(running)
	var used int64
	for _, r := range running {
		if same(r.Name, model) {
			return false // already loaded
		}
		used += r.SizeVRAM
	}
	return size > int64(m.cfg.TotalMB)<<20-used
}

// remember keeps the sizes of the models seen loaded.
func (m *Manager) remember(running []ollama.Running) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range running {
		size := r.SizeVRAM
		if size == 0 {
			size = r.Size
		}
		m.sizes[canonical(r.Name)] = size
	}
}

// waitFlush waits while a flush is under way.
func (m *Manager) waitFlush(ctx context.Context) error {
	m.mu.Lock()
	f := m.flushing
	m.mu.Unlock()
	if f == nil {
		return nil
	}
	select {
	case <-f:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// flush unloads every loaded model but model and the kept ones, and polls
// /api/ps until they are gone.
func (m *Manager) flush(ctx context.Context, model string) error {
	m.flushMu.Lock()
	defer m.flushMu.Unlock()
	done := make(chan struct{})
	m.mu.Lock()
	m.flushing = done
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		m.flushing = nil
		m.mu.Unlock()
		close(done)
	}()
	deadline := time.Now().Add(m.cfg.FlushTimeout)
	running, err := m.o.PS(ctx)
	if err != nil {
		return err
	}
	m.remember(running)
	for _, r := range running {
		if m.evicts(r.Name, model) {
			if err := m.o.Unload(ctx, r.Name); err != nil && ctx.Err() != nil {
				return ctx.Err()
			}
		}
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(m.cfg.PollInterval):
		}
		running, err := m.o.PS(ctx)
		left := slices.DeleteFunc(running, func(r ollama.Running) bool { return !m.evicts(r.Name, model) })
		if err == nil && len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			m.log.Warn("VRAM flush timed out: other models still loaded", slog.String("model", model), slog.Duration("flush_timeout", m.cfg.FlushTimeout))
			return ErrFlushTimeout
		}
		// A model busy answering stays until it is done: ask again.
		for _, r := range left {
			_ = m.o.Unload(ctx, r.Name)
		}
	}
}

// evicts reports whether a flush for model unloads name: never the model
// itself, a kept one, or a large model still answering.
func (m *Manager) evicts(name, model string) bool {
	if same(name, model) || slices.ContainsFunc(m.cfg.Keep, func(k string) bool { return same(k, name) }) {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.active[canonical(name)] == 0
}

// afterLarge unloads a listed large model and pre-warms the everyday
// ones, in the background; Close waits for it.
func (m *Manager) afterLarge(model string) {
	m.bgWork.Add(1)
	go func() {
		defer m.bgWork.Done()
		ctx, cancel := context.WithTimeout(m.bg, 5*time.Minute)
		defer cancel()
		if err := m.o.Unload(ctx, model); err != nil {
			m.log.Warn("unloading the large model after its answer failed", slog.String("model", model), slog.Any("error", err))
		}
		for _, p := range m.cfg.Prewarm {
			if p == "" || same(p, model) {
				continue
			}
			if err := m.o.Load(ctx, p); err != nil {
				m.log.Warn("pre-warming failed", slog.String("model", p), slog.Any("error", err))
			}
		}
	}()
}

func canonical(name string) string {
	if !strings.Contains(name, ":") {
		return name + ":latest"
	}
	return name
}

func same(a, b string) bool { return canonical(a) == canonical(b) }
