package journal

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// table stands for the store's queue table: what a round's commit put
// there, and its mark.
type table struct {
	rows  []Record
	mark  uint64
	epoch int64
	fail  error // the next commit fails so
}

func (tb *table) commit(p []Record, applied uint64, epoch int64) error {
	if err := tb.fail; err != nil {
		tb.fail = nil
		return err
	}
	tb.rows = append(tb.rows, p...)
	tb.mark, tb.epoch = applied, epoch
	if len(p) > 0 {
		tb.mark = p[len(p)-1].Seq
	}
	return nil
}

// open opens the journal in dir and begins a round, as the store does.
func open(t *testing.T, dir string, tb *table) *Journal {
	t.Helper()
	j, b, err := Open(dir)
	require.NoError(t, err)
	t.Cleanup(func() { j.Close() })
	var recs []Record
	if tb.epoch != 0 {
		recs = Parse(b, tb.epoch)
	}
	j.Replay(recs, tb.mark)
	require.NoError(t, j.NewRound(tb.commit))
	return j
}

func records(bodies ...string) []Record {
	rs := make([]Record, len(bodies))
	for i, b := range bodies {
		rs[i] = Record{At: int64(1000 + i), ID: b, Body: []byte(b)}
	}
	return rs
}

func bodies(rs []Record) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = string(r.Body)
	}
	return out
}

func readFile(t *testing.T, dir string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, Name))
	require.NoError(t, err)
	return b
}

// Records appended are pending, in order, and read back from the file as
// they were written, with their numbers and times; a new file is written
// out to its full size.
func TestAppendedRecordsReadBack(t *testing.T) {
	dir := t.TempDir()
	var tb table
	j := open(t, dir, &tb)
	require.NoError(t, j.Append(records("one", "two")))
	require.NoError(t, j.Append(records("three")))
	assert.Equal(t, 3, j.Waiting())
	assert.Equal(t, []string{"one", "two", "three"}, bodies(j.Queued()))
	b := readFile(t, dir)
	require.Len(t, b, Size)
	got := Parse(b, j.Epoch())
	require.Len(t, got, 3)
	assert.Equal(t, []string{"one", "two", "three"}, bodies(got))
	for i, r := range got {
		assert.Equal(t, got[0].Seq+uint64(i), r.Seq)
	}
	assert.Equal(t, int64(1000), got[2].At)
	assert.Empty(t, Parse(b, j.Epoch()+2), "another round's epoch reads nothing")
}

// A record cut or damaged anywhere, header or payload, ends the run: the
// records before it are read.
func TestTornRecordEndsTheRun(t *testing.T) {
	dir := t.TempDir()
	var tb table
	j := open(t, dir, &tb)
	for _, b := range []string{"one", "two", strings.Repeat("three ", 20)} {
		require.NoError(t, j.Append(records(b)))
	}
	start := 2*HeaderSize + len("one") + len("two")
	end := start + HeaderSize + len(strings.Repeat("three ", 20))
	good := readFile(t, dir)[:end+HeaderSize] // the rest is zero
	for at := start; at < end; at++ {
		for _, how := range []string{"zeroed", "flipped"} {
			b := bytes.Clone(good)
			if how == "zeroed" {
				clear(b[at:end])
			} else {
				b[at] ^= 0x10
			}
			assert.Equal(t, []string{"one", "two"}, bodies(Parse(b, j.Epoch())), "%s at byte %d", how, at-start)
		}
	}
	assert.Equal(t, []string{"one", "two"}, bodies(Parse(good[:start+5], j.Epoch())), "cut short")
}

// A full journal refuses records until a round begins; the round's
// commit gets every pending record, and the file is written from its
// start again, its numbers going on. A commit that fails begins no
// round.
func TestFullJournalBeginsARound(t *testing.T) {
	dir := t.TempDir()
	var tb table
	j := open(t, dir, &tb)
	big := strings.Repeat("x", Size/5)
	for range 4 {
		require.NoError(t, j.Append(records(big)))
	}
	rs := records(big, big)
	require.ErrorIs(t, j.Append(rs), ErrFull)
	assert.True(t, Fits(rs), "an empty journal holds them")
	assert.False(t, Fits(records(big, big, big, big, big, big)))
	tb.fail = errors.New("disk full")
	require.Error(t, j.NewRound(tb.commit))
	require.ErrorIs(t, j.Append(rs), ErrFull, "no round began")
	epoch := j.Epoch()
	require.NoError(t, j.NewRound(tb.commit))
	assert.Len(t, tb.rows, 4, "the table holds the round's records")
	assert.NotEqual(t, epoch, j.Epoch())
	assert.Zero(t, j.Waiting())
	require.NoError(t, j.Append(rs))
	got := Parse(readFile(t, dir), j.Epoch())
	require.Len(t, got, 2, "written from the start")
	assert.Equal(t, tb.mark+1, got[0].Seq, "numbered on from the last record the table holds")
}

// Take hands the pending records over; Moved either ends their move
// (the mark goes past them) or puts them back before those appended
// meanwhile.
func TestTakeAndMoved(t *testing.T) {
	var tb table
	j := open(t, t.TempDir(), &tb)
	require.NoError(t, j.Append(records("a", "b")))
	p := j.Take()
	require.NoError(t, j.Append(records("c")))
	assert.Equal(t, []string{"a", "b", "c"}, bodies(j.Queued()), "those on their way count")
	j.Moved(p, false)
	assert.Equal(t, []string{"a", "b", "c"}, bodies(j.Queued()), "back in their place")
	p = j.Take()
	j.Moved(p, true)
	assert.Zero(t, j.Waiting())
	assert.Equal(t, p[2].Seq, j.Applied())
}

// At start, the records after the table's mark are pending again, and
// the next record is numbered after every record in the file.
func TestReplayAfterTheMark(t *testing.T) {
	dir := t.TempDir()
	var tb table
	j := open(t, dir, &tb)
	require.NoError(t, j.Append(records("a", "b", "c")))
	tb.mark, tb.epoch = j.Queued()[0].Seq, j.Epoch() // the table holds a
	last := j.Queued()[2].Seq
	again, b, err := Open(dir)
	require.NoError(t, err)
	defer again.Close()
	again.Replay(Parse(b, tb.epoch), tb.mark)
	assert.Equal(t, []string{"b", "c"}, bodies(again.Queued()))
	assert.Equal(t, tb.mark, again.Applied())
	assert.Equal(t, last+1, again.Next())
}

// Clear zeroes the whole file; Scrub only what rounds before this one
// wrote, keeping this round's records.
func TestClearAndScrub(t *testing.T) {
	dir := t.TempDir()
	var tb table
	j := open(t, dir, &tb)
	require.NoError(t, j.Append(records(strings.Repeat("old ", 100), "old too")))
	require.NoError(t, j.NewRound(tb.commit))
	require.NoError(t, j.Append(records("new")))
	require.NoError(t, j.Scrub())
	b := readFile(t, dir)
	assert.Equal(t, []string{"new"}, bodies(Parse(b, j.Epoch())))
	assert.NotContains(t, string(b), "old", "the old round's records are zeroed")
	require.NoError(t, j.Clear())
	b = readFile(t, dir)
	assert.Len(t, b, Size)
	assert.Equal(t, -1, bytes.IndexFunc(b, func(r rune) bool { return r != 0 }), "the journal is cleared")
}

// FuzzParse: whatever a file holds, Parse reads a run of records without
// failing, and they are the file's start, byte for byte.
func FuzzParse(f *testing.F) {
	var buf []byte
	for i, b := range []string{"one", "", "three", strings.Repeat("x", 300)} {
		buf = appendRecord(buf, 7, Record{Seq: uint64(10 + i), At: int64(i), Body: []byte(b)})
	}
	f.Add(buf, int64(7))
	f.Add(buf[:len(buf)/2], int64(7))
	f.Add(buf, int64(8))
	f.Add([]byte{}, int64(0))
	f.Fuzz(func(t *testing.T, b []byte, epoch int64) {
		var again []byte
		for _, r := range Parse(b, epoch) {
			again = appendRecord(again, epoch, r)
		}
		require.True(t, bytes.HasPrefix(b, again), fmt.Sprintf("%d bytes read back differ", len(again)))
	})
}
