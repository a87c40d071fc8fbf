// Package journal is the embedded store's queue journal: the turns a
// chat's answer waits to have on disk, appended to a file of their own
// and synced (one write and one fdatasync), where a SQLite commit at
// synchronous FULL costs two to three times what its disk sync does.
//
// The file (Name) is written in place over a fixed size. The store reads
// the records where they are, and moves them into its queue table before
// anything changes the queue, in a transaction that also records the last
// record the table holds (its mark). At start, the records after the mark
// go into the table. The file is written from its start again only once
// a synced transaction holds every record in it (NewRound), so a record
// is in the journal, or in the table on disk, or both.
//
// Each round of the file (from its start to where it is written over
// again) has an epoch, a random number the table's file keeps, written in
// the synced transaction that begins the round; a record's checksum is
// seeded with it. A journal beside another file than its own (a store
// restored from a backup, or removed to start over) or left from an older
// round is read as empty, so it never brings back a turn that file no
// longer queues.
//
// A record is its payload's length (4 bytes), a CRC-32C of the epoch and
// what follows (4), its sequence number (8), the time it was queued (8,
// nanoseconds), then the payload: the queue row's body. Records follow
// each other with sequence numbers one apart; a reader stops at the first
// one that is torn, zero (the file's unused end), of another epoch or out
// of sequence.
package journal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
)

// Name is the journal's file in the data directory.
const Name = "vera.queue"

const (
	// Size is the journal's file: about two thousand turns of 2 KB
	// between two syncs of the queue table.
	Size = 4 << 20
	// HeaderSize is a record's header, before its payload.
	HeaderSize = 24
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Record is one record: a queued memory on its way to the table.
type Record struct {
	Seq uint64 // numbered by Append
	At  int64  // when it was queued: the queue row's seq (its place in the queue)
	// ID is the memory's id, which the file does not hold apart: the
	// store reads it from Body.
	ID   string
	Body []byte
}

// Journal is the open file and what it holds that the table does not.
type Journal struct {
	f *os.File

	mu      sync.Mutex
	epoch   int64    // this round's, seeding every record's checksum
	off     int64    // where the next record goes
	dirty   int64    // the file is zero from here on
	next    uint64   // the next record's sequence number
	applied uint64   // the last record the table holds (in a transaction that may not be synced yet)
	pending []Record // synced to the journal, not yet in the table, in order
	moving  []Record // taken from pending, in a transaction not yet over
	buf     []byte
}

// Open opens (creating it at its full size) the journal in dir and
// returns it with what its file holds, to read (Parse) once the round's
// epoch is known, and hand to Replay. It is written only once a round
// begins (NewRound).
func Open(dir string) (*Journal, []byte, error) {
	path := filepath.Join(dir, Name)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, nil, err
	}
	b, err := io.ReadAll(f)
	if err == nil && len(b) < Size {
		err = fillOut(f, dir, len(b))
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	dirty := int64(len(b))
	for dirty > 0 && b[dirty-1] == 0 {
		dirty--
	}
	return &Journal{f: f, dirty: dirty}, b, nil
}

// fillOut writes the file of size bytes out to Size, and syncs it and its
// name once: written out (not a hole, not fallocated), so that a record's
// fdatasync never has the file's size or its extents to write too.
func fillOut(f *os.File, dir string, size int) error {
	if _, err := f.WriteAt(make([]byte, Size-size), int64(size)); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	return syncDir(dir)
}

// Close closes the file.
func (j *Journal) Close() error { return j.f.Close() }

// Parse reads the run of records of epoch at the start of b.
func Parse(b []byte, epoch int64) []Record {
	var out []Record
	for off := 0; len(b)-off >= HeaderSize; {
		h := b[off : off+HeaderSize]
		n := int(binary.LittleEndian.Uint32(h))
		if n == 0 || n > len(b)-off-HeaderSize {
			break
		}
		rec := b[off+8 : off+HeaderSize+n]
		if checksum(epoch, rec) != binary.LittleEndian.Uint32(h[4:]) {
			break
		}
		seq := binary.LittleEndian.Uint64(h[8:])
		if len(out) > 0 && seq != out[len(out)-1].Seq+1 {
			break
		}
		body := bytes.Clone(b[off+HeaderSize : off+HeaderSize+n])
		out = append(out, Record{Seq: seq, At: int64(binary.LittleEndian.Uint64(h[16:])), Body: body})
		off += HeaderSize + n
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
func appendRecord(buf []byte, epoch int64, r Record) []byte {
	start := len(buf)
	buf = binary.LittleEndian.AppendUint32(buf, uint32(len(r.Body)))
	buf = binary.LittleEndian.AppendUint32(buf, 0)
	buf = binary.LittleEndian.AppendUint64(buf, r.Seq)
	buf = binary.LittleEndian.AppendUint64(buf, uint64(r.At))
	buf = append(buf, r.Body...)
	binary.LittleEndian.PutUint32(buf[start+4:], checksum(epoch, buf[start+8:]))
	return buf
}

// ErrFull says that records do not fit after those already written: the
// table must hold them all before the file is written from its start
// again (NewRound).
var ErrFull = errors.New("the queue's journal is full")

// Append numbers rs, appends them and syncs them. They are pending (Take,
// Queued) only once on disk, so that the table never holds a record the
// journal might lose.
func (j *Journal) Append(rs []Record) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	buf := j.buf[:0]
	for i := range rs {
		rs[i].Seq = j.next + uint64(i)
		buf = appendRecord(buf, j.epoch, rs[i])
	}
	j.buf = buf
	if j.off+int64(len(buf)) > Size {
		return ErrFull
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

// Fits reports whether rs could ever be appended, in an empty journal.
func Fits(rs []Record) bool {
	n := 0
	for _, r := range rs {
		n += HeaderSize + len(r.Body)
	}
	return n <= Size
}

// Take hands the caller every pending record, to put in the table; Moved
// ends their move.
func (j *Journal) Take() []Record {
	j.mu.Lock()
	defer j.mu.Unlock()
	p := j.pending
	j.pending, j.moving = nil, p
	return p
}

// Moved ends the move of p: in the table (ok), or back in pending.
func (j *Journal) Moved(p []Record, ok bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.moving = nil
	if !ok {
		j.pending = append(p, j.pending...)
	} else if len(p) > 0 {
		j.applied = p[len(p)-1].Seq
	}
}

// Waiting counts the records not yet in the table, and those on their
// way there.
func (j *Journal) Waiting() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return len(j.pending) + len(j.moving)
}

// Queued returns the records not yet in the table, and those on their
// way there, oldest first.
func (j *Journal) Queued() []Record {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append(slices.Clip(j.moving), j.pending...)
}

// Applied is the last record the table holds (its mark).
func (j *Journal) Applied() uint64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.applied
}

// Epoch is the round's epoch.
func (j *Journal) Epoch() int64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.epoch
}

// Next is the sequence number the next record gets.
func (j *Journal) Next() uint64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.next
}

// Replay sets the journal up at start from recs, its file's records
// (Parse), the table holding those up to mark: the later ones are pending
// (their ids set by the caller), and the next record is numbered after
// them all.
func (j *Journal) Replay(recs []Record, mark uint64) {
	j.mu.Lock()
	defer j.mu.Unlock()
	last := mark
	for _, r := range recs {
		last = max(last, r.Seq)
		if r.Seq > mark {
			j.pending = append(j.pending, r)
		}
	}
	j.applied, j.next = mark, last+1
}

// NewRound begins a round of the journal. commit, given the pending
// records, the mark the table holds and the new round's epoch, must put
// the records in the table, move its mark past them and record the epoch,
// in one synced transaction: the table then holds every record of the
// file, on disk, and the records from the file's start on are written
// with the new epoch. The journal's lock is held throughout, so that no
// record is written meanwhile with the old epoch and left out of the
// transaction; the caller keeps any other move (Take) from running.
func (j *Journal) NewRound(commit func(pending []Record, applied uint64, epoch int64) error) error {
	epoch := rand.Int64() | 1 // never 0, which no file holds
	j.mu.Lock()
	defer j.mu.Unlock()
	p := j.pending
	if err := commit(p, j.applied, epoch); err != nil {
		return err
	}
	if len(p) > 0 {
		j.applied = p[len(p)-1].Seq
	}
	j.pending = nil
	j.epoch, j.off = epoch, 0
	return nil
}

// Clear zeroes every record in the file, and syncs it: once the table
// holds them all, on disk, a clean stop leaves nothing to replay, and no
// text of a turn forgotten since.
func (j *Journal) Clear() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.dirty > 0 {
		if err := j.zero(0, j.dirty); err != nil {
			return err
		}
		j.dirty, j.off = 0, 0
	}
	return nil
}

// Scrub zeroes the records of rounds before this one, and syncs them:
// once a round begins, the table holds them, and a deleted turn's text
// must leave the file. The round's own records (new turns) stay.
func (j *Journal) Scrub() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.dirty > j.off {
		if err := j.zero(j.off, j.dirty); err != nil {
			return err
		}
		j.dirty = j.off
	}
	return nil
}

// zero writes zeros over the file's bytes [from, to), synced; j.mu is
// held.
func (j *Journal) zero(from, to int64) error {
	if _, err := j.f.WriteAt(make([]byte, to-from), from); err != nil {
		return fmt.Errorf("clearing the queue's journal: %w", err)
	}
	if err := fdatasync(j.f); err != nil {
		return fmt.Errorf("clearing the queue's journal: %w", err)
	}
	return nil
}
