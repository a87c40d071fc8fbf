package app

import (
	"context"
	"math"
	"runtime/debug"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// The heap's limit is a quarter above what is live, and 32 MiB; never
// under 128 MiB; none while the store loads.
func TestMemoryLimit(t *testing.T) {
	assert.Equal(t, int64(128<<20), memoryLimit(10<<20, false))
	assert.Equal(t, int64(1<<30+1<<28+32<<20), memoryLimit(1<<30, false))
	assert.Equal(t, int64(math.MaxInt64), memoryLimit(1<<30, true))
}

// The tuner sets the limit as the store's loading says, lifts it when it
// stops, and leaves a limit the user set (GOMEMLIMIT) alone.
func TestTuneMemoryLimit(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	limit := func() int64 { return debug.SetMemoryLimit(-1) }

	debug.SetMemoryLimit(math.MaxInt64)
	var loading atomic.Bool
	loading.Store(true)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { tuneMemoryLimitEvery(ctx, loading.Load, time.Millisecond); close(done) }()
	time.Sleep(20 * time.Millisecond)
	assert.Equal(t, int64(math.MaxInt64), limit(), "no limit while the store loads")
	loading.Store(false)
	assert.Eventually(t, func() bool { return limit() != math.MaxInt64 }, 5*time.Second, time.Millisecond)
	assert.GreaterOrEqual(t, limit(), int64(128<<20))
	cancel()
	<-done
	assert.Equal(t, int64(math.MaxInt64), limit(), "lifted when the tuner stops")

	debug.SetMemoryLimit(3 << 30) // as GOMEMLIMIT would
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	go tuneMemoryLimitEvery(ctx, func() bool { return false }, time.Millisecond)
	time.Sleep(20 * time.Millisecond)
	assert.Equal(t, int64(3<<30), limit(), "the user's limit stays")
}
