package embedded

import (
	"runtime"
	"sync/atomic"
)

// spread runs work over [0, n) in pieces of piece slots, on up to
// workers workers (spreadWorkers: every core for a large namespace): the
// caller's goroutine and helpers each claim the next piece until none is
// left, and spread returns once every piece is done. A core that was idle
// can take a millisecond to wake (measured on a 2-CPU VM after 20 ms
// idle: the same scan split in two fixed halves then took longer than on
// one core); here a helper that comes late takes what is left, and one
// that comes after the end takes nothing and is not waited for.
//
// work(w, lo, hi) does one piece for worker w (0 is the caller), whose
// pieces come in increasing order.
func spread(n, piece, workers int, work func(w, lo, hi int)) {
	pieces := int64((n + piece - 1) / piece)
	if workers == 1 || pieces <= 1 {
		for lo := 0; lo < n; lo += piece {
			work(0, lo, min(lo+piece, n))
		}
		return
	}
	var next, done atomic.Int64
	finished := make(chan struct{})
	run := func(w int) {
		for {
			i := next.Add(1) - 1
			if i >= pieces {
				return
			}
			lo := int(i) * piece
			work(w, lo, min(lo+piece, n))
			if done.Add(1) == pieces {
				close(finished)
			}
		}
	}
	for w := 1; w < workers; w++ {
		go run(w)
	}
	run(0)
	<-finished
}

// spreadWorkers is how many workers spread uses for n slots.
func spreadWorkers(n int) int {
	if n < parallelAbove {
		return 1
	}
	return runtime.GOMAXPROCS(0)
}
