package embedded

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// spread does every slot once, each worker's pieces in increasing order,
// whatever the sizes and however the workers come.
func TestSpreadCoversEachSlotOnce(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 200 {
		n, piece, workers := rng.IntN(5000), 1+rng.IntN(700), 1+rng.IntN(4)
		seen := make([]int, n)
		last := make([]int, workers)
		for w := range last {
			last[w] = -1
		}
		var mu sync.Mutex
		var wrong []string // asserted here, not in the workers' goroutines
		spread(n, piece, workers, func(w, lo, hi int) {
			mu.Lock()
			defer mu.Unlock()
			if lo <= last[w] || hi-lo > piece {
				wrong = append(wrong, fmt.Sprintf("worker %d: [%d, %d) after %d", w, lo, hi, last[w]))
			}
			last[w] = lo
			for s := lo; s < hi; s++ {
				seen[s]++
			}
		})
		require.Empty(t, wrong)
		for s, k := range seen {
			require.Equal(t, 1, k, "slot %d of %d (pieces of %d, %d workers)", s, n, piece, workers)
		}
	}
}
