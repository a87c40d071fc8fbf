package memory_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/memory"
)

// flakyHistory is a HistoryStore in memory that refuses writes while down.
type flakyHistory struct {
	mu   sync.Mutex
	down bool
	es   []memory.Entry
}

func (f *flakyHistory) AddHistory(_ context.Context, es ...memory.Entry) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return errors.New("disk full")
	}
	f.es = append(f.es, es...)
	return nil
}

func (f *flakyHistory) HistoryOf(_ context.Context, id string) ([]memory.Entry, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []memory.Entry
	for _, e := range f.es {
		if e.ID == id {
			out = append(out, e)
		}
	}
	return out, nil
}

func (f *flakyHistory) Audit(context.Context, memory.AuditQuery) ([]memory.Entry, string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]memory.Entry(nil), f.es...), "", nil
}

func (f *flakyHistory) DeleteHistory(_ context.Context, ns string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	kept := f.es[:0]
	for _, e := range f.es {
		if e.Namespace != ns {
			kept = append(kept, e)
		}
	}
	f.es = kept
	return nil
}

// A store that refuses a write loses no entry: the next flush writes
// them, in their order, and the history of a memory shows those waiting.
func TestHistoryKeepsWhatAFailingStoreRefused(t *testing.T) {
	ctx := context.Background()
	st := &flakyHistory{}
	h := memory.NewHistory(st)
	m := memory.Memory{ID: "m1", Namespace: "alice"}
	h.Record(ctx, memory.ViaChat, memory.Created, m)
	st.down = true
	h.Record(ctx, memory.ViaAdmin, memory.Edited, m)
	h.Record(ctx, memory.ViaAdmin, memory.Hidden, m)
	es, err := h.Of(ctx, "m1")
	require.NoError(t, err)
	require.Len(t, es, 3, "those waiting are shown")
	require.Error(t, h.Flush(ctx))
	st.down = false
	require.NoError(t, h.Flush(ctx))
	require.Len(t, st.es, 3)
	var actions []string
	for _, e := range st.es {
		actions = append(actions, e.Action)
		assert.WithinDuration(t, time.Now(), e.At, time.Minute)
	}
	assert.Equal(t, []string{"created", "edited", "forgotten"}, actions)

	require.NoError(t, h.Forget(ctx, "alice"))
	es, err = h.Of(ctx, "m1")
	require.NoError(t, err)
	assert.Empty(t, es)
}

func TestActorOf(t *testing.T) {
	ctx := context.Background()
	assert.Equal(t, "admin", memory.ActorOf(ctx, "admin"))
	assert.Equal(t, "mcp", memory.ActorOf(memory.WithActor(ctx, "mcp"), "admin"))
}
