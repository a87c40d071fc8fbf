package memory_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/memory"
	"github.com/vera-proxy/vera/text"
)

// slowEmbedder blocks every call until release is closed; started gets a
// value as each call begins.
type slowEmbedder struct{ started, release chan struct{} }

func (e slowEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	e.started <- struct{}{}
	select {
	case <-e.release:
		return text.HashEmbedder{Dim: 8}.Embed(ctx, texts)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

type spaceRecorder struct {
	model string
	dim   int
}

func (s *spaceRecorder) VectorSpace(_ context.Context, model string, dim int) (bool, error) {
	s.model, s.dim = model, dim
	return false, nil
}

func TestGateOpensOnceTheModelAnswers(t *testing.T) {
	ctx := context.Background()
	e := &flakyEmbedder{}
	e.down.Store(true)
	space := &spaceRecorder{}
	g := memory.NewGate(e, "nomic-embed-text", space, nil)
	_, err := g.Embed(ctx, []string{"x"})
	require.ErrorIs(t, err, memory.ErrUnavailable)
	assert.Contains(t, err.Error(), "connection refused", "the probe's reason is passed on")
	assert.Contains(t, g.Err(), "connection refused")
	assert.Zero(t, g.Dim())

	e.down.Store(false)
	g.Settle(ctx, time.Millisecond)
	assert.Equal(t, 3, g.Dim(), "dimension probed from the model")
	assert.Equal(t, "nomic-embed-text", space.model)
	assert.Equal(t, 3, space.dim)
	assert.Empty(t, g.Err())
	v, err := g.Embed(ctx, []string{"x"})
	require.NoError(t, err)
	assert.Len(t, v, 1)
}

func TestGateNeverMakesAChatWaitForAProbe(t *testing.T) {
	e := slowEmbedder{started: make(chan struct{}, 8), release: make(chan struct{})}
	g := memory.NewGate(e, "m", nil, nil)
	ctx, cancel := context.WithCancel(context.Background())
	settled := make(chan struct{})
	go func() { g.Settle(ctx, time.Hour); close(settled) }()
	// While the background probe hangs on a loading model, a chat's
	// embedding call returns at once (and the chat goes lexical).
	<-e.started
	done := make(chan error, 1)
	go func() {
		_, err := g.Embed(context.Background(), []string{"q"})
		done <- err
	}()
	select {
	case err := <-done:
		assert.ErrorIs(t, err, memory.ErrUnavailable)
	case <-time.After(5 * time.Second):
		t.Fatal("Embed waited for the running probe")
	}
	close(e.release)
	<-settled
	cancel()
	assert.Equal(t, 8, g.Dim())
}
