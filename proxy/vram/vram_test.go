package vram

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/ollama"
)

// gpu is a fake Ollama that tracks what is loaded and logs every call.
type gpu struct {
	mu       sync.Mutex
	loaded   map[string]int64 // name → MB
	sizes    map[string]int64
	calls    []string
	sticky   map[string]bool // refuses to unload
	loadGate chan struct{}   // when set, loads wait for it to close
}

// stick makes model refuse (or accept) to unload, under the lock: unloads
// of a flush that timed out may still be running.
func (g *gpu) stick(model string, on bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.sticky[model] = on
}

func newGPU(sizes map[string]int64, loaded ...string) *gpu {
	g := &gpu{loaded: map[string]int64{}, sizes: sizes, sticky: map[string]bool{}}
	for _, m := range loaded {
		g.loaded[m] = sizes[m]
	}
	return g
}

func (g *gpu) log(s string) {
	g.mu.Lock()
	g.calls = append(g.calls, s)
	g.mu.Unlock()
}

func (g *gpu) PS(context.Context) ([]ollama.Running, error) {
	g.log("ps")
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []ollama.Running
	for m, mb := range g.loaded {
		out = append(out, ollama.Running{Name: m, Size: mb << 20, SizeVRAM: mb << 20})
	}
	return out, nil
}

func (g *gpu) Load(ctx context.Context, model string) error {
	if g.loadGate != nil {
		<-g.loadGate
	}
	g.log("load " + model)
	g.mu.Lock()
	defer g.mu.Unlock()
	g.loaded[model] = g.sizes[model]
	return nil
}

func (g *gpu) Unload(ctx context.Context, model string) error {
	g.log("unload " + model)
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.sticky[model] {
		delete(g.loaded, model)
	}
	return nil
}

func (g *gpu) history() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.calls...)
}

var sizes = map[string]int64{"qwen2.5:1.5b": 1500, "qwen3:4b": 3500, "qwen3:8b": 6500, "nomic-embed-text:latest": 300}

func cfg() Config {
	return Config{Large: []string{"qwen3:8b"}, TotalMB: 8192, FlushTimeout: time.Second, PollInterval: 5 * time.Millisecond,
		Prewarm: []string{"qwen3:4b", "qwen2.5:1.5b"}, MaxLarge: 1, Keep: []string{"nomic-embed-text"}}
}

// The order around a complex request: the others unloaded (never the
// embedding model), ps shows them gone, the answer, then the large model
// unloaded and the everyday ones pre-warmed.
func TestFlushOrder(t *testing.T) {
	g := newGPU(sizes, "qwen3:4b", "qwen2.5:1.5b", "nomic-embed-text:latest")
	m := New(g, cfg(), nil)
	after, err := m.Before(context.Background(), "qwen3:8b")
	require.NoError(t, err)
	calls := g.history()
	assert.Equal(t, "ps", calls[0])
	assert.ElementsMatch(t, []string{"unload qwen3:4b", "unload qwen2.5:1.5b"}, calls[1:3])
	assert.Equal(t, "ps", calls[3], "then ps shows them gone")
	assert.NotContains(t, calls, "unload nomic-embed-text:latest")
	g.log("chat qwen3:8b")
	after()
	m.Close()
	calls = g.history()
	assert.Equal(t, []string{"chat qwen3:8b", "unload qwen3:8b", "load qwen3:4b", "load qwen2.5:1.5b"}, calls[len(calls)-4:])
}

// A model large only because it does not fit: flushed before, nothing
// after (no unload, no pre-warm loop).
func TestLargeBySize(t *testing.T) {
	g := newGPU(sizes, "qwen3:4b", "qwen2.5:1.5b")
	c := cfg()
	c.Large = nil
	c.TotalMB = 6000
	m := New(g, c, nil)
	// Seen loaded once, so its size is known.
	m.remember([]ollama.Running{{Name: "qwen3:8b", SizeVRAM: 6500 << 20}})
	after, err := m.Before(context.Background(), "qwen3:8b")
	require.NoError(t, err)
	assert.Contains(t, g.history(), "unload qwen3:4b")
	n := len(g.history())
	after()
	m.Close()
	assert.Len(t, g.history(), n, "nothing after")
	// The medium model fits: no flush.
	g2 := newGPU(sizes, "qwen2.5:1.5b")
	m2 := New(g2, c, nil)
	after, err = m2.Before(context.Background(), "qwen3:4b")
	require.NoError(t, err)
	after()
	assert.NotContains(t, fmt.Sprint(g2.history()), "unload")
}

func TestFlushTimeout(t *testing.T) {
	g := newGPU(sizes, "qwen3:4b")
	g.stick("qwen3:4b", true)
	c := cfg()
	c.FlushTimeout = 50 * time.Millisecond
	m := New(g, c, nil)
	after, err := m.Before(context.Background(), "qwen3:8b")
	assert.ErrorIs(t, err, ErrFlushTimeout)
	after()
	// The turn was given back: the next large request is not stuck.
	g.stick("qwen3:4b", false)
	after, err = m.Before(context.Background(), "qwen3:8b")
	require.NoError(t, err)
	after()
	m.Close()
}

// Other requests wait while a flush is under way; two large requests are
// serialised; a client that leaves while waiting leaves the queue.
func TestWaiting(t *testing.T) {
	g := newGPU(sizes, "qwen3:4b", "qwen2.5:1.5b")
	g.stick("qwen3:4b", true) // the flush lasts until we let it go
	c := cfg()
	c.FlushTimeout = 5 * time.Second
	m := New(g, c, nil)
	large := make(chan func(), 1)
	go func() {
		after, err := m.Before(context.Background(), "qwen3:8b")
		assert.NoError(t, err)
		large <- after
	}()
	require.Eventually(t, func() bool { m.mu.Lock(); defer m.mu.Unlock(); return m.flushing != nil }, time.Second, time.Millisecond)

	light := make(chan struct{})
	go func() {
		after, err := m.Before(context.Background(), "qwen2.5:1.5b")
		assert.NoError(t, err)
		after()
		close(light)
	}()
	gone, cancel := context.WithCancel(context.Background())
	left := make(chan error, 1)
	go func() {
		_, err := m.Before(gone, "qwen3:8b") // a second large request waits its turn
		left <- err
	}()
	select {
	case <-light:
		t.Fatal("a light request went on during the flush")
	case <-time.After(50 * time.Millisecond):
	}
	cancel()
	assert.ErrorIs(t, <-left, context.Canceled, "a client that leaves, leaves the queue")

	g.stick("qwen3:4b", false)
	after := <-large
	<-light
	assert.NotContains(t, g.history(), "load qwen2.5:1.5b", "nothing reloaded during the flush")

	second := make(chan struct{})
	go func() {
		a, err := m.Before(context.Background(), "qwen3:8b")
		assert.NoError(t, err)
		a()
		close(second)
	}()
	select {
	case <-second:
		t.Fatal("two large requests at once")
	case <-time.After(50 * time.Millisecond):
	}
	after()
	<-second
	m.Close()
}

// A slow pre-warm is background work: the answer does not wait for it,
// and Close (shutdown) does.
func TestSlowPrewarmIsDrainedOnClose(t *testing.T) {
	g := newGPU(sizes, "qwen3:4b")
	g.loadGate = make(chan struct{})
	m := New(g, cfg(), nil)
	after, err := m.Before(context.Background(), "qwen3:8b")
	require.NoError(t, err)
	after() // returns while the pre-warm is held
	closed := make(chan struct{})
	go func() { m.Close(); close(closed) }()
	select {
	case <-closed:
		t.Fatal("Close did not wait for the pre-warm")
	case <-time.After(20 * time.Millisecond):
	}
	close(g.loadGate)
	<-closed
	assert.Contains(t, g.history(), "load qwen2.5:1.5b")
}

// With two large requests allowed at once, the second flush never evicts
// the first large model while it answers; a flush that timed out keeps
// its turn for a chat that goes on to the model it named.
func TestLargeModelsDoNotEvictEachOther(t *testing.T) {
	g := newGPU(map[string]int64{"a": 4000, "b": 4000, "small": 1000}, "small")
	c := cfg()
	c.Large, c.MaxLarge = []string{"a", "b"}, 2
	m := New(g, c, nil)
	afterA, err := m.Before(context.Background(), "a")
	require.NoError(t, err)
	require.NoError(t, g.Load(context.Background(), "a"))
	afterB, err := m.Before(context.Background(), "b")
	require.NoError(t, err)
	assert.NotContains(t, g.history(), "unload a", "a is still answering")
	afterA()
	afterB()
	m.Close()

	g = newGPU(sizes, "qwen3:4b")
	g.stick("qwen3:4b", true)
	c = cfg()
	c.FlushTimeout = 30 * time.Millisecond
	m = New(g, c, nil)
	after, err := m.Before(context.Background(), "qwen3:8b")
	require.ErrorIs(t, err, ErrFlushTimeout)
	second := make(chan struct{})
	go func() {
		a, _ := m.Before(context.Background(), "qwen3:8b")
		a()
		close(second)
	}()
	select {
	case <-second:
		t.Fatal("the first chat still holds its turn")
	case <-time.After(50 * time.Millisecond):
	}
	after()
	<-second
	m.Close()
}
