package index

import (
	"math/bits"
	"slices"
	"sort"

	"github.com/vera-proxy/vera/memory"
	"github.com/vera-proxy/vera/text"
)

// Add indexes m as row seq of the file (replacing what seq held). vec is
// the normalised vector (Normalize) or nil.
func (ix *Namespace) Add(seq int64, m *memory.Memory, vec []float32) {
	ix.AddTerms(seq, m, vec, text.Terms(m.Text))
}

// AddTerms is Add with m's terms already found (text.Terms(m.Text)):
// loading finds them on every core.
func (ix *Namespace) AddTerms(seq int64, m *memory.Memory, vec []float32, terms []string) {
	ix.Remove(seq)
	ix.changes++
	s := int32(len(ix.meta))
	ix.addPostings(s, terms)
	ix.total += int64(len(terms))
	ix.live++
	hasVec := ix.takesVector(vec)
	ts := m.Time.UnixNano()
	ix.meta = append(grow(ix.meta, 1), slotMeta{ts: ts, typ: typeBit(m.Type), vec: hasVec, noTokens: m.Tokens <= 0})
	ix.scan = append(grow(ix.scan, 1), scanByte(&ix.meta[s]))
	ix.lens = append(grow(ix.lens, 1), float32(len(terms)))
	ix.seqs = append(grow(ix.seqs, 1), seq)
	ix.bySeq[seq] = s
	if t := typeBit(m.Type); t != 0 && t != typeBit(memory.Raw) {
		k := bits.TrailingZeros8(t)
		ix.kinds[k] = append(ix.kinds[k], s)
	}
	ix.inTime(s, ts)
	ix.appendVector(vec, hasVec)
}

// addPostings adds the new slot s, of terms, to its terms' postings (and
// their arrays or bits).
func (ix *Namespace) addPostings(s int32, terms []string) {
	if ix.tf == nil || len(ix.tf) > 1024 {
		// clear costs as much as the map's largest size: one huge
		// memory must not slow every later add.
		ix.tf = map[int32]uint32{}
	}
	tf := ix.tf
	clear(tf)
	for _, t := range terms {
		id, ok := ix.terms[t]
		if !ok {
			id = int32(len(ix.post))
			ix.terms[t] = id
			ix.post = append(ix.post, postings{})
		}
		tf[id]++
	}
	n := float32(len(terms))
	ix.adding = n
	for id, c := range tf {
		ix.post[id].add(s, c, n)
		ix.noteCommon(id, s, c)
	}
}

// takesVector says whether the slot being added keeps vec (nil, or of
// another dimension, it does not), and makes the vectors' arrays for the
// first.
func (ix *Namespace) takesVector(vec []float32) bool {
	if vec == nil || ix.dim != 0 && len(vec) != ix.dim {
		return false
	}
	if ix.dim == 0 {
		ix.dim = len(vec)
		ix.words = (ix.dim + 63) / 64
		room := max(ix.room, len(ix.meta)+1)
		ix.vecs = make([]float32, len(ix.meta)*ix.dim, room*ix.dim)
		ix.signs = make([]uint64, len(ix.meta)*ix.words, room*ix.words)
	}
	ix.nvec++
	return true
}

// appendVector gives the slot just added its vector and sign bits (zero
// without one), once the index has a dimension.
func (ix *Namespace) appendVector(vec []float32, hasVec bool) {
	if ix.dim == 0 {
		return
	}
	ix.vecs, ix.signs = grow(ix.vecs, ix.dim), grow(ix.signs, ix.words)
	if hasVec {
		ix.vecs = append(ix.vecs, vec...)
		ix.signs = append(ix.signs, signBits(vec, ix.words)...)
	} else {
		ix.vecs = append(ix.vecs, make([]float32, ix.dim)...)
		ix.signs = append(ix.signs, make([]uint64, ix.words)...)
	}
}

// grow returns s with room for n more values: where it has none, a new
// array with a quarter more (as append would grow it), s copied in, huge
// pages asked for first. A slot's arrays grow so: on a large store they
// hold tens of megabytes, and the first touch of each 4 KiB page of a new
// one, under the store's lock, would hold every search up (hugePages).
func grow[T any](s []T, n int) []T {
	if cap(s)-len(s) >= n {
		return s
	}
	t := hugeSlice[T](len(s), len(s)+max(len(s)/4, n, 256))
	copy(t, s)
	return t
}

// hugeSlice is make([]T, n, c) with huge pages asked for first over its
// whole capacity, before anything touches it (hugePages).
func hugeSlice[T any](n, c int) []T {
	s := make([]T, n, c)
	hugePages(raw(s[:c]))
	return s
}

// inTime places the new slot s, of time ts, in time order.
func (ix *Namespace) inTime(s int32, ts int64) {
	switch {
	case !ix.unordered && (s == 0 || ts >= ix.newest):
		ix.newest = ts
	case !ix.unordered:
		// The first memory out of order: from now on the time order is
		// kept apart.
		ix.unordered = true
		ix.byTime = make([]int32, s, cap(ix.meta))
		for i := range ix.byTime {
			ix.byTime[i] = int32(i)
		}
		fallthrough
	default:
		ix.newest = max(ix.newest, ts)
		i := sort.Search(len(ix.byTime), func(i int) bool { return ix.meta[ix.byTime[i]].ts > ts })
		ix.byTime = slices.Insert(ix.byTime, i, s)
	}
}

// Remove drops the memory of row seq, and says whether the index held
// it. Its postings stay until the next compaction (Scrub); searches skip
// its slot.
func (ix *Namespace) Remove(seq int64) bool {
	s, ok := ix.bySeq[seq]
	if !ok {
		return false
	}
	ix.removals++
	ix.changes++
	ix.total -= int64(ix.lens[s])
	ix.live--
	if ix.meta[s].vec {
		ix.nvec--
	}
	// The time stays: slots stay in time order for latest's binary
	// search; type 0 marks the slot removed.
	ix.meta[s] = slotMeta{ts: ix.meta[s].ts}
	ix.scan[s] = 0
	delete(ix.bySeq, seq)
	if dead := len(ix.meta) - ix.live; dead > 1024 && dead > ix.live/4 {
		ix.compact()
	}
	return true
}

// SetVector sets the vector of row seq (normalised; nil for none), in
// place.
func (ix *Namespace) SetVector(seq int64, vec []float32) {
	s, ok := ix.bySeq[seq]
	if !ok {
		return
	}
	m := &ix.meta[s]
	if vec == nil || ix.dim > 0 && len(vec) != ix.dim {
		return
	}
	if ix.dim == 0 {
		ix.dim, ix.words = len(vec), (len(vec)+63)/64
		room := max(ix.room, len(ix.meta))
		ix.vecs = make([]float32, len(ix.meta)*ix.dim, room*ix.dim)
		ix.signs = make([]uint64, len(ix.meta)*ix.words, room*ix.words)
	}
	ix.changes++
	copy(ix.vecs[int(s)*ix.dim:], vec)
	copy(ix.signs[int(s)*ix.words:], signBits(vec, ix.words))
	if !m.vec {
		m.vec = true
		ix.scan[s] |= hasVector
		ix.nvec++
	}
}

// DropVectors forgets every vector (the embedding model changed): the
// memories stay, searchable lexically, until they are embedded again.
func (ix *Namespace) DropVectors() {
	ix.changes++
	ix.dim, ix.words, ix.nvec = 0, 0, 0
	ix.vecs, ix.signs = nil, nil
	for s := range ix.meta {
		ix.meta[s].vec = false
		ix.scan[s] &^= hasVector
	}
}

// compact renumbers slots to drop removed documents, and their postings.
func (ix *Namespace) compact() {
	ix.removals++
	ix.changes++
	remap := ix.compactSlots()
	for t := range ix.post {
		var q postings
		ix.post[t].each(func(slot int32, tf uint32) {
			if r := remap[slot]; r >= 0 {
				q.add(r, tf, ix.lens[r])
			}
		})
		ix.post[t] = q
	}
	for seq, s := range ix.bySeq {
		ix.bySeq[seq] = remap[s]
	}
	if ix.unordered {
		bt := ix.byTime[:0]
		for _, s := range ix.byTime {
			if r := remap[s]; r >= 0 {
				bt = append(bt, r)
			}
		}
		ix.byTime = bt
	}
	ix.scan = make([]uint8, 0, cap(ix.meta))
	ix.listScan()
	ix.listKinds()
	ix.commonAll()
}

// compactSlots moves the live slots' arrays to new ones, without the
// removed slots, and returns each old slot's new one (-1: removed).
func (ix *Namespace) compactSlots() []int32 {
	remap := make([]int32, len(ix.meta))
	meta := make([]slotMeta, 0, ix.live+ix.live/4)
	lens := make([]float32, 0, cap(meta))
	seqs := make([]int64, 0, cap(meta))
	var vecs []float32
	var signs []uint64
	if ix.dim > 0 {
		vecs, signs = make([]float32, 0, cap(meta)*ix.dim), make([]uint64, 0, cap(meta)*ix.words)
	}
	for s := range ix.meta {
		if ix.meta[s].typ == 0 {
			remap[s] = -1
			continue
		}
		remap[s] = int32(len(meta))
		meta = append(meta, ix.meta[s])
		lens = append(lens, ix.lens[s])
		seqs = append(seqs, ix.seqs[s])
		if ix.dim > 0 {
			vecs = append(vecs, ix.vecs[s*ix.dim:(s+1)*ix.dim]...)
			signs = append(signs, ix.signs[s*ix.words:(s+1)*ix.words]...)
		}
	}
	ix.meta, ix.lens, ix.seqs, ix.vecs, ix.signs = meta, lens, seqs, vecs, signs
	return remap
}

// Scrub drops what removed rows leave in the index: their slots, and the
// words no row holds any longer (a snapshot would still name them).
func (ix *Namespace) Scrub() {
	if ix.live < len(ix.meta) {
		ix.compact()
	}
	post := make([]postings, 0, len(ix.post))
	terms := make(map[string]int32, len(ix.terms))
	for t, id := range ix.terms {
		if ix.post[id].n > 0 {
			terms[t] = int32(len(post))
			post = append(post, ix.post[id])
		}
	}
	if len(post) == len(ix.post) {
		return
	}
	ix.post, ix.terms = post, terms
	ix.removals++
	ix.changes++
	ix.commonAll()
}
