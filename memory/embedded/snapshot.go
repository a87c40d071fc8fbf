package embedded

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/vera-proxy/vera/memory"
	"github.com/vera-proxy/vera/memory/embedded/index"
)

// The snapshot: the in-memory index written to a file beside the store
// (SnapshotName), so that a start reads it back instead of analysing
// every text again (its encoding is the index's: index.WriteSnapshot). It
// is keyed to the store's change log: every write to the memories also
// writes the rows it touched to the changes table, in the same
// transaction, under an increasing generation (changes.go). A snapshot
// holds the index as of one generation; at start, the rows changed since
// are read again from the file. A snapshot that does not match (another
// store, a log pruned past it, another format or machine) or that is
// torn (its length or a checksum wrong) is never trusted: the index is
// rebuilt from the file.

// SnapshotName is the snapshot's file in the data directory.
const SnapshotName = "vera.index"

// writeSnapshot writes the index as of generation gen to path,
// atomically: a temporary file, synced, renamed over the old one. The
// caller holds d.mu for reading.
func writeSnapshot(path, id string, gen int64, ns map[string]*index.Namespace) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	defer f.Close()
	if err := index.WriteSnapshot(f, id, gen, ns); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	if dir, err := os.Open(filepath.Dir(path)); err == nil {
		_ = dir.Sync()
		dir.Close()
	}
	return nil
}

// readSnapshot reads the snapshot at path, made for store id, if it is
// whole, with the indexes tuned by o.
func readSnapshot(path, id string, o index.Options) (map[string]*index.Namespace, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, 0, err
	}
	return index.ReadSnapshot(f, st.Size(), id, o)
}

// snapshotPath is the snapshot's file, beside the store's.
func (d *DB) snapshotPath() string {
	return filepath.Join(filepath.Dir(d.path), SnapshotName)
}

// fromSnapshot reads the snapshot and brings it up to date with the rows
// changed since it was written; it returns the indexes and how many rows
// it read again. An error means the index must be rebuilt from the file.
func (d *DB) fromSnapshot(ctx context.Context) (map[string]*index.Namespace, int, error) {
	if !index.Snapshots() {
		return nil, 0, errors.New("snapshots are not read on this machine")
	}
	ns, gen, err := readSnapshot(d.snapshotPath(), d.id, d.opts.index)
	if err != nil {
		return nil, 0, err
	}
	changed, err := d.changedSince(ctx, gen)
	if err != nil {
		return nil, 0, err
	}
	if err := d.readAgain(ctx, ns, changed); err != nil {
		return nil, 0, err
	}
	live := 0
	for _, ix := range ns {
		live += ix.Live()
	}
	d.load.loaded.Store(int64(live))
	d.load.total.Store(int64(live))
	return ns, len(changed), nil
}

// changedSince returns the rows changed since generation gen, a
// snapshot's, which it takes as the snapshot on disk; an error when the
// change log cannot bring the snapshot up to date.
func (d *DB) changedSince(ctx context.Context, gen int64) ([]int64, error) {
	pruned, err := d.metaInt(ctx, "changes_pruned_through")
	if err != nil {
		return nil, err
	}
	d.mu.RLock()
	now := d.gen
	d.mu.RUnlock()
	if gen < pruned || gen > now {
		return nil, fmt.Errorf("snapshot of generation %d; the change log holds %d to %d", gen, pruned, now)
	}
	d.mu.Lock()
	d.snapGen = gen
	d.mu.Unlock()
	var changed []int64
	rows, err := d.db.QueryContext(ctx, `SELECT DISTINCT seq FROM changes WHERE gen > ? ORDER BY seq`, gen)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var seq int64
		if err := rows.Scan(&seq); err != nil {
			rows.Close()
			return nil, err
		}
		changed = append(changed, seq)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(changed) > 0 && changed[0] == allRows {
		return nil, errors.New("every row changed since the snapshot")
	}
	return changed, nil
}

// readAgain drops the rows changed from ns, then reads them again as the
// file has them now.
func (d *DB) readAgain(ctx context.Context, ns map[string]*index.Namespace, changed []int64) error {
	for _, seq := range changed {
		for _, ix := range ns {
			ix.Remove(seq)
		}
	}
	for len(changed) > 0 {
		batch := changed[:min(len(changed), 500)]
		changed = changed[len(batch):]
		ms, seqs, err := d.rowsBySeq(ctx, batch)
		if err != nil {
			return err
		}
		for i := range ms {
			d.indexIn(ns, ms[i].Namespace).Add(seqs[i], &ms[i], index.Normalize(ms[i].Vector))
		}
	}
	return nil
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
	if !index.Snapshots() {
		return nil
	}
	d.snapMu.Lock()
	defer d.snapMu.Unlock()
	gen, wrote, err := d.writeSnapshotNow(ctx)
	if err != nil || !wrote {
		return err
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

// writeSnapshotNow writes the snapshot of the index as it is, unless it
// is loading, or the one on disk holds it already; it returns the
// snapshot's generation, and whether it wrote one. Every change the
// snapshot holds is on disk first (a settle's transaction is not synced by
// itself), and none comes meanwhile: a snapshot ahead of its file, after a
// power cut, would be trusted once the file's generations had caught up
// with other changes.
func (d *DB) writeSnapshotNow(ctx context.Context) (int64, bool, error) {
	d.wmu.Lock()
	defer d.wmu.Unlock()
	if err := d.syncQueue(ctx); err != nil {
		return 0, false, fmt.Errorf("embedded store: before the index's snapshot: %w", err)
	}
	d.mu.RLock()
	defer d.mu.RUnlock()
	if d.load.active || d.load.err != nil || d.gen == d.snapGen && fileExists(d.snapshotPath()) {
		return 0, false, nil
	}
	if err := writeSnapshot(d.snapshotPath(), d.id, d.gen, d.ns); err != nil {
		os.Remove(d.snapshotPath()) // a half-written one is never read, but takes room
		return 0, false, fmt.Errorf("embedded store: writing the index's snapshot: %w", err)
	}
	return d.gen, true, nil
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
