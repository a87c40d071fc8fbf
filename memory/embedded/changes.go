package embedded

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/vera-proxy/vera/memory"
)

// The change log that keys the index's snapshot to the file: each write
// to the memories adds the rows it touched, in its own transaction.

// allRows, logged as a changed seq, says that every row changed (the
// vectors were dropped): no snapshot from before can be brought up to
// date.
const allRows = 0

// logChanges logs seqs as changed in tx and returns the generation of the
// last; 0 when seqs is empty. One statement for all of them: gen is the
// rowid, so the last one written is the last insert's id.
func (d *DB) logChanges(ctx context.Context, tx *sql.Tx, seqs []int64) (int64, error) {
	if len(seqs) == 0 {
		return 0, nil
	}
	list, err := json.Marshal(seqs)
	if err != nil {
		return 0, err
	}
	res, err := tx.StmtContext(ctx, d.stmts.changes).ExecContext(ctx, string(list))
	if err != nil {
		return 0, fmt.Errorf("change log: %w", err)
	}
	gen, err := res.LastInsertId()
	if err != nil {
		return 0, fmt.Errorf("change log: %w", err)
	}
	return gen, nil
}

// readMeta reads the store's id (made on its first open) and the
// generation of its last change.
func (d *DB) readMeta(ctx context.Context) error {
	id := make([]byte, 8)
	if _, err := rand.Read(id); err != nil {
		return err
	}
	if _, err := d.db.ExecContext(ctx, `INSERT INTO meta (key, value) VALUES ('store_id', ?) ON CONFLICT(key) DO NOTHING`, hex.EncodeToString(id)); err != nil {
		return err
	}
	if err := d.db.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = 'store_id'`).Scan(&d.id); err != nil {
		return err
	}
	if len(d.id) != 16 {
		return fmt.Errorf("store id %q", d.id)
	}
	var gen sql.NullInt64
	if err := d.db.QueryRowContext(ctx, `SELECT max(gen) FROM changes`).Scan(&gen); err != nil {
		return err
	}
	// The log may be pruned whole (by the last snapshot).
	pruned, err := d.metaInt(ctx, "changes_pruned_through")
	if err != nil {
		return err
	}
	d.gen = max(gen.Int64, pruned)
	return nil
}

// metaInt reads an integer of the meta table; 0 when it has none.
func (d *DB) metaInt(ctx context.Context, key string) (int64, error) {
	var v string
	err := d.db.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = ?`, key).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s is %q, not a number", key, v)
	}
	return n, nil
}

// snapshotPath is the snapshot's file, beside the store's.
func (d *DB) snapshotPath() string {
	return filepath.Join(filepath.Dir(d.path), SnapshotName)
}

// fromSnapshot reads the snapshot and brings it up to date with the rows
// changed since it was written. An error means the index must be rebuilt
// from the file.
func (d *DB) fromSnapshot(ctx context.Context) (map[string]*index, int, error) {
	if !snapshots() {
		return nil, 0, errors.New("snapshots are not read on this machine")
	}
	ns, gen, err := readSnapshot(d.snapshotPath(), d.id)
	if err != nil {
		return nil, 0, err
	}
	pruned, err := d.metaInt(ctx, "changes_pruned_through")
	if err != nil {
		return nil, 0, err
	}
	d.mu.RLock()
	now := d.gen
	d.mu.RUnlock()
	if gen < pruned || gen > now {
		return nil, 0, fmt.Errorf("snapshot of generation %d; the change log holds %d to %d", gen, pruned, now)
	}
	d.mu.Lock()
	d.snapGen = gen
	d.mu.Unlock()
	// The rows changed since: dropped from the snapshot, then read again
	// as the file has them now.
	var changed []int64
	rows, err := d.db.QueryContext(ctx, `SELECT DISTINCT seq FROM changes WHERE gen > ? ORDER BY seq`, gen)
	if err != nil {
		return nil, 0, err
	}
	for rows.Next() {
		var seq int64
		if err := rows.Scan(&seq); err != nil {
			rows.Close()
			return nil, 0, err
		}
		changed = append(changed, seq)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, 0, err
	}
	if len(changed) > 0 && changed[0] == allRows {
		return nil, 0, errors.New("every row changed since the snapshot")
	}
	replayed := len(changed)
	for _, seq := range changed {
		for _, ix := range ns {
			ix.remove(seq)
		}
	}
	for len(changed) > 0 {
		batch := changed[:min(len(changed), 500)]
		changed = changed[len(batch):]
		ms, seqs, err := d.rowsBySeq(ctx, batch)
		if err != nil {
			return nil, 0, err
		}
		for i := range ms {
			ix := ns[ms[i].Namespace]
			if ix == nil {
				ix = newIndex()
				ns[ms[i].Namespace] = ix
			}
			ix.add(seqs[i], &ms[i], normalize(ms[i].Vector))
		}
	}
	live := 0
	for _, ix := range ns {
		live += ix.live
	}
	d.load.loaded.Store(int64(live))
	d.load.total.Store(int64(live))
	return ns, replayed, nil
}

// rowsBySeq reads rows seqs, with their vectors, and their seqs.
func (d *DB) rowsBySeq(ctx context.Context, seqs []int64) ([]memory.Memory, []int64, error) {
	args := make([]any, len(seqs))
	for i, s := range seqs {
		args[i] = s
	}
	return d.withSeqs(ctx, `SELECT `+columns+`, vector, seq FROM memories WHERE seq IN (?`+strings.Repeat(", ?", len(seqs)-1)+`) ORDER BY seq`, args...)
}

// saveSnapshot writes the index's snapshot when the index changed since
// the last one, then prunes the change log up to it.
func (d *DB) saveSnapshot(ctx context.Context) error {
	if !snapshots() {
		return nil
	}
	d.snapMu.Lock()
	defer d.snapMu.Unlock()
	// Every change the snapshot holds is on disk first (a settle's
	// transaction is not synced by itself), and none comes meanwhile: a
	// snapshot ahead of its file, after a power cut, would be trusted once
	// the file's generations had caught up with other changes.
	d.wmu.Lock()
	if err := d.syncQueue(ctx); err != nil {
		d.wmu.Unlock()
		return fmt.Errorf("embedded store: before the index's snapshot: %w", err)
	}
	d.mu.RLock()
	if d.load.active || d.load.err != nil || d.gen == d.snapGen && fileExists(d.snapshotPath()) {
		d.mu.RUnlock()
		d.wmu.Unlock()
		return nil
	}
	gen := d.gen
	err := writeSnapshot(d.snapshotPath(), d.id, gen, d.ns)
	d.mu.RUnlock()
	d.wmu.Unlock()
	if err != nil {
		os.Remove(d.snapshotPath()) // a half-written one is never read, but takes room
		return fmt.Errorf("embedded store: writing the index's snapshot: %w", err)
	}
	d.mu.Lock()
	d.snapGen = gen
	d.mu.Unlock()
	d.wmu.Lock()
	defer d.wmu.Unlock()
	err = d.tx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM changes WHERE gen <= ?`, gen); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO meta (key, value) VALUES ('changes_pruned_through', ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value`, strconv.FormatInt(gen, 10))
		return err
	})
	if err != nil {
		return fmt.Errorf("embedded store: pruning the change log: %w", err)
	}
	return nil
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
