package embedded

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/memory"
	"github.com/vera-proxy/vera/memory/embedded/journal"
)

// diskCopy copies what an open store has written to its files (the
// database, its write-ahead log, the queue's journal), as a kill -9 would
// leave them, into a new directory. files limits it to some of them.
func diskCopy(t *testing.T, dir string, files ...string) string {
	t.Helper()
	if len(files) == 0 {
		files = []string{FileName, FileName + "-wal", JournalName}
	}
	out := t.TempDir()
	copyInto(t, dir, out, files...)
	return out
}

func copyInto(t *testing.T, from, to string, files ...string) {
	t.Helper()
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(from, f))
		if os.IsNotExist(err) {
			continue
		}
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(to, f), b, 0o600))
	}
}

// openQuiet opens the store in dir once the snapshot its load writes in
// the background is written: that snapshot syncs the queue first, moving
// the journal's records into the table at a time of its own.
func openQuiet(t *testing.T, dir string) *DB {
	t.Helper()
	db, err := Open(context.Background(), dir)
	require.NoError(t, err)
	db.bg.Wait()
	return db
}

func turn(i int, text string) memory.Memory {
	return memory.Memory{
		ID: memory.NewID(), Namespace: "u", Type: memory.Raw, Time: time.Unix(int64(1_700_000_000+i), 0).UTC(),
		Text: fmt.Sprintf("User: turn %d\nAssistant: %s", i, text),
	}
}

func pendingIDs(t *testing.T, db *DB) []string {
	t.Helper()
	ms, err := db.Pending(context.Background(), 1<<20)
	require.NoError(t, err)
	ids := make([]string, len(ms))
	for i, m := range ms {
		ids[i] = m.ID
	}
	return ids
}

// A turn Enqueue acknowledged is in the journal only (nothing has read
// the queue since): killed there, the next start puts it in the queue,
// every field intact and in order.
func TestJournalReplaysAcknowledgedTurns(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db := openQuiet(t, dir)
	defer db.Close()
	full := fullMemory(t)
	a, b := turn(1, "first"), turn(2, "second")
	require.NoError(t, db.Enqueue(ctx, full))
	require.NoError(t, db.Enqueue(ctx, a, b))
	require.Equal(t, 3, db.j.Waiting(), "the turns must wait in the journal, not in the table")
	n, err := db.Len(ctx)
	require.NoError(t, err)
	assert.Equal(t, 3, n, "Len counts the journal's turns")

	after, err := Open(ctx, diskCopy(t, dir))
	require.NoError(t, err)
	defer after.Close()
	got, err := after.Pending(ctx, 10)
	require.NoError(t, err)
	require.Len(t, got, 3)
	assert.Equal(t, full, got[0])
	assert.Equal(t, []string{a.ID, b.ID}, []string{got[1].ID, got[2].ID})
	n, err = after.Len(ctx)
	require.NoError(t, err)
	assert.Equal(t, 3, n)
}

// A turn taken off the queue in a synced transaction never comes back
// from the journal, though its record is still there.
func TestJournalNeverBringsBackADoneTurn(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db := openQuiet(t, dir)
	defer db.Close()
	a, b := turn(1, "forgotten"), turn(2, "kept")
	require.NoError(t, db.Enqueue(ctx, a, b))
	require.NoError(t, db.Done(ctx, a.ID))
	require.NoError(t, db.Upsert(ctx, turn(3, "a later write")))

	after, err := Open(ctx, diskCopy(t, dir))
	require.NoError(t, err)
	defer after.Close()
	assert.Equal(t, []string{b.ID}, pendingIDs(t, after))
}

// The table's file may lag the journal after a power cut (a settle's
// transaction is not synced): the turns after the last synced mark come
// back, those before it do not.
func TestJournalReplaysWhatTheFileLost(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db := openQuiet(t, dir)
	defer db.Close()
	a, b, c := turn(1, "done"), turn(2, "settled, not synced"), turn(3, "queued")
	require.NoError(t, db.Enqueue(ctx, a))
	require.NoError(t, db.Done(ctx, a.ID)) // synced
	disk := diskCopy(t, dir, FileName, FileName+"-wal")
	require.NoError(t, db.Enqueue(ctx, b))
	_, err := db.Pending(ctx, 10)
	require.NoError(t, err)
	require.NoError(t, db.Settle(ctx, []memory.Memory{b}, []string{b.ID}))
	require.NoError(t, db.Enqueue(ctx, c))
	copyInto(t, dir, disk, JournalName)

	after, err := Open(ctx, disk)
	require.NoError(t, err)
	defer after.Close()
	assert.Equal(t, []string{b.ID, c.ID}, pendingIDs(t, after))
}

// A journal cut or damaged anywhere in its last record gives back the
// records before it, and the store opens.
func TestJournalTornRecord(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db := openQuiet(t, dir)
	defer db.Close()
	ms := []memory.Memory{turn(1, "one"), turn(2, "two"), turn(3, "three")}
	for _, m := range ms {
		require.NoError(t, db.Enqueue(ctx, m))
	}
	disk := diskCopy(t, dir)
	j, err := os.ReadFile(filepath.Join(disk, JournalName))
	require.NoError(t, err)
	recs := journal.Parse(j, db.j.Epoch())
	require.Len(t, recs, 3)
	start := 0
	for _, r := range recs[:2] {
		start += journal.HeaderSize + len(r.Body)
	}
	end := start + journal.HeaderSize + len(recs[2].Body)
	want := []string{ms[0].ID, ms[1].ID}
	for cut := start; cut < end; cut++ {
		if cut-start >= journal.HeaderSize && (cut-start)%8 != 0 {
			continue // every byte of the header, every eighth of the body
		}
		for _, how := range []string{"zeroed", "flipped"} {
			torn := t.TempDir()
			copyInto(t, disk, torn, FileName, FileName+"-wal")
			b := append([]byte(nil), j...)
			if how == "zeroed" {
				clear(b[cut:end])
			} else {
				b[cut] ^= 0x10
			}
			require.NoError(t, os.WriteFile(filepath.Join(torn, JournalName), b, 0o600))
			after, err := Open(ctx, torn)
			require.NoError(t, err, "%s at byte %d", how, cut-start)
			assert.Equal(t, want, pendingIDs(t, after), "%s at byte %d", how, cut-start)
			require.NoError(t, after.Close())
		}
	}
	// A journal cut short (a file of an older size) reads the same.
	torn := t.TempDir()
	copyInto(t, disk, torn, FileName, FileName+"-wal")
	require.NoError(t, os.WriteFile(filepath.Join(torn, JournalName), j[:start+5], 0o600))
	after, err := Open(ctx, torn)
	require.NoError(t, err)
	defer after.Close()
	assert.Equal(t, want, pendingIDs(t, after))
}

// The journal is written over from its start many times, by writers at
// once; whenever it is killed, the queue is what was acknowledged less
// what was done.
func TestJournalWrapsAround(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a few dozen megabytes")
	}
	ctx := context.Background()
	dir := t.TempDir()
	db := openQuiet(t, dir)
	defer db.Close()
	big := strings.Repeat("a long answer ", 4000) // 56 KB: the journal wraps every 75 turns
	var mu sync.Mutex
	want := map[string]bool{}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 100 {
				m := turn(w*1000+i, big)
				if !assert.NoError(t, db.Enqueue(ctx, m)) {
					return
				}
				mu.Lock()
				want[m.ID] = true
				mu.Unlock()
				if i%3 == 0 {
					assert.NoError(t, db.Done(ctx, m.ID))
					mu.Lock()
					delete(want, m.ID)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	require.Greater(t, db.j.Next(), uint64(400))
	after, err := Open(ctx, diskCopy(t, dir))
	require.NoError(t, err)
	defer after.Close()
	got := map[string]bool{}
	for _, id := range pendingIDs(t, after) {
		got[id] = true
	}
	assert.Equal(t, want, got)
}

// A batch larger than the whole journal goes to the table directly.
func TestJournalTooSmallForTheBatch(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db := openQuiet(t, dir)
	defer db.Close()
	small := turn(0, "first")
	require.NoError(t, db.Enqueue(ctx, small))
	var batch []memory.Memory
	for i := range 5 {
		batch = append(batch, turn(i+1, strings.Repeat("x", journal.Size/4)))
	}
	require.NoError(t, db.Enqueue(ctx, batch...))
	after, err := Open(ctx, diskCopy(t, dir))
	require.NoError(t, err)
	defer after.Close()
	ids := pendingIDs(t, after)
	require.Len(t, ids, 6)
	assert.Equal(t, small.ID, ids[0])
}

// A start after a kill, then a second kill: the turns of both runs come
// back (the second run numbers its records after the first's).
func TestJournalKilledTwice(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db := openQuiet(t, dir)
	defer db.Close()
	a, b := turn(1, "a"), turn(2, "b")
	require.NoError(t, db.Enqueue(ctx, a))
	d2 := diskCopy(t, dir)
	second := openQuiet(t, d2)
	defer second.Close()
	require.NoError(t, second.Enqueue(ctx, b))
	third, err := Open(ctx, diskCopy(t, d2))
	require.NoError(t, err)
	defer third.Close()
	assert.Equal(t, []string{a.ID, b.ID}, pendingIDs(t, third))
}

// A vera.db restored from a backup, or removed to start over, beside the
// journal of later turns: the journal is another round's, and brings
// back nothing that file no longer queues.
func TestJournalOfAnotherFileIsIgnored(t *testing.T) {
	ctx := context.Background()
	t.Run("restored from a backup", func(t *testing.T) {
		dir := t.TempDir()
		db := openQuiet(t, dir)
		require.NoError(t, db.Close())
		backup := diskCopy(t, dir, FileName)
		db = openQuiet(t, dir)
		x := turn(1, "stored, then deleted")
		require.NoError(t, db.Enqueue(ctx, x))
		_, err := db.Pending(ctx, 10)
		require.NoError(t, err)
		require.NoError(t, db.Settle(ctx, []memory.Memory{x}, []string{x.ID}))
		require.NoError(t, db.Delete(ctx, x.ID))
		require.NoError(t, db.Enqueue(ctx, turn(2, "killed with this one queued")))
		j := diskCopy(t, dir, JournalName) // as a kill -9 leaves it
		require.NoError(t, db.Close())
		_ = os.Remove(filepath.Join(dir, FileName+"-wal")) // none after a clean stop
		copyInto(t, backup, dir, FileName)
		copyInto(t, j, dir, JournalName)
		after := openQuiet(t, dir)
		defer after.Close()
		assert.Empty(t, pendingIDs(t, after))
	})
	t.Run("removed", func(t *testing.T) {
		dir := t.TempDir()
		db := openQuiet(t, dir)
		x := turn(1, "forget me")
		require.NoError(t, db.Enqueue(ctx, x))
		j := diskCopy(t, dir, JournalName)
		require.NoError(t, db.Done(ctx, x.ID))
		require.NoError(t, db.Close())
		for _, f := range []string{FileName, FileName + "-wal", "vera.index"} {
			_ = os.Remove(filepath.Join(dir, f))
		}
		copyInto(t, j, dir, JournalName)
		after := openQuiet(t, dir)
		defer after.Close()
		assert.Empty(t, pendingIDs(t, after))
	})
}

// A snapshot of the index syncs the queue first: the journal's turns are
// in the table, with every change before them, before it is written.
func TestSnapshotSyncsTheQueue(t *testing.T) {
	ctx := context.Background()
	db := openQuiet(t, t.TempDir())
	defer db.Close()
	require.NoError(t, db.Upsert(ctx, turn(1, "stored")))
	require.NoError(t, db.Enqueue(ctx, turn(2, "queued")))
	require.Equal(t, 1, db.j.Waiting())
	require.NoError(t, db.saveSnapshot(ctx))
	assert.Zero(t, db.j.Waiting())
	mark, err := db.metaInt(ctx, journalMark)
	require.NoError(t, err)
	assert.Equal(t, int64(db.j.Next()-1), mark)
}

// A clean stop leaves nothing in the journal to replay, nor the text of
// any turn.
func TestJournalEmptyAfterClose(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db, err := Open(ctx, dir)
	require.NoError(t, err)
	m := turn(1, "x")
	require.NoError(t, db.Enqueue(ctx, m))
	require.NoError(t, db.Close())
	b, err := os.ReadFile(filepath.Join(dir, JournalName))
	require.NoError(t, err)
	assert.Len(t, b, journal.Size)
	assert.Equal(t, -1, strings.IndexFunc(string(b), func(r rune) bool { return r != 0 }), "the journal is cleared")
	again, err := Open(ctx, dir)
	require.NoError(t, err)
	defer again.Close()
	assert.Zero(t, again.j.Waiting(), "nothing replayed")
	assert.Equal(t, []string{m.ID}, pendingIDs(t, again))
	// The records written from then on are numbered after the mark, so
	// that they are replayed.
	n := turn(2, "y")
	require.NoError(t, again.Enqueue(ctx, n))
	last, err := Open(ctx, diskCopy(t, dir))
	require.NoError(t, err)
	defer last.Close()
	assert.Equal(t, []string{m.ID, n.ID}, pendingIDs(t, last))
}

// The worker's path reads the journal's turns where they are, and stores
// and takes them off in one transaction: they are never written into the
// queue table. A turn queued again under its id is one entry, the later.
func TestJournalTurnsSkipTheTable(t *testing.T) {
	ctx := context.Background()
	db := openQuiet(t, t.TempDir())
	defer db.Close()
	// Counts the rows written into the queue table (one connection: the
	// temporary trigger stays on it).
	_, err := db.db.ExecContext(ctx, `CREATE TEMP TABLE inserted (id TEXT);
		CREATE TEMP TRIGGER count_inserts AFTER INSERT ON queue BEGIN INSERT INTO inserted VALUES (new.id); END`)
	require.NoError(t, err)
	inserted := func() int {
		var n int
		require.NoError(t, db.db.QueryRowContext(ctx, `SELECT count(*) FROM inserted`).Scan(&n))
		return n
	}

	a, b := turn(1, "first"), turn(2, "second")
	again := a
	again.Text += " (again)"
	require.NoError(t, db.Enqueue(ctx, a, b))
	require.NoError(t, db.Enqueue(ctx, again))
	got, err := db.Pending(ctx, 10)
	require.NoError(t, err)
	require.Len(t, got, 2)
	assert.Equal(t, []string{a.ID, b.ID}, []string{got[0].ID, got[1].ID})
	assert.Equal(t, again.Text, got[0].Text)
	assert.Equal(t, 3, db.j.Waiting(), "Pending does not move them")
	limited, err := db.Pending(ctx, 1)
	require.NoError(t, err)
	assert.Len(t, limited, 1)

	require.NoError(t, db.Settle(ctx, got[:1], []string{a.ID}))
	assert.Equal(t, 1, inserted(), "only the turn not settled went into the table")
	assert.Equal(t, []string{b.ID}, pendingIDs(t, db))
	require.NoError(t, db.Done(ctx, b.ID))
	assert.Empty(t, pendingIDs(t, db))

	// A turn in the table and queued again: one entry, the later text.
	c := turn(3, "in the table")
	require.NoError(t, db.Enqueue(ctx, c))
	db.wmu.Lock()
	require.NoError(t, db.syncQueue(ctx))
	db.wmu.Unlock()
	c.Text += ", then again"
	require.NoError(t, db.Enqueue(ctx, c))
	got, err = db.Pending(ctx, 10)
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, c.Text, got[0].Text)
}
