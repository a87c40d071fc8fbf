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
	"os"
	"path/filepath"
	"strconv"
	"sync"
)

// The queue's journal. Enqueue is on the answer's path (the end of an
// answer waits for it), and a SQLite commit at synchronous FULL costs two
// to three times what its disk sync does. So Enqueue appends the turns to
// a file of its own, JournalName, written in place over a file of fixed
// size, and syncs it: one write and one fdatasync. The turns move into the
// queue table later, before anything reads or changes the queue, in a
// transaction that also records the last journal record the table holds
// (meta 'queue_journal'). At start, the records after that mark go into
// the table. The file is written from its start again only once a synced
// transaction holds every record in it, so a record is in the journal,
// or in the table on disk, or both.
//
// A record is its payload's length (4 bytes), a CRC-32C of what follows
// (4), its sequence number (8), the time it was queued (8, nanoseconds),
// then the payload: the queue row's body. Records follow each other with
// sequence numbers one apart; a reader stops at the first one that is
// torn, zero (the file's unused end) or out of sequence (an older round's).

// JournalName is the queue journal's file in the data directory.
const JournalName = "vera.queue"

const (
	// journalSize is the journal's file: about two thousand turns of
	// 2 KB between two syncs of the queue table.
	journalSize   = 4 << 20
	journalHeader = 24
	// journalMark is the meta key of the last record the table holds.
	journalMark = "queue_journal"
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
	off     int64       // where the next record goes
	next    uint64      // the next record's sequence number
	applied uint64      // the last record the table holds (in a transaction that may not be synced yet)
	pending []journaled // synced to the journal, not yet in the table, in order
	buf     []byte
}

// openJournal opens (creating it at its full size) the journal in dir and
// returns it with the records it holds, oldest first.
func openJournal(dir string) (*journal, []journaled, error) {
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
	return &journal{f: f}, parseJournal(b), nil
}

// syncDir makes a new file's name durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, os.ErrInvalid) {
		return err
	}
	return nil
}

// parseJournal reads the run of records at the start of b.
func parseJournal(b []byte) []journaled {
	var out []journaled
	for off := 0; len(b)-off >= journalHeader; {
		h := b[off : off+journalHeader]
		n := int(binary.LittleEndian.Uint32(h))
		if n == 0 || n > len(b)-off-journalHeader {
			break
		}
		rec := b[off+8 : off+journalHeader+n]
		if crc32.Checksum(rec, castagnoli) != binary.LittleEndian.Uint32(h[4:]) {
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

// appendRecord adds a record to buf.
func appendRecord(buf []byte, r journaled) []byte {
	start := len(buf)
	buf = binary.LittleEndian.AppendUint32(buf, uint32(len(r.body)))
	buf = binary.LittleEndian.AppendUint32(buf, 0)
	buf = binary.LittleEndian.AppendUint64(buf, r.seq)
	buf = binary.LittleEndian.AppendUint64(buf, uint64(r.at))
	buf = append(buf, r.body...)
	binary.LittleEndian.PutUint32(buf[start+4:], crc32.Checksum(buf[start+8:], castagnoli))
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
		buf = appendRecord(buf, rs[i])
	}
	j.buf = buf
	if j.off+int64(len(buf)) > journalSize {
		return errJournalFull
	}
	if _, err := j.f.WriteAt(buf, j.off); err != nil {
		return err
	}
	if err := fdatasync(j.f); err != nil {
		// What was written is not known to be on disk: write over it.
		return err
	}
	j.off += int64(len(buf))
	j.next += uint64(len(rs))
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

// take hands the caller every pending record, to put in the table; give
// them back with putBack when its transaction fails.
func (j *journal) take() []journaled {
	j.mu.Lock()
	defer j.mu.Unlock()
	p := j.pending
	j.pending = nil
	return p
}

// putBack returns records a failed transaction did not put in the table.
func (j *journal) putBack(p []journaled) {
	if len(p) == 0 {
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	j.pending = append(p, j.pending...)
}

// waiting counts the records not yet in the table.
func (j *journal) waiting() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return len(j.pending)
}

// drain puts the journal's pending records into the queue table within tx
// and moves the mark past them, always writing the mark, so that a
// transaction at FULL that drains makes the mark durable. It returns what
// it took, for putBack when tx fails; the caller holds wmu.
func (d *DB) drain(ctx context.Context, tx *sql.Tx) ([]journaled, error) {
	p := d.j.take()
	st := tx.StmtContext(ctx, d.stmts.enqueue)
	for _, r := range p {
		if _, err := st.ExecContext(ctx, r.id, r.at, string(r.body)); err != nil {
			return p, err
		}
	}
	mark := d.j.appliedMark()
	if len(p) > 0 {
		mark = p[len(p)-1].seq
	}
	if _, err := tx.StmtContext(ctx, d.stmts.mark).ExecContext(ctx, journalMark, strconv.FormatUint(mark, 10)); err != nil {
		return p, err
	}
	return p, nil
}

func (j *journal) appliedMark() uint64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.applied
}

// queueTx runs fn in a transaction (tx or relaxedTx) that first drains the
// journal into the table; the caller holds wmu.
func (d *DB) queueTx(ctx context.Context, txf func(context.Context, func(*sql.Tx) error) error, fn func(*sql.Tx) error) error {
	var took []journaled
	err := txf(ctx, func(tx *sql.Tx) error {
		var err error
		if took, err = d.drain(ctx, tx); err != nil {
			return err
		}
		if fn != nil {
			return fn(tx)
		}
		return nil
	})
	if err != nil {
		d.j.putBack(took)
		return err
	}
	if len(took) > 0 {
		d.j.mu.Lock()
		d.j.applied = took[len(took)-1].seq
		d.j.mu.Unlock()
	}
	return nil
}

// syncQueue drains the journal in a transaction at FULL, which carries
// every transaction before it to the disk (a settle's, at NORMAL, too);
// the caller holds wmu.
func (d *DB) syncQueue(ctx context.Context) error {
	return d.queueTx(ctx, d.tx, nil)
}

// replayJournal puts the journal's records after the table's mark into
// the table, syncs it, and starts the journal over; at start, before
// anything reads the queue.
func (d *DB) replayJournal(ctx context.Context, recs []journaled) error {
	var mark uint64
	var s string
	switch err := d.db.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = ?`, journalMark).Scan(&s); {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return err
	default:
		if mark, err = strconv.ParseUint(s, 10, 64); err != nil {
			return fmt.Errorf("the queue journal's mark %q: %w", s, err)
		}
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
			return fmt.Errorf("the queue journal's record %d names no memory", r.seq)
		}
		r.id = e.ID
		d.j.pending = append(d.j.pending, r)
	}
	d.j.applied, d.j.next = mark, last+1
	d.wmu.Lock()
	defer d.wmu.Unlock()
	// Always at FULL: the table's state read here may be in the page
	// cache only (the last run was killed), and the journal is about to
	// be written over.
	if err := d.syncQueue(ctx); err != nil {
		return err
	}
	d.j.off = 0
	return nil
}
