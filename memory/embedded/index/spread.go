package index

import (
	"runtime"
	"sync"
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
// With j, the last worker is not started: it is left for a goroutine
// that comes free later (j.Join), and the core for it meanwhile.
//
// work(w, lo, hi) does one piece for worker w (0 is the caller), whose
// pieces come in increasing order.
func spread(n, piece, workers int, j *JoinPoint, work func(w, lo, hi int)) {
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
	started := workers
	if j != nil {
		started--
		j.open(func() { run(workers - 1) })
		defer j.close()
	}
	for w := 1; w < started; w++ {
		go run(w)
	}
	run(0)
	<-finished
}

// JoinPoint lets one goroutine take the last worker's part in a spread
// that another started and still runs: a search ahead ranks on every
// core but the one its caller needs for the network, and the caller
// joins once its own work is done.
type JoinPoint struct {
	opened chan struct{} // closed once a spread reserved its worker
	once   sync.Once
	mu     sync.Mutex
	run    func() // the reserved worker, while its spread runs
}

// NewJoinPoint returns a JoinPoint for one ranking to reserve a worker at.
func NewJoinPoint() *JoinPoint { return &JoinPoint{opened: make(chan struct{})} }

func (j *JoinPoint) open(run func()) {
	j.mu.Lock()
	j.run = run
	j.mu.Unlock()
	j.once.Do(func() { close(j.opened) })
}

func (j *JoinPoint) close() {
	j.mu.Lock()
	j.run = nil
	j.mu.Unlock()
}

// Join works as the reserved worker of the spread, once one has started,
// until its pieces are all taken; it returns at once when done closes
// first (the work needed no spread). Once only: the worker's state is
// its own.
func (j *JoinPoint) Join(done <-chan struct{}) {
	select {
	case <-j.opened:
	case <-done:
		return
	}
	j.mu.Lock()
	run := j.run
	j.run = nil
	j.mu.Unlock()
	if run != nil {
		run()
	}
}

// spreadWorkers is how many workers spread uses for the namespace's
// slots: every core for a large namespace.
func (ix *Namespace) spreadWorkers() int {
	if len(ix.meta) < ix.opts.ParallelAbove {
		return 1
	}
	return runtime.GOMAXPROCS(0)
}
