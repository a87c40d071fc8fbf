package index

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/memory"
)

// storeID is the store id the tests' snapshots are made for.
const storeID = "0123456789abcdef"

// memFile is a file in memory, for WriteSnapshot.
type memFile struct{ b []byte }

func (f *memFile) Write(p []byte) (int, error) {
	f.b = append(f.b, p...)
	return len(p), nil
}

func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	return copy(f.b[off:], p), nil
}

// snapshotOf is the snapshot of ns, as of generation 1 of store storeID.
func snapshotOf(t testing.TB, ns map[string]*Namespace) []byte {
	t.Helper()
	var f memFile
	require.NoError(t, WriteSnapshot(&f, storeID, 1, ns))
	return f.b
}

// readBytes reads the snapshot b, made for store storeID.
func readBytes(b []byte, o Options) (map[string]*Namespace, int64, error) {
	return ReadSnapshot(bytes.NewReader(b), int64(len(b)), storeID, o)
}

// A snapshot reads back as it was written: every namespace, its
// generation, and each index holding what it held (its rankings, its
// time order). Made for another store, or read at another length, it is
// refused.
func TestSnapshotRoundTrip(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ns := map[string]*Namespace{}
	for k, name := range []string{"a", "b", "empty"} {
		ix := New(Options{CommonMin: 16})
		ns[name] = ix
		if name == "empty" {
			continue
		}
		for i := range 200 {
			m := memory.Memory{ID: fmt.Sprint(i), Namespace: name, Type: memory.Raw, Text: fmt.Sprintf("alpha w%d w%d", i%7, i%(k+3)),
				Time: start.Add(time.Duration((i*37)%200) * time.Second)}
			ix.Add(int64(i+1), &m, []float32{float32(i%5) + 1, 1, 0})
		}
		ix.Remove(5)
	}
	b := snapshotOf(t, ns)
	var f memFile
	require.NoError(t, WriteSnapshot(&f, storeID, 7, ns))
	got, gen, err := readBytes(f.b, Options{CommonMin: 16})
	require.NoError(t, err)
	assert.Equal(t, int64(7), gen)
	require.Len(t, got, len(ns))
	for name, ix := range ns {
		back := got[name]
		require.NotNil(t, back, name)
		assert.Equal(t, ix.live, back.live, name)
		assert.Equal(t, ix.Ordered(), back.Ordered(), name)
		q := &memory.Query{Filter: memory.Filter{Namespace: name}, Text: "alpha w3", Limit: 20}
		assert.Equal(t, ix.search(q, []float32{1, 0, 0}), back.search(q, []float32{1, 0, 0}), name)
		f := memory.Filter{Namespace: name}
		assert.Equal(t, ix.Latest(&f, 50, false), back.Latest(&f, 50, false), name)
	}
	_, _, err = ReadSnapshot(bytes.NewReader(b), int64(len(b)), "fedcba9876543210", Options{})
	assert.ErrorContains(t, err, "another store")
	_, _, err = ReadSnapshot(bytes.NewReader(b), int64(len(b))+1, storeID, Options{})
	assert.ErrorContains(t, err, "torn")
}

// FuzzReadSnapshot: a body changed in any way, behind a header that
// holds its length (and the checksum of the body it was), is refused,
// never a panic nor an allocation past what it holds; only the body
// itself is read back.
func FuzzReadSnapshot(f *testing.F) {
	ix := New(Options{CommonMin: 16})
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 40 {
		m := memory.Memory{ID: fmt.Sprint(i), Namespace: "c", Type: memory.Raw, Text: fmt.Sprintf("alpha beta w%d", i%7), Time: start.Add(time.Duration(i) * time.Second)}
		ix.Add(int64(i+1), &m, []float32{1, float32(i % 3), 0, 0})
	}
	good := snapshotOf(f, map[string]*Namespace{"c": ix})
	body := good[SnapshotHeader:]
	sum := crc32.Checksum(body, castagnoli)
	f.Add(body)
	f.Add(body[:len(body)/2])
	f.Add(append(slices.Clone(body), 0))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		file := append(snapshotHeader(storeID, 1, int64(len(b)), sum), b...)
		ns, _, err := readBytes(file, ix.opts)
		if bytes.Equal(b, body) {
			require.NoError(t, err)
			require.Contains(t, ns, "c")
			return
		}
		require.Error(t, err)
	})
}

// A snapshot with any byte of its postings changed is refused, and never
// decoded first: the common terms' arrays are made from its postings only
// once its checksum holds (a damaged varint used to spin, or panic).
func TestSnapshotDamagedPostingsRefused(t *testing.T) {
	ix := New(Options{CommonMin: 16})
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 40 {
		m := memory.Memory{ID: fmt.Sprint(i), Namespace: "c", Type: memory.Raw, Text: fmt.Sprintf("alpha beta w%d", i%7), Time: start.Add(time.Duration(i) * time.Second)}
		ix.Add(int64(i+1), &m, nil)
	}
	require.NotEmpty(t, ix.common)
	good := snapshotOf(t, map[string]*Namespace{"c": ix})
	// The postings' data is the body's last run (one namespace).
	data := 0
	for _, p := range ix.post {
		data += len(p.data)
	}
	for at := len(good) - data; at < len(good); at++ {
		bad := slices.Clone(good)
		bad[at] ^= 0x80
		_, _, err := readBytes(bad, ix.opts)
		require.Error(t, err, "byte %d", at)
	}
}

// A damaged length anywhere in a snapshot's body is refused before
// anything of its size is allocated: lengths are read before the body's
// checksum can be checked, and none may ask for more than the file holds.
func TestSnapshotDamagedLengthsAllocateNothing(t *testing.T) {
	ix := newIndex()
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 40 {
		m := memory.Memory{ID: fmt.Sprint(i), Namespace: "c", Type: memory.Raw, Text: fmt.Sprintf("alpha beta w%d", i%7), Time: start.Add(time.Duration(i) * time.Second)}
		ix.Add(int64(i+1), &m, []float32{1, 0, 0, 0})
	}
	good := snapshotOf(t, map[string]*Namespace{"c": ix})
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for at := SnapshotHeader; at+8 <= len(good); at++ {
		for _, v := range []uint64{1<<34 - 1, 1 << 40, math.MaxUint64} {
			bad := slices.Clone(good)
			binary.LittleEndian.PutUint64(bad[at:], v)
			if slices.Equal(bad, good) {
				continue
			}
			_, _, err := readBytes(bad, ix.opts)
			require.Error(t, err, "a length of %d at byte %d", v, at)
		}
	}
	runtime.ReadMemStats(&after)
	// Each read may take what the file holds, and its 1 MiB buffer.
	reads := uint64(3 * (len(good) - SnapshotHeader))
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, reads*(uint64(len(good))*8+2<<20))
}

// throughSnapshot writes ix, as namespace "c", to a snapshot and reads
// it back.
func throughSnapshot(t *testing.T, ix *Namespace) *Namespace {
	t.Helper()
	ns, _, err := readBytes(snapshotOf(t, map[string]*Namespace{"c": ix}), ix.opts)
	require.NoError(t, err)
	return ns["c"]
}

// An index read from a snapshot takes its next slots and postings in the
// room it was given: its arrays stay where they are until it is spent,
// and a list that outgrows its room moves without touching the lists
// carved next to it. Through both, it holds what an index given the same
// memories one by one holds.
func TestLoadedIndexGrowsInItsRoom(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ref := newIndex()
	var ix *Namespace
	seq := int64(0)
	middle := 40 // the middle word's choices: fewer once loaded, so that some lists outgrow their room
	add := func(n int) {
		for range n {
			seq++
			text := fmt.Sprintf("w%d w%d w%d", rng.IntN(3), rng.IntN(middle), rng.IntN(400))
			vec := []float32{rng.Float32() - 0.5, rng.Float32() - 0.5, rng.Float32() - 0.5}
			m := memory.Memory{ID: fmt.Sprint(seq), Namespace: "c", Type: memory.Raw, Text: text, Time: start.Add(time.Duration(seq) * time.Second)}
			ref.Add(seq, &m, vec)
			if ix != nil {
				ix.Add(seq, &m, vec)
			}
		}
	}
	same := func(when string) {
		require.Equal(t, ref.meta, ix.meta, when)
		require.Equal(t, ref.lens, ix.lens, when)
		require.Equal(t, ref.seqs, ix.seqs, when)
		require.Equal(t, ref.vecs, ix.vecs, when)
		require.Equal(t, ref.signs, ix.signs, when)
		require.Equal(t, ref.scan, ix.scan, when)
		for term, id := range ref.terms {
			var want, got [][2]uint32
			ref.post[id].each(func(s int32, tf uint32) { want = append(want, [2]uint32{uint32(s), tf}) })
			ix.post[ix.terms[term]].each(func(s int32, tf uint32) { got = append(got, [2]uint32{uint32(s), tf}) })
			require.Equal(t, want, got, "%s: term %s", when, term)
		}
	}
	add(3000)
	ix = throughSnapshot(t, ref)
	same("loaded")
	// Where the arrays are (testify compares pointers by what they
	// point to).
	at := func(b []byte) uintptr { return uintptr(unsafe.Pointer(&b[0])) }
	type list struct {
		at   uintptr
		size int
	}
	where := func() (slots [3]uintptr, lists map[string]list) {
		slots = [3]uintptr{at(raw(ix.meta)), at(raw(ix.vecs)), at(raw(ix.seqs))}
		lists = map[string]list{}
		for term, id := range ix.terms {
			lists[term] = list{at(ix.post[id].data), len(ix.post[id].data)}
		}
		return slots, lists
	}
	slots, lists := where()
	middle = 4
	add(slotRoom(3000) - 1)
	same("within the slots' room")
	now, moved := where()
	assert.Equal(t, slots, now, "the slots' arrays stayed")
	var stayed, gone int
	for term, was := range lists {
		switch now := moved[term]; {
		case now.size == was.size:
		case now.at == was.at:
			stayed++
		default:
			gone++
		}
	}
	assert.Positive(t, stayed, "lists grew in their room")
	assert.Positive(t, gone, "lists outgrew it")
	add(2)
	same("past the slots' room")
	now, _ = where()
	assert.NotEqual(t, slots, now, "the slots' arrays moved")
}

// A damaged dimension that its one slot's vector still fits the file
// with allocates no more than the file holds (the room for more slots
// is reckoned with it), and one whose product with the slots wraps
// round is refused, not a panic.
func TestSnapshotDamagedDimensionAllocatesNothing(t *testing.T) {
	const dim = 16381
	ix := newIndex()
	vec := make([]float32, dim)
	vec[0] = 1
	m := memory.Memory{ID: "1", Namespace: "d", Type: memory.Raw, Text: "alpha", Time: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	ix.Add(1, &m, vec)
	good := snapshotOf(t, map[string]*Namespace{"d": ix})
	var at []int
	for i := SnapshotHeader; i+8 <= len(good); i++ {
		if binary.LittleEndian.Uint64(good[i:]) == dim {
			at = append(at, i)
		}
	}
	require.NotEmpty(t, at, "the dimension is in the file")
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	reads := 0
	for _, i := range at {
		for _, v := range []uint64{uint64(len(good) / 8), uint64(len(good)/4 - 64), 0xAAAAAAAAAAAAAAAB} {
			bad := slices.Clone(good)
			binary.LittleEndian.PutUint64(bad[i:], v)
			_, _, err := readBytes(bad, ix.opts)
			require.Error(t, err, "a dimension of %d", v)
			reads++
		}
	}
	runtime.ReadMemStats(&after)
	// Each read may take what the file holds twice over, and its 1 MiB
	// buffer.
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(reads)*(uint64(len(good))*4+2<<20))
}
