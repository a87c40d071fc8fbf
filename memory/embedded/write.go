package embedded

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/vera-proxy/vera/memory"
	"github.com/vera-proxy/vera/memory/embedded/index"
)

// Writing: each write commits to the file, then changes the index the
// same way (or, while it loads, leaves the change to apply after it).

// Upsert writes memories in one transaction, replacing any with the same
// id, and returns once the transaction is on disk.
func (d *DB) Upsert(ctx context.Context, ms ...memory.Memory) error {
	if len(ms) == 0 {
		return nil
	}
	return d.upsert(ctx, ms, nil, d.tx)
}

// Settle stores memories the writer took from the durable queue, and
// takes done off the queue, in one transaction that is not waited onto
// the disk (memory.Settler): the queue (its journal, or its table) keeps
// the turns until a later synced commit (any edit's, a new round of the
// journal's) carries this one to the disk, and if power fails first they
// are stored again from the queue. A chat's commit then never waits
// behind the fsyncs of the turn before.
func (d *DB) Settle(ctx context.Context, ms []memory.Memory, done []string) error {
	if len(ms) == 0 && len(done) == 0 {
		return nil
	}
	return d.upsert(ctx, ms, done, d.relaxedTx)
}

// upsert is Upsert, taking done off the queue in the same transaction,
// which runs in tx.
func (d *DB) upsert(ctx context.Context, ms []memory.Memory, done []string, tx func(context.Context, func(*sql.Tx) error) error) error {
	for i := range ms {
		if err := ms[i].Validate(); err != nil {
			return err
		}
		ms[i].Time = ms[i].Time.UTC()
	}
	d.wmu.Lock()
	defer d.wmu.Unlock()
	dim, err := d.vectorsDim(ms)
	if err != nil {
		return err
	}
	seqs, gen, err := d.writeRows(ctx, ms, done, tx)
	if err != nil {
		return fmt.Errorf("upsert: %w", err)
	}
	ms = slices.Clone(ms) // kept past the call while the index loads
	d.cache.drop(seqs)
	d.mu.Lock()
	d.dim, d.gen = dim, max(d.gen, gen)
	d.change(func(nsm map[string]*index.Namespace) {
		for i := range ms {
			// An id may move between namespaces.
			for _, ix := range nsm {
				ix.Remove(seqs[i])
			}
			d.indexIn(nsm, ms[i].Namespace).Add(seqs[i], &ms[i], index.Normalize(ms[i].Vector))
		}
	})
	d.mu.Unlock()
	d.maybeSnapshot()
	return nil
}

// vectorsDim returns the size of the store's vectors once ms are written:
// theirs when it has none yet. A vector of another size is refused.
func (d *DB) vectorsDim(ms []memory.Memory) (int, error) {
	dim := d.dim
	for _, m := range ms {
		if len(m.Vector) == 0 {
			continue
		}
		if dim == 0 {
			dim = len(m.Vector)
		}
		if len(m.Vector) != dim {
			return 0, fmt.Errorf("memory %s: vector has %d dimensions, the store holds %d (changed embedding model? see ResetVectors)", m.ID, len(m.Vector), dim)
		}
	}
	return dim, nil
}

// writeRows writes ms and takes done off the queue, in one transaction
// that runs in tx, and returns the rows' seqs and the generation of the
// change.
func (d *DB) writeRows(ctx context.Context, ms []memory.Memory, done []string, tx func(context.Context, func(*sql.Tx) error) error) ([]int64, int64, error) {
	seqs := make([]int64, len(ms))
	var gen int64
	err := d.queueTx(ctx, tx, done, func(tx *sql.Tx) error {
		for _, id := range done {
			if _, err := tx.StmtContext(ctx, d.stmts.dequeue).ExecContext(ctx, id); err != nil {
				return err
			}
		}
		if len(ms) == 0 {
			return nil
		}
		st := tx.StmtContext(ctx, d.stmts.upsert)
		for i, m := range ms {
			var meta any
			if len(m.Metadata) > 0 {
				b, err := json.Marshal(m.Metadata)
				if err != nil {
					return fmt.Errorf("memory %s: metadata: %w", m.ID, err)
				}
				meta = string(b)
			}
			var vec any
			if len(m.Vector) > 0 {
				vec = encodeVector(m.Vector)
			}
			// An upsert keeps the row's seq: the index knows the memory
			// by it.
			if err := st.QueryRowContext(ctx, m.ID, m.Namespace, string(m.Type), m.Text, m.Time.UnixNano(), m.Model, meta, m.Tokens, vec).Scan(&seqs[i]); err != nil {
				return fmt.Errorf("memory %s: %w", m.ID, err)
			}
		}
		var err error
		gen, err = d.logChanges(ctx, tx, seqs)
		return err
	})
	return seqs, gen, err
}

// SetVectors sets vectors of memories whose text is unchanged.
func (d *DB) SetVectors(ctx context.Context, ms ...memory.Memory) error {
	d.wmu.Lock()
	defer d.wmu.Unlock()
	dim := d.dim
	for _, m := range ms {
		if dim == 0 {
			dim = len(m.Vector)
		}
		if len(m.Vector) != dim {
			return fmt.Errorf("memory %s: vector has %d dimensions, the store holds %d", m.ID, len(m.Vector), dim)
		}
	}
	type vecSet struct {
		seq int64
		vec []float32
	}
	var set []vecSet
	var seqs []int64
	var gen int64
	err := d.tx(ctx, func(tx *sql.Tx) error {
		set = set[:0]
		for _, m := range ms {
			seq, ok, err := seqOf(tx.QueryRowContext(ctx, `UPDATE memories SET vector = ? WHERE id = ? AND text = ? RETURNING seq`, encodeVector(m.Vector), m.ID, m.Text))
			if err != nil {
				return fmt.Errorf("memory %s: %w", m.ID, err)
			}
			if ok {
				set = append(set, vecSet{seq, index.Normalize(m.Vector)})
			}
		}
		seqs = make([]int64, len(set))
		for i, v := range set {
			seqs[i] = v.seq
		}
		var err error
		gen, err = d.logChanges(ctx, tx, seqs)
		return err
	})
	if err != nil {
		return fmt.Errorf("set vectors: %w", err)
	}
	d.cache.drop(seqs)
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(set) > 0 {
		d.dim, d.gen = dim, max(d.gen, gen)
	}
	d.change(func(nsm map[string]*index.Namespace) {
		for _, v := range set {
			for _, ix := range nsm {
				ix.SetVector(v.seq, v.vec)
			}
		}
	})
	return nil
}

// seqOf reads the seq a write of one row returned; ok is false when it
// touched none.
func seqOf(row *sql.Row) (seq int64, ok bool, err error) {
	err = row.Scan(&seq)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	return seq, err == nil, err
}

// Delete removes memories by id.
func (d *DB) Delete(ctx context.Context, ids ...string) error {
	if len(ids) == 0 {
		return nil
	}
	d.wmu.Lock()
	var seqs []int64
	var gen int64
	err := d.tx(ctx, func(tx *sql.Tx) error {
		seqs = seqs[:0]
		for _, id := range ids {
			seq, ok, err := seqOf(tx.QueryRowContext(ctx, `DELETE FROM memories WHERE id = ? RETURNING seq`, id))
			if err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `DELETE FROM usage WHERE id = ?`, id); err != nil {
				return err
			}
			if ok {
				seqs = append(seqs, seq)
			}
		}
		var err error
		gen, err = d.logChanges(ctx, tx, seqs)
		return err
	})
	if err != nil {
		d.wmu.Unlock()
		return fmt.Errorf("delete: %w", err)
	}
	d.cache.drop(seqs)
	d.mu.Lock()
	d.gen = max(d.gen, gen)
	d.change(func(nsm map[string]*index.Namespace) {
		touched := map[*index.Namespace]bool{}
		for _, seq := range seqs {
			for _, ix := range nsm {
				if ix.Remove(seq) {
					touched[ix] = true
				}
			}
		}
		for ix := range touched {
			ix.Scrub()
		}
	})
	d.mu.Unlock()
	d.wmu.Unlock()
	if len(seqs) == 0 {
		return nil
	}
	// Erased, not only deleted (erase.go).
	if err := d.erase(ctx); err != nil {
		return fmt.Errorf("delete: erasing: %w", err)
	}
	return nil
}

// VectorSpace records which embedding model made the stored vectors. When
// the model or its dimension changed, the old vectors are dropped (they
// cannot be compared with new ones) and reset is true: the memories stay,
// searchable lexically, and are embedded again by the backfill.
func (d *DB) VectorSpace(ctx context.Context, model string, dim int) (reset bool, err error) {
	want := fmt.Sprintf("%s/%d", model, dim)
	d.wmu.Lock()
	defer d.wmu.Unlock()
	var have string
	err = d.db.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = 'vector_space'`).Scan(&have)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return false, fmt.Errorf("vector space: %w", err)
	}
	if have == want {
		return false, nil
	}
	reset = d.dim != 0 && (have != "" || d.dim != dim)
	var gen int64
	err = d.tx(ctx, func(tx *sql.Tx) error {
		if reset {
			if _, err := tx.ExecContext(ctx, `UPDATE memories SET vector = NULL WHERE vector IS NOT NULL`); err != nil {
				return err
			}
			// Every row changed: a snapshot from before cannot be
			// brought up to date.
			if gen, err = d.logChanges(ctx, tx, []int64{allRows}); err != nil {
				return err
			}
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO meta (key, value) VALUES ('vector_space', ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value`, want)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("vector space: %w", err)
	}
	if reset {
		d.cache.drop(nil)
		d.mu.Lock()
		d.dim, d.gen = 0, gen
		d.change(func(nsm map[string]*index.Namespace) {
			for _, ix := range nsm {
				ix.DropVectors()
			}
		})
		d.mu.Unlock()
	}
	return reset, nil
}
