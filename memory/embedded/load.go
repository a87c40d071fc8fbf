package embedded

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vera-proxy/vera/memory"
	"github.com/vera-proxy/vera/memory/embedded/index"
	"github.com/vera-proxy/vera/text"
)

// Loading: every memory of the file, read in chunks and analysed on every
// core, into the in-memory indexes search runs on. It runs in the
// background from Start: the store takes writes at once (they wait for
// their turn at the file, never for the whole load), and searches say
// memory.ErrLoading until it is done.

var _ memory.Loader = (*DB)(nil)

// loadChunk is how many rows one query of the load reads: between two,
// the store's one connection is free for the writes of the moment (a
// turn's commit waits for one chunk, not for the load).
const loadChunk = 4096

// loadState is the background load of the index.
type loadState struct {
	done          chan struct{} // closed once the load has ended
	cancel        context.CancelFunc
	loaded, total atomic.Int64
	active        bool                                // under DB.mu: changes go to pending
	pending       []func(map[string]*index.Namespace) // under DB.mu: changes made during the load, in commit order
	err           error                               // under DB.mu, once done: why the load failed
	from          string                              // under DB.mu, once done: where the index came from
	took          time.Duration                       // under DB.mu, once done: how long the load took
}

// startLoad loads the index in the background.
func (d *DB) startLoad(ctx context.Context) {
	ctx, d.load.cancel = context.WithCancel(context.WithoutCancel(ctx))
	d.load.done = make(chan struct{})
	d.load.active = true
	go func() {
		defer close(d.load.done)
		start := time.Now()
		ns, replayed, err := d.fromSnapshot(ctx)
		from, rebuilt := fmt.Sprintf("snapshot, %d rows changed since", replayed), err != nil
		switch {
		case rebuilt && errors.Is(err, fs.ErrNotExist):
			// A new store, or one from before snapshots: nothing wrong.
			from = "read from the file (no snapshot yet; one is written now)"
		case rebuilt:
			from = fmt.Sprintf("rebuilt from the file (the snapshot was not used: %v)", err)
		}
		if rebuilt {
			d.load.loaded.Store(0)
			ns, err = d.readIndex(ctx)
		}
		d.mu.Lock()
		defer d.mu.Unlock()
		d.load.from, d.load.took = from, time.Since(start)
		if err == nil && (replayed > 0 || rebuilt) {
			// Written after the load, while searches run: the next start
			// reads it.
			d.bg.Go(func() { _ = d.saveSnapshot(context.WithoutCancel(ctx)) })
		}
		if err != nil {
			d.load.err = fmt.Errorf("embedded store: loading the index: %w", err)
		} else {
			// What was written while the load read the file, in order:
			// a change the load also read is applied again, to the same
			// effect (every change says what a memory is now).
			for _, fn := range d.load.pending {
				fn(ns)
			}
			d.ns = ns
		}
		d.load.active, d.load.pending = false, nil
	}()
}

// Wait waits until the index is loaded, and returns why it failed to.
func (d *DB) Wait(ctx context.Context) error {
	select {
	case <-d.load.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.load.err
}

// LoadedFrom says, once the index is loaded, where it came from (its
// snapshot, or rebuilt from the file, and why) and how long that took.
func (d *DB) LoadedFrom() (string, time.Duration) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.load.from, d.load.took
}

// Loading implements memory.Loader.
func (d *DB) Loading() (memory.Progress, bool) {
	d.mu.RLock()
	active := d.load.active
	d.mu.RUnlock()
	return memory.Progress{Loaded: int(d.load.loaded.Load()), Total: int(d.load.total.Load())}, active
}

// ready reports why the index cannot be read now: it is loading, or its
// load failed. The caller holds d.mu.
func (d *DB) ready() error {
	switch {
	case d.load.active:
		return memory.Progress{Loaded: int(d.load.loaded.Load()), Total: int(d.load.total.Load())}.Err()
	case d.load.err != nil:
		return d.load.err
	}
	return nil
}

// change applies fn to the index, or, while it loads, keeps fn to apply
// once the load is done. The caller holds d.mu for writing, and calls it
// after the change is committed to the file.
func (d *DB) change(fn func(ns map[string]*index.Namespace)) {
	if d.load.active {
		d.load.pending = append(d.load.pending, fn)
		return
	}
	if d.load.err == nil {
		fn(d.ns)
	}
}

// storedDim returns the size of the stored vectors, 0 when none has one.
func (d *DB) storedDim(ctx context.Context) (int, error) {
	var n sql.NullInt64
	err := d.db.QueryRowContext(ctx, `SELECT length(vector) FROM memories WHERE vector IS NOT NULL LIMIT 1`).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return int(n.Int64) / 4, err
}

// readIndex reads every memory of the file into new indexes, one per
// namespace.
func (d *DB) readIndex(ctx context.Context) (map[string]*index.Namespace, error) {
	sizes := map[string]int{}
	counts, err := d.db.QueryContext(ctx, `SELECT namespace, COUNT(*) FROM memories GROUP BY namespace`)
	if err != nil {
		return nil, err
	}
	total := 0
	for counts.Next() {
		var ns string
		var n int
		if err := counts.Scan(&ns, &n); err != nil {
			counts.Close()
			return nil, err
		}
		sizes[ns] = n
		total += n
	}
	counts.Close()
	d.load.total.Store(int64(total))
	ns := map[string]*index.Namespace{}
	err = d.scanAll(ctx, func(b *loadBatch) {
		for i, m := range b.ms {
			ix := ns[m.Namespace]
			if ix == nil {
				ix = index.NewFor(sizes[m.Namespace], d.opts.index)
				ns[m.Namespace] = ix
			}
			ix.AddTerms(b.seqs[i], &b.ms[i], b.vecs[i], b.terms[i])
		}
		d.load.loaded.Add(int64(len(b.ms)))
	})
	return ns, err
}

// loadBatch is a run of stored memories, in order, with what indexing
// them needs: their terms and normalised vectors.
type loadBatch struct {
	ms    []memory.Memory
	seqs  []int64
	terms [][]string
	vecs  [][]float32
	ready chan struct{} // closed once terms and vecs are filled
}

// scanAll reads every memory in storage order and calls add with each
// batch, in order. Finding a memory's terms (stemming every word) is most
// of a load's work: it runs on every core while this goroutine reads rows
// and add indexes the batches already analysed.
func (d *DB) scanAll(ctx context.Context, add func(*loadBatch)) error {
	const size = 512
	work := make(chan *loadBatch, 4*runtime.GOMAXPROCS(0))
	var stems text.Stemmer // a load's vocabulary, stemmed once
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for b := range work {
				for i, m := range b.ms {
					b.terms[i], b.vecs[i] = stems.Terms(m.Text), index.Normalize(m.Vector)
				}
				close(b.ready)
			}
		})
	}
	// Batches go to add in the order they were read; a bounded queue of
	// them keeps the memory of the load in check.
	ordered := make(chan *loadBatch, 4*runtime.GOMAXPROCS(0))
	done := make(chan struct{})
	go func() {
		defer close(done)
		for b := range ordered {
			<-b.ready
			add(b)
		}
	}()
	newBatch := func() *loadBatch {
		return &loadBatch{ms: make([]memory.Memory, 0, size), seqs: make([]int64, 0, size), ready: make(chan struct{})}
	}
	send := func(b *loadBatch) {
		b.terms, b.vecs = make([][]string, len(b.ms)), make([][]float32, len(b.ms))
		ordered <- b
		work <- b
	}
	// Every batch sent is analysed and added before scanAll returns.
	defer func() {
		close(work)
		close(ordered)
		wg.Wait()
		<-done
	}()
	b := newBatch()
	var after int64
	for {
		// The chunk is read whole before it is analysed, so the
		// connection is free again while it is.
		chunk, seqs, err := d.readChunk(ctx, &after)
		if err != nil {
			return err
		}
		for i, m := range chunk {
			b.seqs = append(b.seqs, seqs[i])
			if b.ms = append(b.ms, m); len(b.ms) == size {
				send(b)
				b = newBatch()
			}
		}
		if len(chunk) < loadChunk {
			break
		}
		if d.opts.afterChunk != nil {
			d.opts.afterChunk()
		}
	}
	if len(b.ms) > 0 {
		send(b)
	}
	return nil
}

// readChunk reads the next loadChunk memories after seq *after, in seq
// order, and moves *after past them.
func (d *DB) readChunk(ctx context.Context, after *int64) ([]memory.Memory, []int64, error) {
	ms, seqs, err := d.withSeqs(ctx, `SELECT `+columns+`, vector, seq FROM memories WHERE seq > ? ORDER BY seq LIMIT ?`, *after, loadChunk)
	if len(seqs) > 0 {
		*after = seqs[len(seqs)-1]
	}
	return ms, seqs, err
}

// withSeqs runs a query of columns, the vector and the seq, and returns
// its memories and their seqs.
func (d *DB) withSeqs(ctx context.Context, query string, args ...any) ([]memory.Memory, []int64, error) {
	rows, err := d.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	var ms []memory.Memory
	var seqs []int64
	for rows.Next() {
		var seq int64
		m, err := scan(rows, true, &seq)
		if err != nil {
			return nil, nil, err
		}
		ms, seqs = append(ms, m), append(seqs, seq)
	}
	return ms, seqs, rows.Err()
}
