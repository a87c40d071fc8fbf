package embedded

import (
	"context"
	"fmt"
	"runtime"
	"sync"

	"github.com/vera-proxy/vera/memory"
)

// Loading: every memory of the file, read in batches and analysed on every
// core, into the in-memory indexes search runs on.

// load rebuilds the in-memory index from the file.
func (d *DB) load(ctx context.Context) error {
	sizes := map[string]int{}
	counts, err := d.db.QueryContext(ctx, `SELECT namespace, COUNT(*) FROM memories GROUP BY namespace`)
	if err != nil {
		return fmt.Errorf("embedded store: loading: %w", err)
	}
	for counts.Next() {
		var ns string
		var n int
		if err := counts.Scan(&ns, &n); err != nil {
			counts.Close()
			return fmt.Errorf("embedded store: loading: %w", err)
		}
		sizes[ns] = n
	}
	counts.Close()
	ns := map[string]*index{}
	dim := 0
	err = d.scanAll(ctx, func(b *loadBatch) {
		for i, m := range b.ms {
			if len(m.Vector) > 0 && dim == 0 {
				dim = len(m.Vector)
			}
			ix := ns[m.Namespace]
			if ix == nil {
				ix = newIndexFor(sizes[m.Namespace])
				ns[m.Namespace] = ix
			}
			ix.addTerms(m, b.vecs[i], b.terms[i])
		}
	})
	if err != nil {
		return fmt.Errorf("embedded store: loading: %w", err)
	}
	d.mu.Lock()
	d.ns, d.dim = ns, dim
	d.mu.Unlock()
	return nil
}

// loadBatch is a run of stored memories, in order, with what indexing
// them needs: their terms and normalised vectors.
type loadBatch struct {
	ms    []memory.Memory
	terms [][]string
	vecs  [][]float32
	ready chan struct{} // closed once terms and vecs are filled
}

// scanAll reads every memory in storage order and calls add with each
// batch, in order. Finding a memory's terms (stemming every word) is most
// of a load's work: it runs on every core while this goroutine reads rows
// and add indexes the batches already analysed.
func (d *DB) scanAll(ctx context.Context, add func(*loadBatch)) error {
	rows, err := d.db.QueryContext(ctx, `SELECT `+columns+`, vector FROM memories ORDER BY seq`)
	if err != nil {
		return err
	}
	defer rows.Close()
	const size = 512
	work := make(chan *loadBatch, 4*runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for b := range work {
				for i, m := range b.ms {
					b.terms[i], b.vecs[i] = memory.Terms(m.Text), normalize(m.Vector)
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
		return &loadBatch{ms: make([]memory.Memory, 0, size), ready: make(chan struct{})}
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
	for rows.Next() {
		m, err := scan(rows, true)
		if err != nil {
			return err
		}
		if b.ms = append(b.ms, m); len(b.ms) == size {
			send(b)
			b = newBatch()
		}
	}
	if len(b.ms) > 0 {
		send(b)
	}
	return rows.Err()
}
