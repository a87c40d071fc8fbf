package embedded

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	"github.com/vera-proxy/vera/memory/embedded/journal"
)

// The queue's journal and its table. Enqueue appends the turns to the
// journal (package journal) and syncs it; Pending reads them where they
// are; they move into the queue table (but those the same transaction
// takes off the queue: a settle's) before anything changes the queue, in
// a transaction that also records the last journal record the table
// holds (meta 'queue_journal'). At start, the records after that mark go
// into the table. Each round of the journal's file has an epoch, which the
// table's file keeps (meta 'queue_journal_epoch'), written in the synced
// transaction that begins the round.

const (
	// journalMark is the meta key of the last record the table holds,
	// journalEpoch that of the round's epoch.
	journalMark  = "queue_journal"
	journalEpoch = "queue_journal_epoch"
)

// openJournal opens the queue's journal in dir, and replays it.
func (d *DB) openJournal(ctx context.Context, dir string) error {
	j, b, err := journal.Open(dir)
	if err != nil {
		return err
	}
	d.j = j
	if err := d.replayJournal(ctx, b); err != nil {
		j.Close()
		return err
	}
	return nil
}

// drain puts the journal's pending records into the queue table within
// tx (record), but those of the ids done (the same transaction takes them
// off the queue), and returns them, for Moved; the caller holds wmu.
func (d *DB) drain(ctx context.Context, tx *sql.Tx, done []string) ([]journal.Record, error) {
	p := d.j.Take()
	return p, d.record(ctx, tx, p, d.j.Applied(), done)
}

// record inserts p but the ids done into the queue table within tx and
// moves the mark past them all (from applied), always writing the mark:
// a transaction that writes nothing is not synced, nor would it carry the
// relaxed ones before it to the disk.
func (d *DB) record(ctx context.Context, tx *sql.Tx, p []journal.Record, applied uint64, done []string) error {
	keep := p
	if len(done) > 0 {
		keep = slices.DeleteFunc(slices.Clone(p), func(r journal.Record) bool { return slices.Contains(done, r.ID) })
	}
	if err := d.insert(ctx, tx, keep); err != nil {
		return err
	}
	if len(p) > 0 {
		applied = p[len(p)-1].Seq
	}
	_, err := tx.StmtContext(ctx, d.stmts.mark).ExecContext(ctx, journalMark, strconv.FormatUint(applied, 10))
	return err
}

// queueTx runs fn in a transaction (tx or relaxedTx) that first drains the
// journal into the table, but the ids done, which fn takes off the queue;
// the caller holds wmu.
func (d *DB) queueTx(ctx context.Context, txf func(context.Context, func(*sql.Tx) error) error, done []string, fn func(*sql.Tx) error) error {
	var took []journal.Record
	err := txf(ctx, func(tx *sql.Tx) error {
		var err error
		if took, err = d.drain(ctx, tx, done); err != nil {
			return err
		}
		if fn != nil {
			return fn(tx)
		}
		return nil
	})
	d.j.Moved(took, err == nil)
	return err
}

// syncQueue drains the journal in a transaction at FULL, which carries
// every transaction before it to the disk (a settle's, at NORMAL, too);
// the caller holds wmu.
func (d *DB) syncQueue(ctx context.Context) error {
	return d.queueTx(ctx, d.tx, nil, nil)
}

// insert puts rs into the queue table within tx.
func (d *DB) insert(ctx context.Context, tx *sql.Tx, rs []journal.Record) error {
	st := tx.StmtContext(ctx, d.stmts.enqueue)
	for _, r := range rs {
		if _, err := st.ExecContext(ctx, r.ID, r.At, string(r.Body)); err != nil {
			return err
		}
	}
	return nil
}

// newRound begins a round of the journal: in one transaction at FULL, it
// drains it (the table then holds every record of the file, on disk) and
// writes the new epoch, which the records from the file's start on are
// written with (journal.NewRound). The caller holds wmu, so no other drain
// is under way.
func (d *DB) newRound(ctx context.Context) error {
	return d.j.NewRound(func(p []journal.Record, applied uint64, epoch int64) error {
		return d.tx(ctx, func(tx *sql.Tx) error {
			if err := d.record(ctx, tx, p, applied, nil); err != nil {
				return err
			}
			_, err := tx.StmtContext(ctx, d.stmts.mark).ExecContext(ctx, journalEpoch, strconv.FormatInt(epoch, 10))
			return err
		})
	})
}

// replayJournal puts the records of the journal's file b after the
// table's mark into the table, and begins a new round; at start, before
// anything reads the queue.
func (d *DB) replayJournal(ctx context.Context, b []byte) error {
	m, err := d.metaInt(ctx, journalMark)
	if err != nil {
		return err
	}
	epoch, err := d.metaInt(ctx, journalEpoch)
	if err != nil {
		return err
	}
	mark := uint64(m)
	var recs []journal.Record
	if epoch != 0 {
		recs = journal.Parse(b, epoch)
	}
	for i := range recs {
		if recs[i].Seq > mark {
			recs[i].ID = queuedID(recs[i], epoch)
		}
	}
	d.j.Replay(recs, mark)
	d.wmu.Lock()
	defer d.wmu.Unlock()
	// At FULL: the table's state read here may be in the page cache only
	// (the last run was killed), and the journal is about to be written
	// over.
	return d.newRound(ctx)
}

// queuedID is the id of the memory r queues. Only the id is read: an
// entry of a newer vera goes into the table as it is, where Pending
// reports it.
func queuedID(r journal.Record, epoch int64) string {
	var e struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(r.Body, &e); err != nil || e.ID == "" {
		return fmt.Sprintf("journal-%d-%d", epoch, r.Seq)
	}
	return e.ID
}

// closeJournal moves the journal's records into the table, synced, and
// clears the file (a clean stop leaves nothing to replay, and no text of
// a turn forgotten since); the caller holds wmu.
func (d *DB) closeJournal(ctx context.Context) error {
	if err := d.syncQueue(ctx); err != nil {
		return err
	}
	return d.j.Clear()
}
