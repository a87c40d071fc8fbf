package embedded

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
)

// The queue's journal. Enqueue is on the answer's path (the end of an
// answer waits for it), and a SQLite commit at synchronous FULL costs two
// to three times what its disk sync does. So Enqueue appends the turns to
// a file of its own, JournalName, written in place over a file of fixed
// size, and syncs it: one write and one fdatasync. Pending reads them
// where they are; they move into the queue table (but those the same
// transaction takes off the queue: a settle's) before anything changes
// the queue, in a transaction that also records the last journal record
// the table holds
// (meta 'queue_journal'). At start, the records after that mark go into
// the table. The file is written from its start again only once a synced
// transaction holds every record in it, so a record is in the journal,
// or in the table on disk, or both.
//
// Each round of the file (from its start to where it is written over
// again) has an epoch, a random number the table's file keeps (meta
// 'queue_journal_epoch'), written in the synced transaction that begins
// the round; a record's checksum is seeded with it. A journal beside
// another file than its own (a vera.db restored from a backup, or removed
// to start over) or left from an older round is read as empty, so it
// never brings back a turn that file no longer queues.
//
// A record is its payload's length (4 bytes), a CRC-32C of the epoch and
// what follows (4), its sequence number (8), the time it was queued (8,
// nanoseconds), then the payload: the queue row's body. Records follow
// each other with sequence numbers one apart; a reader stops at the first
// one that is torn, zero (the file's unused end), of another epoch or out
// of sequence.

// JournalName is the queue journal's file in the data directory.
const JournalName = "vera.queue"

const (
	// journalSize is the journal's file: about two thousand turns of
	// 2 KB between two syncs of the queue table.
	journalSize   = 4 << 20
	journalHeader = 24
	// journalMark is the meta key of the last record the table holds,
	// journalEpoch that of the round's epoch.
	journalMark  = "queue_journal"
	journalEpoch = "queue_journal_epoch"
)

// journaled is one record: a queued memory on its way to the table.
type journaled struct {
	seq  uint64
	at   int64 // when it was queued: the row's seq (its place in the queue)
	id   string
	body []byte
}

// journal is the open file and what it holds that the table does not.
type journal struct {
	f *os.File

	mu      sync.Mutex
	epoch   int64       // this round's, seeding every record's checksum
	off     int64       // where the next record goes
	dirty   int64       // the file is zero from here on
	next    uint64      // the next record's sequence number
	applied uint64      // the last record the table holds (in a transaction that may not be synced yet)
	pending []journaled // synced to the journal, not yet in the table, in order
	moving  []journaled // taken from pending, in a transaction not yet over
	buf     []byte
}

// openJournal opens (creating it at its full size) the journal in dir and
// returns it with what it holds, to read (parseJournal) once its epoch is
// known.
func openJournal(dir string) (*journal, []byte, error) {
	path := filepath.Join(dir, JournalName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, nil, err
	}
	b, err := io.ReadAll(f)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if len(b) < journalSize {
		// Written out (not a hole, not fallocated) and synced once, so
		// that a record's fdatasync never has the file's size or its
		// extents to write too.
		if _, err := f.WriteAt(make([]byte, journalSize-len(b)), int64(len(b))); err != nil {
			f.Close()
			return nil, nil, err
		}
		if err := f.Sync(); err != nil {
			f.Close()
			return nil, nil, err
		}
		if err := syncDir(dir); err != nil {
			f.Close()
			return nil, nil, err
		}
	}
	dirty := int64(len(b))
	for dirty > 0 && b[dirty-1] == 0 {
		dirty--
	}
	return &journal{f: f, dirty: dirty}, b, nil
}

// parseJournal reads the run of records of epoch at the start of b.
func parseJournal(b []byte, epoch int64) []journaled {
	var out []journaled
	for off := 0; len(b)-off >= journalHeader; {
		h := b[off : off+journalHeader]
		n := int(binary.LittleEndian.Uint32(h))
		if n == 0 || n > len(b)-off-journalHeader {
			break
		}
		rec := b[off+8 : off+journalHeader+n]
		if checksum(epoch, rec) != binary.LittleEndian.Uint32(h[4:]) {
			break
		}
		seq := binary.LittleEndian.Uint64(h[8:])
		if len(out) > 0 && seq != out[len(out)-1].seq+1 {
			break
		}
		body := bytes.Clone(b[off+journalHeader : off+journalHeader+n])
		out = append(out, journaled{seq: seq, at: int64(binary.LittleEndian.Uint64(h[16:])), body: body})
		off += journalHeader + n
	}
	return out
}

// checksum is a record's: of its epoch, then of rec.
func checksum(epoch int64, rec []byte) uint32 {
	var e [8]byte
	binary.LittleEndian.PutUint64(e[:], uint64(epoch))
	return crc32.Update(crc32.Checksum(e[:], castagnoli), castagnoli, rec)
}

// appendRecord adds a record of epoch to buf.
func appendRecord(buf []byte, epoch int64, r journaled) []byte {
	start := len(buf)
	buf = binary.LittleEndian.AppendUint32(buf, uint32(len(r.body)))
	buf = binary.LittleEndian.AppendUint32(buf, 0)
	buf = binary.LittleEndian.AppendUint64(buf, r.seq)
	buf = binary.LittleEndian.AppendUint64(buf, uint64(r.at))
	buf = append(buf, r.body...)
	binary.LittleEndian.PutUint32(buf[start+4:], checksum(epoch, buf[start+8:]))
	return buf
}

// errJournalFull: the records do not fit after those already written.
var errJournalFull = errors.New("the queue's journal is full")

// write appends rs (numbered here) and syncs them; j.mu is held. They
// join pending only once on disk, so that the table never holds a record
// the journal might lose.
func (j *journal) write(rs []journaled) error {
	buf := j.buf[:0]
	for i := range rs {
		rs[i].seq = j.next + uint64(i)
		buf = appendRecord(buf, j.epoch, rs[i])
	}
	j.buf = buf
	if j.off+int64(len(buf)) > journalSize {
		return errJournalFull
	}
	// Numbers are never given twice, even to a write that failed (and
	// is written over): a stale tail can never continue a sequence.
	j.next += uint64(len(rs))
	j.dirty = max(j.dirty, j.off+int64(len(buf)))
	if _, err := j.f.WriteAt(buf, j.off); err != nil {
		return fmt.Errorf("writing the queue's journal: %w", err)
	}
	if err := fdatasync(j.f); err != nil {
		// What was written is not known to be on disk: write over it.
		return fmt.Errorf("syncing the queue's journal: %w", err)
	}
	j.off += int64(len(buf))
	j.pending = append(j.pending, rs...)
	return nil
}

// fits reports whether rs could ever be written, in an empty journal.
func fits(rs []journaled) bool {
	n := 0
	for _, r := range rs {
		n += journalHeader + len(r.body)
	}
	return n <= journalSize
}

// take hands the caller every pending record, to put in the table; moved
// ends their move.
func (j *journal) take() []journaled {
	j.mu.Lock()
	defer j.mu.Unlock()
	p := j.pending
	j.pending, j.moving = nil, p
	return p
}

// moved ends the move of p: in the table (ok), or back in pending.
func (j *journal) moved(p []journaled, ok bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.moving = nil
	if !ok {
		j.pending = append(p, j.pending...)
	} else if len(p) > 0 {
		j.applied = p[len(p)-1].seq
	}
}

// waiting counts the records not yet in the table, and those on their
// way there.
func (j *journal) waiting() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return len(j.pending) + len(j.moving)
}

// queued returns the records not yet in the table, and those on their way
// there, oldest first.
func (j *journal) queued() []journaled {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append(slices.Clip(j.moving), j.pending...)
}

// drain puts the journal's pending records into the queue table within
// tx (record), but those of the ids done (the same transaction takes them
// off the queue), and returns them, for moved; the caller holds wmu.
func (d *DB) drain(ctx context.Context, tx *sql.Tx, done []string) ([]journaled, error) {
	p := d.j.take()
	return p, d.record(ctx, tx, p, d.j.appliedMark(), done)
}

// record inserts p but the ids done into the queue table within tx and
// moves the mark past them all (from applied), always writing the mark:
// a transaction that writes nothing is not synced, nor would it carry the
// relaxed ones before it to the disk.
func (d *DB) record(ctx context.Context, tx *sql.Tx, p []journaled, applied uint64, done []string) error {
	keep := p
	if len(done) > 0 {
		keep = slices.DeleteFunc(slices.Clone(p), func(r journaled) bool { return slices.Contains(done, r.id) })
	}
	if err := d.insert(ctx, tx, keep); err != nil {
		return err
	}
	if len(p) > 0 {
		applied = p[len(p)-1].seq
	}
	_, err := tx.StmtContext(ctx, d.stmts.mark).ExecContext(ctx, journalMark, strconv.FormatUint(applied, 10))
	return err
}

func (j *journal) appliedMark() uint64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.applied
}

// queueTx runs fn in a transaction (tx or relaxedTx) that first drains the
// journal into the table, but the ids done, which fn takes off the queue;
// the caller holds wmu.
func (d *DB) queueTx(ctx context.Context, txf func(context.Context, func(*sql.Tx) error) error, done []string, fn func(*sql.Tx) error) error {
	var took []journaled
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
	d.j.moved(took, err == nil)
	return err
}

// syncQueue drains the journal in a transaction at FULL, which carries
// every transaction before it to the disk (a settle's, at NORMAL, too);
// the caller holds wmu.
func (d *DB) syncQueue(ctx context.Context) error {
	return d.queueTx(ctx, d.tx, nil, nil)
}

// insert puts rs into the queue table within tx.
func (d *DB) insert(ctx context.Context, tx *sql.Tx, rs []journaled) error {
	st := tx.StmtContext(ctx, d.stmts.enqueue)
	for _, r := range rs {
		if _, err := st.ExecContext(ctx, r.id, r.at, string(r.body)); err != nil {
			return err
		}
	}
	return nil
}

// newRound begins a round of the journal: in one transaction at FULL, it
// drains it (the table then holds every record of the file, on disk) and
// writes a new epoch, which the records from the file's start on are
// written with. It holds j.mu throughout, so that no record is written
// meanwhile with the old epoch and left out of the transaction; the
// caller holds wmu, so no other drain is under way.
func (d *DB) newRound(ctx context.Context) error {
	epoch := rand.Int64() | 1 // never 0, which no file holds
	j := d.j
	j.mu.Lock()
	defer j.mu.Unlock()
	p := j.pending
	err := d.tx(ctx, func(tx *sql.Tx) error {
		if err := d.record(ctx, tx, p, j.applied, nil); err != nil {
			return err
		}
		_, err := tx.StmtContext(ctx, d.stmts.mark).ExecContext(ctx, journalEpoch, strconv.FormatInt(epoch, 10))
		return err
	})
	if err != nil {
		return err
	}
	if len(p) > 0 {
		j.applied = p[len(p)-1].seq
	}
	j.pending = nil
	j.epoch, j.off = epoch, 0
	return nil
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
	var recs []journaled
	if epoch != 0 {
		recs = parseJournal(b, epoch)
	}
	last := mark
	for _, r := range recs {
		last = max(last, r.seq)
		if r.seq <= mark {
			continue
		}
		// Only the id: an entry of a newer vera goes into the table as it
		// is, where Pending reports it.
		var e struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(r.body, &e); err != nil || e.ID == "" {
			e.ID = fmt.Sprintf("journal-%d-%d", epoch, r.seq)
		}
		r.id = e.ID
		d.j.pending = append(d.j.pending, r)
	}
	d.j.applied, d.j.next = mark, last+1
	d.wmu.Lock()
	defer d.wmu.Unlock()
	// At FULL: the table's state read here may be in the page cache only
	// (the last run was killed), and the journal is about to be written
	// over.
	return d.newRound(ctx)
}

// closeJournal moves the journal's records into the table, synced, and
// clears the file (a clean stop leaves nothing to replay, and no text of
// a turn forgotten since); the caller holds wmu.
func (d *DB) closeJournal(ctx context.Context) error {
	if err := d.syncQueue(ctx); err != nil {
		return err
	}
	j := d.j
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.dirty > 0 {
		if _, err := j.f.WriteAt(make([]byte, j.dirty), 0); err != nil {
			return fmt.Errorf("clearing the queue's journal: %w", err)
		}
		if err := fdatasync(j.f); err != nil {
			return fmt.Errorf("clearing the queue's journal: %w", err)
		}
		j.dirty, j.off = 0, 0
	}
	return nil
}
