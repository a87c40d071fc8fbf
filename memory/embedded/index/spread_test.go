package index

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// spread does every slot once, each worker's pieces in increasing order,
// whatever the sizes and however the workers come: with a worker left
// for a joiner, whether it joins early, late or never.
func TestSpreadCoversEachSlotOnce(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	joined := 0
	for i := range 300 {
		n, piece, workers := rng.IntN(5000), 1+rng.IntN(700), 1+rng.IntN(4)
		var j *JoinPoint
		done, took := make(chan struct{}), make(chan struct{})
		var joiner sync.WaitGroup
		var tookOnce sync.Once
		if i%3 > 0 {
			j = NewJoinPoint()
			if i%3 == 1 {
				joiner.Go(func() { j.Join(done) })
			}
		}
		seen := make([]int, n)
		last := make([]int, workers)
		for w := range last {
			last[w] = -1
		}
		var mu sync.Mutex
		var wrong []string // asserted here, not in the workers' goroutines
		spread(n, piece, workers, j, func(w, lo, hi int) {
			if w == 0 && lo == 0 && i%3 == 1 && workers == 2 && n > piece {
				// The caller's first piece waits a while for the
				// joiner, so that it has pieces left to take.
				select {
				case <-took:
				case <-time.After(time.Second):
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if w == workers-1 && workers > 1 && j != nil {
				joined++
				tookOnce.Do(func() { close(took) })
			}
			if lo <= last[w] || hi-lo > piece {
				wrong = append(wrong, fmt.Sprintf("worker %d: [%d, %d) after %d", w, lo, hi, last[w]))
			}
			last[w] = lo
			for s := lo; s < hi; s++ {
				seen[s]++
			}
		})
		close(done)
		joiner.Wait()
		require.Empty(t, wrong)
		for s, k := range seen {
			require.Equal(t, 1, k, "slot %d of %d (pieces of %d, %d workers)", s, n, piece, workers)
		}
	}
	require.Positive(t, joined, "a joiner must take pieces")
}

// A joiner whose work needed no spread returns once the work is done; a
// spread that reserves a worker then still does every piece alone.
func TestJoinReturnsWithoutSpread(t *testing.T) {
	j, done := NewJoinPoint(), make(chan struct{})
	close(done)
	j.Join(done)
	var mu sync.Mutex
	seen := 0
	spread(1000, 100, 2, j, func(w, lo, hi int) {
		mu.Lock()
		defer mu.Unlock()
		require.Zero(t, w, "only the caller works")
		seen += hi - lo
	})
	require.Equal(t, 1000, seen)
}
