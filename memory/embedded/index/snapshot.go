package index

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"slices"
	"unsafe"
)

// The snapshot: every namespace's index written out, so that a start
// reads it back instead of analysing every text again. It holds the
// indexes as of one generation of the store's changes (the store keys it
// to its change log, and reads the rows changed since again). A snapshot
// made for another store, in another format or on another machine, or
// torn (its length or a checksum wrong) is refused.
//
// The header is: magic, version, the sizes of the raw structs (another
// build or machine lays them out otherwise), the store's id, the
// generation, the body's length and checksum, and the header's own
// checksum. The body is the namespaces' count, then each namespace's
// index (writeIndex).

const (
	snapMagic   = "VERAIDX\x00"
	snapVersion = 2 // 2: lengths apart from the slots' meta
	// SnapshotHeader is the size of a snapshot's header.
	SnapshotHeader = 8 + 4 + 4 + 16 + 8 + 8 + 4 + 4
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// layout names the raw structs' sizes, so that a snapshot made where they
// differ is not read.
func layout() uint32 {
	return uint32(unsafe.Sizeof(slotMeta{}))<<16 | uint32(unsafe.Sizeof(blockMeta{}))
}

// Snapshots reports whether this machine can read and write them: the raw
// arrays are written as they lie in memory, little-endian.
func Snapshots() bool {
	return binary.NativeEndian.Uint16([]byte{1, 0}) == 1
}

// postHead is a term's postings, but for its blocks and data.
type postHead struct {
	n, maxTF uint32
	minLen   float32
	blocks   uint32
	data     uint32
}

// WriteSnapshot writes the indexes ns, by namespace, as of generation gen
// of the store id (16 bytes), to f from its start: the header's room, the
// body, then the header, which holds the body's length and checksum.
// Making f durable, and putting it in place, is the caller's. The caller
// keeps ns from changing meanwhile.
func WriteSnapshot(f interface {
	io.Writer
	io.WriterAt
}, id string, gen int64, ns map[string]*Namespace) error {
	if len(id) != 16 {
		return fmt.Errorf("snapshot of store %q: its id is not 16 bytes", id)
	}
	if _, err := f.Write(make([]byte, SnapshotHeader)); err != nil {
		return err
	}
	crc := crc32.New(castagnoli)
	cw := &countWriter{w: io.MultiWriter(f, crc)}
	bw := bufio.NewWriterSize(cw, 1<<20)
	w := snapWriter{bw}
	names := make([]string, 0, len(ns))
	for name := range ns {
		names = append(names, name)
	}
	slices.Sort(names)
	w.u64(uint64(len(names)))
	for _, name := range names {
		writeIndex(w, name, ns[name])
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	_, err := f.WriteAt(snapshotHeader(id, gen, cw.n, crc.Sum32()), 0)
	return err
}

// snapshotHeader is the header of a snapshot of store id at generation
// gen whose body is size bytes of checksum sum.
func snapshotHeader(id string, gen, size int64, sum uint32) []byte {
	h := make([]byte, 0, SnapshotHeader)
	h = append(h, snapMagic...)
	h = binary.LittleEndian.AppendUint32(h, snapVersion)
	h = binary.LittleEndian.AppendUint32(h, layout())
	h = append(h, id...)
	h = binary.LittleEndian.AppendUint64(h, uint64(gen))
	h = binary.LittleEndian.AppendUint64(h, uint64(size))
	h = binary.LittleEndian.AppendUint32(h, sum)
	return binary.LittleEndian.AppendUint32(h, crc32.Checksum(h, castagnoli))
}

// writeIndex writes one namespace's index.
func writeIndex(w snapWriter, name string, ix *Namespace) {
	w.bytes([]byte(name))
	unordered := uint64(0)
	if ix.unordered {
		unordered = 1
	}
	for _, v := range []uint64{uint64(len(ix.meta)), uint64(ix.live), uint64(ix.total), unordered, uint64(ix.newest), uint64(ix.dim), uint64(ix.nvec)} {
		w.u64(v)
	}
	w.write(raw(ix.meta))
	w.write(raw(ix.lens))
	w.write(raw(ix.seqs))
	w.u64(uint64(len(ix.byTime)))
	w.write(raw(ix.byTime))
	w.write(raw(ix.vecs))
	w.write(raw(ix.signs))
	ix.writeTerms(w)
}

// writeTerms writes the terms by id: their texts, then their postings'
// heads, blocks and data, each run as one array.
func (ix *Namespace) writeTerms(w snapWriter) {
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
	w.u64(uint64(len(words)))
	w.write(raw(lens))
	w.write(raw(heads))
	w.u64(text)
	for _, t := range words {
		w.writeString(t)
	}
	w.u64(blocks)
	for i := range ix.post {
		w.write(raw(ix.post[i].blocks))
	}
	w.u64(data)
	for i := range ix.post {
		w.write(ix.post[i].data)
	}
}

// ReadSnapshot reads the snapshot r holds, size bytes in all, made for
// store id, if it is whole: its header and body checksums and its length
// must match. It returns the indexes by namespace, tuned by o, and the
// generation they hold.
func ReadSnapshot(r io.Reader, size int64, id string, o Options) (map[string]*Namespace, int64, error) {
	h := make([]byte, SnapshotHeader)
	if _, err := io.ReadFull(r, h); err != nil {
		return nil, 0, fmt.Errorf("snapshot header: %w", err)
	}
	le := binary.LittleEndian
	switch {
	case le.Uint32(h[SnapshotHeader-4:]) != crc32.Checksum(h[:SnapshotHeader-4], castagnoli):
		return nil, 0, errors.New("snapshot header: checksum")
	case string(h[:8]) != snapMagic || le.Uint32(h[8:]) != snapVersion || le.Uint32(h[12:]) != layout():
		return nil, 0, errors.New("snapshot of another format")
	case string(h[16:32]) != id:
		return nil, 0, errors.New("snapshot of another store")
	}
	gen, body, sum := int64(le.Uint64(h[32:])), int64(le.Uint64(h[40:])), le.Uint32(h[48:])
	if size != SnapshotHeader+body {
		return nil, 0, fmt.Errorf("snapshot torn: %d bytes of %d", size-SnapshotHeader, body)
	}
	ns, err := readBody(r, body, sum, o.withDefaults())
	if err != nil {
		return nil, 0, err
	}
	return ns, gen, nil
}

// readBody reads a snapshot's body of size bytes and checksum sum.
func readBody(body io.Reader, size int64, sum uint32, o Options) (map[string]*Namespace, error) {
	crc := crc32.New(castagnoli)
	r := &snapReader{r: bufio.NewReaderSize(io.TeeReader(io.LimitReader(body, size), crc), 1<<20), left: size}
	n := r.u64()
	ns := make(map[string]*Namespace, min(n, 1<<16))
	for range n {
		if r.err != nil {
			break
		}
		name, ix := readIndex(r, o)
		ns[name] = ix
	}
	if r.err != nil {
		return nil, fmt.Errorf("snapshot body: %w", r.err)
	}
	if n, err := io.Copy(io.Discard, r.r); err != nil || n > 0 {
		return nil, fmt.Errorf("snapshot body: %d bytes past its end (%v)", n, err)
	}
	if crc.Sum32() != sum {
		return nil, errors.New("snapshot body: checksum")
	}
	// Only now are the postings trusted enough to be decoded.
	for _, ix := range ns {
		ix.commonAll()
	}
	return ns, nil
}

// readIndex reads what writeIndex wrote.
func readIndex(r *snapReader, o Options) (string, *Namespace) {
	name := string(r.bytes())
	ix := readSlots(r, o)
	if ix.readTerms(r); r.err != nil {
		return name, ix
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

// readSlots reads an index's counts and its slots' arrays.
func readSlots(r *snapReader, o Options) *Namespace {
	var v [7]uint64
	for i := range v {
		v[i] = r.u64()
	}
	slots := r.count(v[0])
	ix := &Namespace{opts: o, live: int(v[1]), total: int64(v[2]), unordered: v[3] == 1, newest: int64(v[4]), dim: int(v[5]), nvec: int(v[6])}
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
	return ix
}

// readTerms reads what writeTerms wrote.
//
// The lists are carved out of two shared arrays, each with room to grow
// in place (dataRoom, blockRoom): a list that outgrows its room moves to
// an array of its own, and leaves its old copy in the shared one, which
// is freed once no list holds a part of it (a compaction makes every list
// anew). One array for all, where each had its own, spares the start a
// first touch of each small array's pages.
func (ix *Namespace) readTerms(r *snapReader) {
	terms := r.count(r.u64())
	lens := readRaw[uint32](r, terms)
	heads := readRaw[postHead](r, terms)
	text := readRaw[byte](r, r.count(r.u64()))
	blocks := readRaw[blockMeta](r, r.count(r.u64()))
	data := readRaw[byte](r, r.count(r.u64()))
	if r.err != nil {
		return
	}
	ix.terms = make(map[string]int32, terms)
	ix.post = make([]postings, terms)
	var at, bat, dat, dataMore, blocksMore int
	for i := range terms {
		l, hd := int(lens[i]), heads[i]
		if at+l > len(text) || bat+int(hd.blocks) > len(blocks) || dat+int(hd.data) > len(data) {
			r.err = errors.New("postings past their arrays")
			return
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
}
