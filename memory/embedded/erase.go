package embedded

import (
	"context"
	"errors"
	"fmt"
	"os"
)

// Erasure: once Delete returns, no byte of a deleted memory's text is in
// any file of the data directory, also after a kill -9 right after it.
//   - SQLite runs with secure_delete on: a page a deletion frees or
//     shrinks is written with zeros where the row was.
//   - The older copies of those pages stay in the write-ahead log until it
//     is checkpointed; a checkpoint in TRUNCATE mode, checked to have
//     completed, copies the zeroed pages home and empties the log. Open
//     does the same, for a run killed before it could.
//   - The queue's journal holds every turn of its round: the round ends
//     (its records move into the table, synced) and the file is zeroed.
//   - The index snapshot names the deleted rows' words: the index drops
//     them (and the rows' slots), and the snapshot file is removed, then
//     written again from the scrubbed index in the background.

// erase leaves nothing of deleted rows in the files; the caller holds no
// lock.
func (d *DB) erase(ctx context.Context) error {
	d.wmu.Lock()
	err := d.clearJournal(ctx)
	d.wmu.Unlock()
	if err != nil {
		return err
	}
	if err := d.checkpoint(ctx); err != nil {
		return err
	}
	d.snapMu.Lock()
	err = os.Remove(d.snapshotPath())
	d.snapMu.Unlock()
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing the index snapshot: %w", err)
	}
	d.bg.Go(func() { _ = d.saveSnapshot(context.WithoutCancel(ctx)) })
	return nil
}

// clearJournal ends the journal's round (its records into the table, at
// FULL) and zeroes what the old round wrote, past the records written
// since the round began (new turns); the caller holds wmu.
func (d *DB) clearJournal(ctx context.Context) error {
	if err := d.newRound(ctx); err != nil {
		return fmt.Errorf("the queue's journal: %w", err)
	}
	return d.j.Scrub()
}

// checkpoint copies the write-ahead log into the database and empties it,
// and reports an error unless it did.
func (d *DB) checkpoint(ctx context.Context) error {
	var busy, frames, done int
	for range 50 {
		if err := d.db.QueryRowContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`).Scan(&busy, &frames, &done); err != nil {
			return fmt.Errorf("checkpointing the write-ahead log: %w", err)
		}
		if busy == 0 {
			return nil
		}
	}
	return fmt.Errorf("checkpointing the write-ahead log: still busy (%d of %d frames)", done, frames)
}
