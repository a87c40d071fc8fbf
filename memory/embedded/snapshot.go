package embedded

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"unsafe"
)

// The snapshot: the in-memory index written to a file beside the store
// (vera.index), so that a start reads it back instead of analysing every
// text again. It is keyed to the store's change log: every write to the
// memories also writes the rows it touched to the changes table, in the
// same transaction, under an increasing generation. A snapshot holds the
// index as of one generation; at start, the rows changed since are read
// again from the file. A snapshot that does not match (another store, a
// log pruned past it, another format or machine) or that is torn
// (its length or a checksum wrong) is never trusted: the index is rebuilt
// from the file.

// SnapshotName is the snapshot's file in the data directory.
const SnapshotName = "vera.index"

const (
	snapMagic   = "VERAIDX\x00"
	snapVersion = 2 // 2: lengths apart from the slots' meta
	// snapHeader is the header's size: magic, version, the sizes of the
	// raw structs (another build or machine lays them out otherwise), the
	// store's id, the generation, the body's length and checksum, and the
	// header's own checksum.
	snapHeader = 8 + 4 + 4 + 16 + 8 + 8 + 4 + 4
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// layout names the raw structs' sizes, so that a snapshot made where they
// differ is not read.
func layout() uint32 {
	return uint32(unsafe.Sizeof(slotMeta{}))<<16 | uint32(unsafe.Sizeof(blockMeta{}))
}

// snapshots reports whether this machine can read and write them: the raw
// arrays are written as they lie in memory, little-endian.
func snapshots() bool {
	return binary.NativeEndian.Uint16([]byte{1, 0}) == 1
}

// postHead is a term's postings, but for its blocks and data.
type postHead struct {
	n, maxTF uint32
	minLen   float32
	blocks   uint32
	data     uint32
}

// writeSnapshot writes the index as of generation gen to path,
// atomically: a temporary file, synced, renamed over the old one. The
// caller holds d.mu for reading.
func writeSnapshot(path, id string, gen int64, ns map[string]*index) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	defer f.Close()
	if _, err := f.Write(make([]byte, snapHeader)); err != nil {
		return err
	}
	crc := crc32.New(castagnoli)
	cw := &countWriter{w: io.MultiWriter(f, crc)}
	w := bufio.NewWriterSize(cw, 1<<20)
	names := make([]string, 0, len(ns))
	for name := range ns {
		names = append(names, name)
	}
	slices.Sort(names)
	writeU64(w, uint64(len(names)))
	for _, name := range names {
		writeIndex(w, name, ns[name])
	}
	if err := w.Flush(); err != nil {
		return err
	}
	h := make([]byte, 0, snapHeader)
	h = append(h, snapMagic...)
	h = binary.LittleEndian.AppendUint32(h, snapVersion)
	h = binary.LittleEndian.AppendUint32(h, layout())
	h = append(h, id...)
	h = binary.LittleEndian.AppendUint64(h, uint64(gen))
	h = binary.LittleEndian.AppendUint64(h, uint64(cw.n))
	h = binary.LittleEndian.AppendUint32(h, crc.Sum32())
	h = binary.LittleEndian.AppendUint32(h, crc32.Checksum(h, castagnoli))
	if _, err := f.WriteAt(h, 0); err != nil {
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

// writeIndex writes one namespace's index. Writes to w fail together at
// its Flush.
func writeIndex(w *bufio.Writer, name string, ix *index) {
	writeBytes(w, []byte(name))
	unordered := uint64(0)
	if ix.unordered {
		unordered = 1
	}
	for _, v := range []uint64{uint64(len(ix.meta)), uint64(ix.live), uint64(ix.total), unordered, uint64(ix.newest), uint64(ix.dim), uint64(ix.nvec)} {
		writeU64(w, v)
	}
	w.Write(raw(ix.meta))
	w.Write(raw(ix.lens))
	w.Write(raw(ix.seqs))
	writeU64(w, uint64(len(ix.byTime)))
	w.Write(raw(ix.byTime))
	w.Write(raw(ix.vecs))
	w.Write(raw(ix.signs))
	// The terms by id: their texts, then their postings' heads, blocks
	// and data, each run as one array.
	words := make([]string, len(ix.post))
	for t, id := range ix.terms {
		words[id] = t
	}
	lens := make([]uint32, len(words))
	heads := make([]postHead, len(words))
	var text, blocks, data uint64
	for i, t := range words {
		p := &ix.post[i]
		lens[i] = uint32(len(t))
		heads[i] = postHead{n: uint32(p.n), maxTF: p.maxTF, minLen: p.minLen, blocks: uint32(len(p.blocks)), data: uint32(len(p.data))}
		text += uint64(len(t))
		blocks += uint64(len(p.blocks))
		data += uint64(len(p.data))
	}
	writeU64(w, uint64(len(words)))
	w.Write(raw(lens))
	w.Write(raw(heads))
	writeU64(w, text)
	for _, t := range words {
		w.WriteString(t)
	}
	writeU64(w, blocks)
	for i := range ix.post {
		w.Write(raw(ix.post[i].blocks))
	}
	writeU64(w, data)
	for i := range ix.post {
		w.Write(ix.post[i].data)
	}
}

// readSnapshot reads the snapshot at path, made for store id, if it is
// whole: its header and body checksums and its length must match.
func readSnapshot(path, id string) (map[string]*index, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	h := make([]byte, snapHeader)
	if _, err := io.ReadFull(f, h); err != nil {
		return nil, 0, fmt.Errorf("snapshot header: %w", err)
	}
	le := binary.LittleEndian
	switch {
	case le.Uint32(h[snapHeader-4:]) != crc32.Checksum(h[:snapHeader-4], castagnoli):
		return nil, 0, errors.New("snapshot header: checksum")
	case string(h[:8]) != snapMagic || le.Uint32(h[8:]) != snapVersion || le.Uint32(h[12:]) != layout():
		return nil, 0, errors.New("snapshot of another format")
	case string(h[16:32]) != id:
		return nil, 0, errors.New("snapshot of another store")
	}
	gen, size, sum := int64(le.Uint64(h[32:])), int64(le.Uint64(h[40:])), le.Uint32(h[48:])
	st, err := f.Stat()
	if err != nil {
		return nil, 0, err
	}
	if st.Size() != snapHeader+size {
		return nil, 0, fmt.Errorf("snapshot torn: %d bytes of %d", st.Size()-snapHeader, size)
	}
	crc := crc32.New(castagnoli)
	r := &snapReader{r: bufio.NewReaderSize(io.TeeReader(io.LimitReader(f, size), crc), 1<<20), left: size}
	n := r.u64()
	ns := make(map[string]*index, min(n, 1<<16))
	for range n {
		if r.err != nil {
			break
		}
		name, ix := readIndex(r)
		ns[name] = ix
	}
	if r.err != nil {
		return nil, 0, fmt.Errorf("snapshot body: %w", r.err)
	}
	if n, err := io.Copy(io.Discard, r.r); err != nil || n > 0 {
		return nil, 0, fmt.Errorf("snapshot body: %d bytes past its end (%v)", n, err)
	}
	if crc.Sum32() != sum {
		return nil, 0, errors.New("snapshot body: checksum")
	}
	// Only now are the postings trusted enough to be decoded.
	for _, ix := range ns {
		ix.commonAll()
	}
	return ns, gen, nil
}

// readIndex reads what writeIndex wrote.
func readIndex(r *snapReader) (string, *index) {
	name := string(r.bytes())
	var v [7]uint64
	for i := range v {
		v[i] = r.u64()
	}
	slots := r.count(v[0])
	ix := &index{live: int(v[1]), total: int64(v[2]), unordered: v[3] == 1, newest: int64(v[4]), dim: int(v[5]), nvec: int(v[6])}
	ix.words = (ix.dim + 63) / 64
	more := slotRoom(slots)
	ix.meta = readRoom[slotMeta](r, slots, more)
	ix.lens = readRoom[float32](r, slots, more)
	ix.seqs = readRoom[int64](r, slots, more)
	ix.byTime = readRoom[int32](r, r.count(r.u64()), more)
	// A damaged dimension makes these negative or past the file:
	// readRaw refuses both.
	ix.vecs = readRoom[float32](r, slots*ix.dim, more*ix.dim)
	ix.signs = readRoom[uint64](r, slots*ix.words, more*ix.words)
	terms := r.count(r.u64())
	lens := readRaw[uint32](r, terms)
	heads := readRaw[postHead](r, terms)
	text := readRaw[byte](r, r.count(r.u64()))
	blocks := readRaw[blockMeta](r, r.count(r.u64()))
	data := readRaw[byte](r, r.count(r.u64()))
	if r.err != nil {
		return name, ix
	}
	ix.terms = make(map[string]int32, terms)
	ix.post = make([]postings, terms)
	// The lists are carved out of two shared arrays, each with room to
	// grow in place (dataRoom, blockRoom): a list that outgrows its room
	// moves to an array of its own, and leaves its old copy in the shared
	// one, which is freed once no list holds a part of it (a compaction
	// makes every list anew). One array for all, where each had its own,
	// spares the start a first touch of each small array's pages.
	var at, bat, dat, dataMore, blocksMore int
	for i := range terms {
		l, hd := int(lens[i]), heads[i]
		if at+l > len(text) || bat+int(hd.blocks) > len(blocks) || dat+int(hd.data) > len(data) {
			r.err = errors.New("postings past their arrays")
			return name, ix
		}
		at, bat, dat = at+l, bat+int(hd.blocks), dat+int(hd.data)
		dataMore += dataRoom(int(hd.data))
		blocksMore += blockRoom(int(hd.blocks))
	}
	dataAll := hugeSlice[byte](0, len(data)+dataMore)
	blocksAll := hugeSlice[blockMeta](0, len(blocks)+blocksMore)
	at, bat, dat = 0, 0, 0
	for i := range terms {
		l, hd := int(lens[i]), heads[i]
		ix.terms[string(text[at:at+l])] = int32(i)
		ix.post[i] = postings{
			data:   carve(&dataAll, data[dat:dat+int(hd.data)], dataRoom(int(hd.data))),
			blocks: carve(&blocksAll, blocks[bat:bat+int(hd.blocks)], blockRoom(int(hd.blocks))),
			n:      int32(hd.n), maxTF: hd.maxTF, minLen: hd.minLen,
		}
		at, bat, dat = at+l, bat+int(hd.blocks), dat+int(hd.data)
	}
	ix.listScan()
	ix.listKinds()
	ix.bySeq = make(map[int64]int32, min(max(ix.live, 0), len(ix.seqs)))
	for s, seq := range ix.seqs {
		if ix.meta[s].typ != 0 {
			ix.bySeq[seq] = int32(s)
		}
	}
	if len(ix.meta) != len(ix.seqs) || len(ix.lens) != len(ix.meta) || ix.unordered && len(ix.byTime) != len(ix.meta) {
		r.err = errors.New("inconsistent index")
	}
	return name, ix
}

// slotRoom is how many slots a loaded index has room for past its n
// without copying its arrays: an eighth more (a small namespace copies
// its few slots, and a store of many users keeps no room for thousands
// in each).
func slotRoom(n int) int {
	return n / 8
}

// dataRoom is the room a loaded list of n bytes of postings gets to grow
// in place: a quarter more, and at least 16 (a few postings).
func dataRoom(n int) int {
	if n == 0 {
		return 0
	}
	return max(n/4, 16)
}

// blockRoom is the room a loaded list of n blocks gets: a quarter more,
// and at least one (a block holds 64 postings, which dataRoom's 16 bytes
// do not fill).
func blockRoom(n int) int {
	if n == 0 {
		return 0
	}
	return n/4 + 1
}

// carve copies s to the end of *all, and returns the copy, its capacity
// reaching to the end of its room (room more values): appending to it
// fills its room, then moves it. *all must have room for both.
func carve[T any](all *[]T, s []T, room int) []T {
	if len(s) == 0 {
		return nil
	}
	at := len(*all)
	*all = append(*all, s...)
	end := at + len(s) + room
	*all = (*all)[:end]
	return (*all)[at : at+len(s) : end]
}

// raw views a slice of fixed-size values as its bytes.
func raw[T any](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*int(unsafe.Sizeof(s[0])))
}

// readRaw reads n values of T written by raw. They must fit in what is
// left of the body: a damaged length, read before the checksum can be
// checked, must not allocate more than the file holds.
func readRaw[T any](r *snapReader, n int) []T {
	return readRoom[T](r, n, 0)
}

// readRoom is readRaw with room for more values after the n read (at
// most n more: a damaged dimension, which more is reckoned with, must not
// allocate more than the file's size again): a slot's array gets room for
// the slots added after the start, so that the first turns stored do not
// copy it whole (see grow).
func readRoom[T any](r *snapReader, n, more int) []T {
	if r.err != nil || n == 0 {
		return nil
	}
	var zero T
	if size := int64(unsafe.Sizeof(zero)); n < 0 || int64(n) > r.left/size {
		r.err = fmt.Errorf("%d values of %d bytes where %d bytes are left", n, size, r.left)
		return nil
	}
	s := hugeSlice[T](n, n+min(max(more, 0), n))
	if _, err := io.ReadFull(r.r, raw(s)); err != nil {
		r.err = err
	}
	r.left -= int64(len(raw(s)))
	return s
}

// snapReader reads a snapshot's body, keeping its first error; left is
// how many of its bytes are still to read.
type snapReader struct {
	r    *bufio.Reader
	err  error
	left int64
}

func (r *snapReader) u64() uint64 {
	var b [8]byte
	if r.err == nil {
		_, r.err = io.ReadFull(r.r, b[:])
		r.left -= 8
	}
	return binary.LittleEndian.Uint64(b[:])
}

// count is n as a length: at most one value a byte left in the body (a
// damaged length must not allocate terabytes).
func (r *snapReader) count(n uint64) int {
	if r.err == nil && n > uint64(max(r.left, 0)) {
		r.err = fmt.Errorf("a length of %d where %d bytes are left", n, r.left)
	}
	if r.err != nil {
		return 0
	}
	return int(n)
}

func (r *snapReader) bytes() []byte {
	return readRaw[byte](r, r.count(r.u64()))
}

func writeU64(w *bufio.Writer, v uint64) {
	w.Write(binary.LittleEndian.AppendUint64(nil, v))
}

func writeBytes(w *bufio.Writer, b []byte) {
	writeU64(w, uint64(len(b)))
	w.Write(b)
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
