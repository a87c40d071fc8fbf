package ollama

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/ollama/ollama/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// clock is a settable time for ModelInfo.Now.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func newClock() *clock { return &clock{now: time.Date(2025, 5, 1, 12, 0, 0, 0, time.UTC)} }

func TestWindow(t *testing.T) {
	tests := []struct {
		name string
		show *api.ShowResponse // nil: /api/show fails
		ps   []api.ProcessModelResponse
		ask  string
		want int
	}{
		{"the model's num_ctx wins", &api.ShowResponse{Parameters: "num_ctx 16384", ModelInfo: map[string]any{"general.architecture": "llama", "llama.context_length": 131072}},
			[]api.ProcessModelResponse{{Name: "llama3.2:latest", Model: "llama3.2:latest", ContextLength: 8192}}, "llama3.2", 16384},
		{"then the window it runs with", &api.ShowResponse{ModelInfo: map[string]any{"general.architecture": "llama", "llama.context_length": 131072}},
			[]api.ProcessModelResponse{{Name: "llama3.2:latest", Model: "llama3.2:latest", ContextLength: 8192}}, "llama3.2:latest", 8192},
		{"an untagged name is :latest", &api.ShowResponse{},
			[]api.ProcessModelResponse{{Name: "llama3.2:latest", Model: "llama3.2:latest", ContextLength: 32768}}, "llama3.2", 32768},
		{"another tag is another model", &api.ShowResponse{},
			[]api.ProcessModelResponse{{Name: "llama3.2:latest", Model: "llama3.2:latest", ContextLength: 32768}}, "llama3.2:1b", DefaultContextLength},
		{"not loaded: the default", &api.ShowResponse{ModelInfo: map[string]any{"general.architecture": "llama", "llama.context_length": 131072}},
			nil, "llama3.2", DefaultContextLength},
		{"the default capped by the trained length", &api.ShowResponse{ModelInfo: map[string]any{"general.architecture": "bert", "bert.context_length": 2048}},
			nil, "tiny", 2048},
		{"Ollama cannot say", nil, nil, "llama3.2", DefaultContextLength},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t)
			if tt.show != nil {
				f.answer("POST /api/show", http.StatusOK, tt.show)
			}
			f.answer("GET /api/ps", http.StatusOK, api.ProcessResponse{Models: tt.ps})
			m := NewModelInfo(f.client(t))
			assert.Equal(t, tt.want, m.Window(context.Background(), tt.ask))
		})
	}
}

func TestSystem(t *testing.T) {
	f := newFake(t)
	f.answer("POST /api/show", http.StatusOK, api.ShowResponse{System: "You are Mario from Super Mario Bros."})
	m := NewModelInfo(f.client(t))
	assert.Equal(t, "You are Mario from Super Mario Bros.", m.System(context.Background(), "mario"))
	assert.Equal(t, 4096, m.Window(context.Background(), "mario"))
	assert.Equal(t, 1, f.count("POST /api/show"), "System and Window share one /api/show")

	dead := NewModelInfo(New(deadURL(t), nil))
	assert.Empty(t, dead.System(context.Background(), "mario"))
	assert.Equal(t, DefaultContextLength, dead.Window(context.Background(), "mario"))
}

func TestShowIsCachedFiveMinutes(t *testing.T) {
	f := newFake(t)
	f.answer("POST /api/show", http.StatusOK, api.ShowResponse{Parameters: "num_ctx 8192"})
	clk := newClock()
	m := NewModelInfo(f.client(t))
	m.Now = clk.Now
	ctx := context.Background()

	assert.Equal(t, 8192, m.Window(ctx, "a"))
	clk.advance(4*time.Minute + 59*time.Second)
	assert.Equal(t, 8192, m.Window(ctx, "a"))
	assert.Equal(t, 1, f.count("POST /api/show"))

	// The model is re-created with another num_ctx: seen once the entry
	// is five minutes old.
	f.answer("POST /api/show", http.StatusOK, api.ShowResponse{Parameters: "num_ctx 2048"})
	clk.advance(time.Second)
	assert.Equal(t, 2048, m.Window(ctx, "a"))
	assert.Equal(t, 2, f.count("POST /api/show"))

	// Each model has its own entry.
	assert.Equal(t, 2048, m.Window(ctx, "b"))
	assert.Equal(t, 3, f.count("POST /api/show"))
}

func TestFailedShowIsAskedAgainSoon(t *testing.T) {
	f := newFake(t)
	f.answer("POST /api/show", http.StatusInternalServerError, map[string]string{"error": "busy"})
	clk := newClock()
	m := NewModelInfo(f.client(t))
	m.Now = clk.Now
	ctx := context.Background()

	assert.Empty(t, m.System(ctx, "a"))
	clk.advance(29 * time.Second)
	assert.Empty(t, m.System(ctx, "a"))
	assert.Equal(t, 1, f.count("POST /api/show"), "not asked on every chat while it fails")

	f.answer("POST /api/show", http.StatusOK, api.ShowResponse{System: "back"})
	clk.advance(time.Second)
	assert.Equal(t, "back", m.System(ctx, "a"), "asked again after 30 s, not 5 min")
	assert.Equal(t, 2, f.count("POST /api/show"))
}

func TestPSIsCachedTenSeconds(t *testing.T) {
	f := newFake(t)
	f.answer("POST /api/show", http.StatusOK, api.ShowResponse{})
	f.answer("GET /api/ps", http.StatusOK, api.ProcessResponse{Models: []api.ProcessModelResponse{{Name: "a:latest", Model: "a:latest", ContextLength: 8192}}})
	clk := newClock()
	m := NewModelInfo(f.client(t))
	m.Now = clk.Now
	ctx := context.Background()

	assert.Equal(t, 8192, m.Window(ctx, "a"))
	// One /api/ps answers for every model.
	assert.Equal(t, DefaultContextLength, m.Window(ctx, "b"))
	clk.advance(9 * time.Second)
	assert.Equal(t, 8192, m.Window(ctx, "a"))
	assert.Equal(t, 1, f.count("GET /api/ps"))

	// "a" is unloaded, "b" loaded with a larger window.
	f.answer("GET /api/ps", http.StatusOK, api.ProcessResponse{Models: []api.ProcessModelResponse{{Name: "b:latest", Model: "b:latest", ContextLength: 16384}}})
	clk.advance(time.Second)
	assert.Equal(t, 16384, m.Window(ctx, "b"))
	assert.Equal(t, DefaultContextLength, m.Window(ctx, "a"))
	assert.Equal(t, 2, f.count("GET /api/ps"))

	// A failed /api/ps counts as nothing loaded, for ten seconds too.
	f.answer("GET /api/ps", http.StatusInternalServerError, map[string]string{"error": "busy"})
	clk.advance(10 * time.Second)
	assert.Equal(t, DefaultContextLength, m.Window(ctx, "b"))
	assert.Equal(t, DefaultContextLength, m.Window(ctx, "b"))
	assert.Equal(t, 3, f.count("GET /api/ps"))
}

func TestWindowIsSafeForConcurrentUse(t *testing.T) {
	f := newFake(t)
	f.answer("POST /api/show", http.StatusOK, api.ShowResponse{System: "s"})
	f.answer("GET /api/ps", http.StatusOK, api.ProcessResponse{})
	m := NewModelInfo(f.client(t))
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			model := []string{"a", "b"}[i%2]
			assert.Equal(t, DefaultContextLength, m.Window(context.Background(), model))
			assert.Equal(t, "s", m.System(context.Background(), model))
		})
	}
	wg.Wait()
	require.LessOrEqual(t, f.count("POST /api/show"), 16)
}

func TestLookupTag(t *testing.T) {
	m := map[string]int{"llama3.2:latest": 1, "qwen3:8b": 2, "host:5000/team/model:latest": 3}
	tests := []struct {
		model string
		want  int
	}{
		{"llama3.2", 1}, {"llama3.2:latest", 1}, {"qwen3:8b", 2}, {"qwen3", 0},
		{"host:5000/team/model", 3}, {"llama3.2:1b", 0},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, lookupTag(m, tt.model), tt.model)
	}
}
