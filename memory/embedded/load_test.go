package embedded

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/memory"
	"github.com/vera-proxy/vera/memory/embedded/index"
)

// seedStore writes n memories to namespace "a" of a new store in dir:
// "memory I about topic I%7", a second apart, each with a vector.
func seedStore(t *testing.T, dir string, n int) []memory.Memory {
	t.Helper()
	ctx := context.Background()
	db, err := Open(ctx, dir)
	require.NoError(t, err)
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ms := make([]memory.Memory, n)
	for i := range ms {
		ms[i] = memory.Memory{ID: fmt.Sprintf("m%05d", i), Namespace: "a", Type: memory.Raw,
			Text: fmt.Sprintf("memory %d about topic%d", i, i%7), Time: start.Add(time.Duration(i) * time.Second),
			Vector: []float32{1, float32(i % 5), 0}}
	}
	for i := 0; i < n; i += 1000 {
		require.NoError(t, db.Upsert(ctx, ms[i:min(i+1000, n)]...))
	}
	require.NoError(t, db.saveSnapshot(ctx))
	require.NoError(t, db.Close())
	return ms
}

// A store takes writes while its index loads: edits, deletes, moves, new
// memories, vectors and token counts, of memories the load has read and
// of memories it has not read yet. Once loaded, its index is the one a
// fresh load of the file gives.
func TestWritesWhileTheIndexLoads(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	ms := seedStore(t, dir, 3*loadChunk+100)
	require.NoError(t, os.Remove(filepath.Join(dir, SnapshotName))) // rebuilt, in chunks

	paused, resume := make(chan struct{}), make(chan struct{})
	first := true
	db, err := start(ctx, dir, options{afterChunk: func() {
		if first {
			first = false
			close(paused)
			<-resume
		}
	}})
	require.NoError(t, err)
	defer db.Close()
	<-paused // the first chunk is read; the rest is not

	p, loading := db.Loading()
	require.True(t, loading)
	assert.Equal(t, len(ms), p.Total)
	_, err = db.Search(ctx, memory.Query{Filter: memory.Filter{Namespace: "a"}, Text: "topic3", Limit: 5})
	require.ErrorIs(t, err, memory.ErrLoading, "searches wait for the index")
	latest, err := db.Latest(ctx, memory.Filter{Namespace: "a"}, 2)
	require.NoError(t, err, "Latest reads the file meanwhile")
	require.Len(t, latest, 2)
	assert.Equal(t, ms[len(ms)-1].ID, latest[0].ID)

	early, late := ms[10], ms[3*loadChunk+10] // read by the load, not yet read
	for _, m := range []*memory.Memory{&early, &late} {
		m.Text = "zebra " + m.Text
	}
	require.NoError(t, db.Upsert(ctx, early, late))
	require.NoError(t, db.Delete(ctx, ms[20].ID, ms[3*loadChunk+20].ID))
	moved := ms[30]
	moved.Namespace = "b"
	fresh := memory.Memory{ID: "new", Namespace: "b", Type: memory.Curated, Text: "zebra crossing", Time: time.Now(), Vector: []float32{0, 0, 1}}
	require.NoError(t, db.Upsert(ctx, moved, fresh))
	require.NoError(t, db.SetTokens(ctx, map[string]int{ms[40].ID: 7, ms[3*loadChunk+40].ID: 9}))
	vec := ms[50]
	vec.Vector = []float32{0, 0, 1}
	require.NoError(t, db.SetVectors(ctx, vec))

	close(resume)
	require.NoError(t, db.Wait(ctx))
	_, loading = db.Loading()
	assert.False(t, loading)

	queries := []memory.Query{
		{Filter: memory.Filter{Namespace: "a"}, Text: "zebra", Limit: 10},
		{Filter: memory.Filter{Namespace: "b"}, Text: "zebra topic2", Limit: 10},
		{Filter: memory.Filter{Namespace: "a"}, Text: "memory 20 memory 12308", Limit: 3},
		{Filter: memory.Filter{Namespace: "a"}, Vector: []float32{0, 0, 1}, Threshold: 0.9, Limit: 5},
		{Filter: memory.Filter{Namespace: "b"}, Vector: []float32{0, 0, 1}, Threshold: 0.9, Limit: 5},
	}
	got := answers(t, db, queries)
	assert.ElementsMatch(t, []string{early.ID, late.ID}, ids(got[0]))
	assert.ElementsMatch(t, []string{"new", moved.ID}, ids(got[1]))
	assert.NotContains(t, ids(got[2]), ms[20].ID)
	assert.NotContains(t, ids(got[2]), ms[3*loadChunk+20].ID)
	assert.Equal(t, []string{vec.ID}, ids(got[3]))
	for _, h := range got[0] {
		if h.ID == late.ID {
			assert.Equal(t, late.Text, h.Text)
		}
	}
	counted, err := db.Latest(ctx, memory.Filter{Namespace: "a", Until: ms[41].Time}, 1)
	require.NoError(t, err)
	assert.Equal(t, 7, counted[0].Tokens, "a token count set during the load")
	require.NoError(t, db.Close())

	// A fresh load of the file finds the same memories (the third query
	// has thousands of equal scores). Scores may differ a little: until
	// the index is compacted, a replaced memory's postings still count in
	// its terms' document frequencies.
	again, err := Open(ctx, dir)
	require.NoError(t, err)
	defer again.Close()
	want := answers(t, again, queries)
	for i := range queries {
		if i != 2 {
			assert.ElementsMatch(t, ids(want[i]), ids(got[i]), "query %d", i)
		}
	}
}

func answers(t *testing.T, db *DB, qs []memory.Query) [][]memory.Hit {
	t.Helper()
	out := make([][]memory.Hit, len(qs))
	for i, q := range qs {
		hits, err := db.Search(context.Background(), q)
		require.NoError(t, err)
		out[i] = hits
	}
	return out
}

func ids(hits []memory.Hit) []string {
	out := make([]string, len(hits))
	for i, h := range hits {
		out[i] = h.ID
	}
	return out
}

// A store closed while its index loads stops the load.
func TestCloseWhileLoading(t *testing.T) {
	dir := t.TempDir()
	seedStore(t, dir, 2*loadChunk+1)
	require.NoError(t, os.Remove(filepath.Join(dir, SnapshotName)))
	paused, resume := make(chan struct{}), make(chan struct{})
	first := true
	db, err := start(context.Background(), dir, options{afterChunk: func() {
		if first {
			first = false
			close(paused)
			<-resume
		}
	}})
	require.NoError(t, err)
	<-paused
	closed := make(chan error, 1)
	go func() { closed <- db.Close() }()
	close(resume)
	require.NoError(t, <-closed)
	db, err = Open(context.Background(), dir)
	require.NoError(t, err, "the file is free again")
	require.NoError(t, db.Close())
}

// crash closes db as a killed vera leaves it: no snapshot written.
func crash(t *testing.T, db *DB) {
	t.Helper()
	db.load.cancel()
	<-db.load.done
	db.bg.Wait()
	require.NoError(t, db.db.Close())
}

// loadedFrom opens the store in dir and says where its index came from.
func loadedFrom(t *testing.T, dir string) (*DB, string) {
	t.Helper()
	db, err := Open(context.Background(), dir)
	require.NoError(t, err)
	from, _ := db.LoadedFrom()
	return db, from
}

// A store closed writes its index's snapshot; the next start reads it,
// with the rows changed since a crash read again from the file: edits,
// deletes, moves, new memories, vectors and token counts. Hidden, edited
// and deleted memories never come back.
func TestSnapshotWithChangesSince(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	ms := seedStore(t, dir, 3000)
	db, from := loadedFrom(t, dir)
	require.Equal(t, "snapshot, 0 rows changed since", from)
	// A delete erases: the snapshot is written again (erase.go), after it.
	require.NoError(t, db.Delete(ctx, ms[20].ID))
	db.bg.Wait()

	edited := ms[10]
	edited.Text = "zebra " + edited.Text
	hidden := ms[11]
	hidden.Type = memory.Forgotten
	moved := ms[12]
	moved.Namespace = "b"
	fresh := memory.Memory{ID: "new", Namespace: "b", Type: memory.Curated, Text: "zebra crossing", Time: time.Now(), Vector: []float32{0, 0, 1}}
	require.NoError(t, db.Upsert(ctx, edited, hidden, moved, fresh))
	vec := ms[30]
	vec.Vector = []float32{0, 0, 1}
	require.NoError(t, db.SetVectors(ctx, vec))
	crash(t, db)

	db, from = loadedFrom(t, dir)
	assert.Equal(t, "snapshot, 5 rows changed since", from)
	queries := []memory.Query{
		{Filter: memory.Filter{Namespace: "a"}, Text: "zebra", Limit: 10},
		{Filter: memory.Filter{Namespace: "b"}, Text: "zebra topic5", Limit: 10},
		{Filter: memory.Filter{Namespace: "a", Types: []memory.Type{memory.Raw}}, Text: "memory 11 memory 20", Limit: 3},
		{Filter: memory.Filter{Namespace: "a"}, Vector: []float32{0, 0, 1}, Threshold: 0.9, Limit: 5},
		{Filter: memory.Filter{Namespace: "b"}, Vector: []float32{0, 0, 1}, Threshold: 0.9, Limit: 5},
	}
	got := answers(t, db, queries)
	assert.Equal(t, []string{edited.ID}, ids(got[0]))
	assert.ElementsMatch(t, []string{"new", moved.ID}, ids(got[1]))
	assert.NotContains(t, ids(got[2]), hidden.ID, "hidden stays hidden")
	assert.NotContains(t, ids(got[2]), ms[20].ID, "deleted stays deleted")
	assert.Equal(t, []string{vec.ID}, ids(got[3]))
	assert.Equal(t, []string{"new"}, ids(got[4]))
	require.NoError(t, db.Close())

	// A close after a few changes leaves them to be read again; the load
	// that read them wrote a new snapshot. A rebuild finds the same.
	db, from = loadedFrom(t, dir)
	assert.Equal(t, "snapshot, 0 rows changed since", from)
	again := answers(t, db, queries)
	require.NoError(t, db.Close())
	require.NoError(t, os.Remove(filepath.Join(dir, SnapshotName)))
	db, from = loadedFrom(t, dir)
	assert.Contains(t, from, "read from the file (no snapshot yet")
	rebuilt := answers(t, db, queries)
	require.NoError(t, db.Close())
	for i := range queries {
		assert.ElementsMatch(t, ids(rebuilt[i]), ids(again[i]), "query %d", i)
		assert.ElementsMatch(t, ids(rebuilt[i]), ids(got[i]), "query %d", i)
	}
}

// A snapshot torn anywhere in its header, cut short, or with a byte
// changed, or made for another store, is never trusted: the index is
// rebuilt, and finds what it should.
func TestTornSnapshotIsRebuilt(t *testing.T) {
	dir := t.TempDir()
	seedStore(t, dir, 500)
	path := filepath.Join(dir, SnapshotName)
	whole, err := os.ReadFile(path)
	require.NoError(t, err)
	q := []memory.Query{{Filter: memory.Filter{Namespace: "a"}, Text: "memory 42 topic0", Limit: 3}}
	check := func(t *testing.T, snapshot []byte, what string) {
		t.Helper()
		require.NoError(t, os.WriteFile(path, snapshot, 0o600))
		db, from := loadedFrom(t, dir)
		assert.Contains(t, from, "rebuilt", what)
		got := answers(t, db, q)
		require.NoError(t, db.Close())
		require.NotEmpty(t, got[0], what)
		assert.Equal(t, "m00042", got[0][0].ID, what)
	}
	for n := range index.SnapshotHeader + 1 {
		check(t, whole[:n], fmt.Sprintf("cut at byte %d of the header", n))
	}
	for _, n := range []int{index.SnapshotHeader + 1, len(whole) / 2, len(whole) - 1} {
		check(t, whole[:n], fmt.Sprintf("cut at byte %d of %d", n, len(whole)))
	}
	for _, i := range []int{0, 9, 13, 20, 33, 41, 49, index.SnapshotHeader - 1, index.SnapshotHeader + 3, len(whole) / 2, len(whole) - 1} {
		bad := slices.Clone(whole)
		bad[i] ^= 0x40
		check(t, bad, fmt.Sprintf("byte %d changed", i))
	}
	check(t, append(slices.Clone(whole), 0), "a byte past the end")

	other := t.TempDir()
	seedStore(t, other, 500)
	theirs, err := os.ReadFile(filepath.Join(other, SnapshotName))
	require.NoError(t, err)
	check(t, theirs, "another store's snapshot")
}
