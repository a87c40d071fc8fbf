package embedded

import (
	"cmp"
	"math"
	"math/bits"
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/vera-proxy/vera/memory"
)

// BM25 parameters (Robertson's usual values).
const (
	bm25K1 = 1.2
	bm25B  = 0.75
	// rrfK is the rank constant of reciprocal rank fusion, as in Qdrant's
	// and Elasticsearch's hybrid search.
	rrfK = 60
	// exactBelow: namespaces with fewer vectors than this are searched
	// exactly; larger ones are first ranked by the Hamming distance of
	// sign bits, then the best candidates are re-scored exactly.
	exactBelow = 4096
	// oversample is how many binary candidates are re-scored per result.
	oversample = 4
	minRescore = 200
)

// parallelAbove: namespaces with at least this many slots scan on every
// core, and run the vector and lexical sides side by side (a variable for
// the tests).
var parallelAbove = 32768

// index is the in-memory search side of one namespace: compressed
// postings for BM25 and the normalised vectors with their sign bits, per
// slot. It holds no text: a slot names its memory's row in the file (its
// seq), and the hits of a search are read from the file. SQLite is the
// source of truth; the index is loaded from its snapshot or rebuilt from
// the file at start.
type index struct {
	meta []slotMeta // per slot, typ 0 when removed
	// scan is, per slot, what the vector scan's filter reads of meta
	// (scanByte): a slot near enough to enter the scan's heap is checked
	// on one byte, 16 times denser than meta, which a chat reads cold.
	scan []uint8
	// lens is each slot's length in terms, apart from meta: scoring
	// reads it for every posting, and a small array stays in cache.
	lens  []float32
	seqs  []int64         // per slot, the memory's row in the file
	bySeq map[int64]int32 // seq → slot, of live slots
	live  int
	terms map[string]int32 // term → term id
	post  []postings       // term id → postings
	// common holds the frequencies of the commonest terms by slot
	// (common.go).
	common map[int32][]uint8
	// champions are the common terms' champions (common.go).
	champions map[int32]*champions
	// strongest are the common terms' strongest slots (common.go).
	strongest map[int32]*strongest
	// present holds a bit a slot for the terms in at least 1/midShare
	// of the slots but not common (common.go).
	present map[int32][]uint64
	// adding is the length of the slot being added, until lens has it.
	adding float32
	total  int64 // sum of live doc lengths, in terms
	// unordered is set once a memory arrives older than one before it:
	// until then slots are in time order and latest reads from the end.
	// From then on byTime holds the slots in time order.
	unordered bool
	byTime    []int32
	newest    int64 // the latest time added, removed or not
	// kinds lists the slots of each type but raw (by its typeBit's bit),
	// in slot order: the rules, the profile and the curated memories
	// are found without a walk past every turn.
	kinds [8][]int32
	// pruned counts the blocks of postings lexical skipped, unread the
	// candidates it dismissed without reading their length, and floors
	// the dense rankings that started from their champions' floor, and
	// marked those that took their candidates from the strongest cells
	// (for tests).
	pruned, unread, floors, marked atomic.Int64
	// removals counts the changes that drop or renumber slots (a
	// removal, an upsert of an indexed row, a compaction): a lexical
	// ranking made at one count holds at that count for the slots it saw.
	// Documents added since are not in it, nor, with Query.Around, the
	// share they would lend a ranked neighbour: it is the ranking of the
	// index as it was.
	removals uint64
	// changes counts every change of the index (an add, a removal, a
	// vector set or dropped, a compaction): a vector ranking holds only at
	// its count.
	changes uint64

	dim   int
	words int       // uint64 words of sign bits per vector
	vecs  []float32 // slot*dim, normalised
	signs []uint64  // slot*words
	nvec  int

	// room is how many vectors vecs and signs get room for once the
	// dimension is known (loading sets it; newIndexFor).
	room int
	tf   map[int32]uint32 // scratch for add
}

// slotMeta is what scans read per slot, in a small dense array so a scan
// of 100k slots stays in cache.
type slotMeta struct {
	ts       int64
	typ      uint8 // typeBit; 0 for a removed slot
	vec      bool
	noTokens bool // its token count is unknown yet (the backfill counts it)
}

func typeBit(t memory.Type) uint8 {
	switch t {
	case memory.Raw:
		return 1
	case memory.Curated:
		return 2
	case memory.Rule:
		return 4
	case memory.Forgotten:
		return 8
	case memory.Profile:
		return 16
	}
	return 0
}

// slotFilter is a memory.Filter compiled for slotMeta (the namespace is
// the index's own).
type slotFilter struct {
	types        uint8
	since, until int64
	noVector     bool
}

func compile(f *memory.Filter) slotFilter {
	sf := slotFilter{types: 0xff, since: -1 << 63, until: 1<<63 - 1, noVector: f.NoVector}
	if len(f.Types) > 0 {
		sf.types = 0
		for _, t := range f.Types {
			sf.types |= typeBit(t)
		}
	}
	if !f.Since.IsZero() {
		sf.since = f.Since.UnixNano()
	}
	if !f.Until.IsZero() {
		sf.until = f.Until.UnixNano()
	}
	return sf
}

func (sf *slotFilter) ok(m *slotMeta) bool {
	return m.typ&sf.types != 0 && m.ts >= sf.since && m.ts < sf.until && !(sf.noVector && m.vec)
}

// scanByte is slot meta m's byte of index.scan: its typeBit (bits 0-4),
// and hasVector when it has a vector.
func scanByte(m *slotMeta) uint8 {
	if m.vec {
		return m.typ | hasVector
	}
	return m.typ
}

const hasVector = 0x80

// timeless says whether sf passes a slot on its type alone.
func (sf *slotFilter) timeless() bool {
	return sf.since == -1<<63 && sf.until == 1<<63-1
}

// listScan makes index.scan again from meta.
func (ix *index) listScan() {
	ix.scan = slices.Grow(ix.scan[:0], len(ix.meta))[:len(ix.meta)]
	for s := range ix.meta {
		ix.scan[s] = scanByte(&ix.meta[s])
	}
}

func newIndex() *index {
	return &index{bySeq: map[int64]int32{}, terms: map[string]int32{}}
}

// newIndexFor returns an index with room for n memories and some more:
// loading a large store then grows no array (each growth copies it whole),
// and neither do the first turns written after it (a growth of the arrays
// of a million memories holds the index for half a second). The vectors,
// the largest array, get less headroom than the rest: the garbage
// collector counts what is reserved.
func newIndexFor(n int) *index {
	room := n + n/4 + 64
	return &index{bySeq: make(map[int64]int32, room), terms: map[string]int32{},
		seqs: make([]int64, 0, room), meta: make([]slotMeta, 0, room), scan: make([]uint8, 0, room), lens: make([]float32, 0, room), room: n + n/16 + 64}
}

// add indexes m as row seq of the file (replacing what seq held). vec is
// the normalised vector or nil.
func (ix *index) add(seq int64, m *memory.Memory, vec []float32) {
	ix.addTerms(seq, m, vec, memory.Terms(m.Text))
}

// addTerms is add with m's terms already found (memory.Terms(m.Text)):
// loading finds them on every core.
func (ix *index) addTerms(seq int64, m *memory.Memory, vec []float32, terms []string) {
	ix.remove(seq)
	ix.changes++
	s := int32(len(ix.meta))
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
	ix.total += int64(len(terms))
	ix.live++
	hasVec := vec != nil && (ix.dim == 0 || len(vec) == ix.dim)
	if hasVec {
		if ix.dim == 0 {
			ix.dim = len(vec)
			ix.words = (ix.dim + 63) / 64
			room := max(ix.room, len(ix.meta)+1)
			ix.vecs = make([]float32, len(ix.meta)*ix.dim, room*ix.dim)
			ix.signs = make([]uint64, len(ix.meta)*ix.words, room*ix.words)
		}
		ix.nvec++
	}
	ts := m.Time.UnixNano()
	ix.meta = append(grow(ix.meta, 1), slotMeta{ts: ts, typ: typeBit(m.Type), vec: hasVec, noTokens: m.Tokens <= 0})
	ix.scan = append(grow(ix.scan, 1), scanByte(&ix.meta[s]))
	ix.lens = append(grow(ix.lens, 1), n)
	ix.seqs = append(grow(ix.seqs, 1), seq)
	ix.bySeq[seq] = s
	if t := typeBit(m.Type); t != 0 && t != typeBit(memory.Raw) {
		k := bits.TrailingZeros8(t)
		ix.kinds[k] = append(ix.kinds[k], s)
	}
	ix.inTime(s, ts)
	if ix.dim > 0 {
		ix.vecs, ix.signs = grow(ix.vecs, ix.dim), grow(ix.signs, ix.words)
		if hasVec {
			ix.vecs = append(ix.vecs, vec...)
			ix.signs = append(ix.signs, signBits(vec, ix.words)...)
		} else {
			ix.vecs = append(ix.vecs, make([]float32, ix.dim)...)
			ix.signs = append(ix.signs, make([]uint64, ix.words)...)
		}
	}
}

// grow returns s with room for n more values: where it has none, a new
// array with a quarter more (as append would grow it), s copied in, huge
// pages asked for first. A slot's arrays grow so: on a large store they
// hold tens of megabytes, and the first touch of each 4 KiB page of a new
// one, under the index's lock, would hold every search up (hugePages).
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
func (ix *index) inTime(s int32, ts int64) {
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

// remove drops the memory of row seq, if indexed. Its postings stay until
// the next compaction; searches skip its slot.
func (ix *index) remove(seq int64) {
	s, ok := ix.bySeq[seq]
	if !ok {
		return
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
}

// setVector sets the vector of row seq (normalised; nil for none), in
// place.
func (ix *index) setVector(seq int64, vec []float32) {
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

// dropVectors forgets every vector (the embedding model changed): the
// memories stay, searchable lexically, until they are embedded again.
func (ix *index) dropVectors() {
	ix.changes++
	ix.dim, ix.words, ix.nvec = 0, 0, 0
	ix.vecs, ix.signs = nil, nil
	for s := range ix.meta {
		ix.meta[s].vec = false
		ix.scan[s] &^= hasVector
	}
}

// compact renumbers slots to drop removed documents, and their postings.
func (ix *index) compact() {
	ix.removals++
	ix.changes++
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
	for t := range ix.post {
		var q postings
		ix.post[t].each(func(slot int32, tf uint32) {
			if r := remap[slot]; r >= 0 {
				q.add(r, tf, lens[r])
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
	ix.meta, ix.lens, ix.seqs, ix.vecs, ix.signs = meta, lens, seqs, vecs, signs
	ix.scan = make([]uint8, 0, cap(meta))
	ix.listScan()
	ix.listKinds()
	ix.commonAll()
}

// scrub drops what removed rows leave in the index: their slots, and the
// words no row holds any longer (a snapshot would still name them).
func (ix *index) scrub() {
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

// listKinds lists the slots of each type but raw again, from meta.
func (ix *index) listKinds() {
	ix.kinds = [8][]int32{}
	raw := typeBit(memory.Raw)
	for s := range ix.meta {
		if t := ix.meta[s].typ; t != 0 && t != raw {
			k := bits.TrailingZeros8(t)
			ix.kinds[k] = append(ix.kinds[k], int32(s))
		}
	}
}

// inTimeOrder returns the slots of the newest memories passing f, newest
// first (equal times: the later indexed first), or with oldest the oldest,
// oldest first (the earlier indexed first). The slots
// between since and until are found by binary search in time order (the
// turns around a hit are looked up so); types other than raw are read
// from their own lists.
func (ix *index) inTimeOrder(f *memory.Filter, limit int, oldest bool) []int32 {
	sf := compile(f)
	if sf.types&typeBit(memory.Raw) == 0 {
		slots := ix.kindsNewestFirst(&sf)
		if oldest {
			slices.Reverse(slots)
		}
		return slots[:min(len(slots), limit)]
	}
	n := len(ix.meta)
	first := sort.Search(n, func(i int) bool { return ix.meta[ix.slotAt(i)].ts >= sf.since })
	end := sort.Search(n, func(i int) bool { return ix.meta[ix.slotAt(i)].ts >= sf.until })
	var slots []int32
	for k := 0; k < end-first && len(slots) < limit; k++ {
		i := end - 1 - k
		if oldest {
			i = first + k
		}
		if s := ix.slotAt(i); sf.ok(&ix.meta[s]) {
			slots = append(slots, s)
		}
	}
	return slots
}

// slotAt is the i-th slot in time order.
func (ix *index) slotAt(i int) int32 {
	if ix.unordered {
		return ix.byTime[i]
	}
	return int32(i)
}

// kindsNewestFirst returns the slots of types other than raw passing sf,
// from their lists, newest first.
func (ix *index) kindsNewestFirst(sf *slotFilter) []int32 {
	var slots []int32
	for k, list := range ix.kinds {
		if sf.types&(1<<k) == 0 {
			continue
		}
		for _, s := range list {
			if sf.ok(&ix.meta[s]) {
				slots = append(slots, s)
			}
		}
	}
	slices.SortFunc(slots, func(a, b int32) int {
		if c := cmp.Compare(ix.meta[b].ts, ix.meta[a].ts); c != 0 {
			return c
		}
		return cmp.Compare(b, a)
	})
	return slots
}

// vector ranks the documents passing f by cosine similarity to q (already
// normalised), keeping those at or above threshold.
func (ix *index) vector(f *memory.Filter, q []float32, threshold float64, limit int) []scored {
	if ix.nvec == 0 || len(q) != ix.dim {
		return nil
	}
	sf := compile(f)
	meta := ix.meta
	if ix.nvec < exactBelow {
		top := topK{k: limit}
		for s := range meta {
			if m := &meta[s]; !m.vec || !sf.ok(m) {
				continue
			}
			c := dot(q, ix.vecs[s*ix.dim:(s+1)*ix.dim])
			if c >= threshold {
				top.offer(scored{slot: int32(s), score: c})
			}
		}
		return top.best()
	}
	// Coarse pass on sign bits: fewer differing bits ≈ smaller angle.
	// Large namespaces are scanned in parallel chunks.
	qs := signBits(q, ix.words)
	k := max(limit*oversample, minRescore)
	parts := make([]topK, spreadWorkers(len(meta)))
	for w := range parts {
		parts[w].k = k
	}
	spread(len(meta), hammingPiece, len(parts), nil, func(w, lo, hi int) { ix.hamming(&parts[w], &sf, qs, lo, hi) })
	cand := topK{k: k}
	for _, p := range parts {
		for _, c := range p.h {
			cand.offer(c)
		}
	}
	top := topK{k: limit}
	for _, c := range cand.h {
		s := int(c.slot)
		cs := dot(q, ix.vecs[s*ix.dim:(s+1)*ix.dim])
		if cs >= threshold {
			top.offer(scored{slot: c.slot, score: cs})
		}
	}
	return top.best()
}

// hamming offers cand the slots in [lo, hi) whose sign bits differ least
// from qs (score = -distance).
func (ix *index) hamming(cand *topK, sf *slotFilter, qs []uint64, lo, hi int) {
	meta, scan, signs, words := ix.meta, ix.scan, ix.signs, ix.words
	timeless := sf.timeless()
	// The k-th best distance so far: most slots are rejected on it without
	// touching the heap.
	worst := words*64 + 1
	if len(cand.h) == cand.k {
		worst = int(-cand.h[0].score)
	}
	// The distance first: the sign bits are a quarter of the bytes of
	// the slot's meta, which only a close slot has read.
	near := func(s, diff int) {
		if b := scan[s]; b&hasVector == 0 || b&^hasVector&sf.types == 0 || sf.noVector {
			return
		}
		if !timeless && !sf.ok(&meta[s]) {
			return
		}
		cand.offer(scored{slot: int32(s), score: float64(-diff)})
		if len(cand.h) == cand.k {
			worst = int(-cand.h[0].score)
		}
	}
	if words == 1 {
		// Up to 64 dimensions: one word a slot, four slots at a time
		// (one branch for the four, which rarely has a slot to offer).
		q := qs[0]
		ws := signs[lo:hi]
		i := 0
		for ; i+4 <= len(ws); i += 4 {
			w := ws[i : i+4 : i+4]
			d0, d1 := bits.OnesCount64(q^w[0]), bits.OnesCount64(q^w[1])
			d2, d3 := bits.OnesCount64(q^w[2]), bits.OnesCount64(q^w[3])
			if min(d0, d1, d2, d3) < worst {
				for j, diff := range [4]int{d0, d1, d2, d3} {
					if diff < worst {
						near(lo+i+j, diff)
					}
				}
			}
		}
		for ; i < len(ws); i++ {
			if diff := bits.OnesCount64(q ^ ws[i]); diff < worst {
				near(lo+i, diff)
			}
		}
		return
	}
	for s := lo; s < hi; s++ {
		sg := signs[s*words : (s+1)*words]
		sg = sg[:len(qs)]
		diff := 0
		for i, w := range qs {
			diff += bits.OnesCount64(w ^ sg[i])
		}
		if diff < worst {
			near(s, diff)
		}
	}
}

// hammingPiece is how many slots a worker of the Hamming scan claims at
// a time.
const hammingPiece = 32768

// hit is a search result: a slot with its scores.
type hit struct {
	slot           int32
	rrf, cos, bm25 float64
}

// search runs q on the index: its vector side (qvec, normalised; nil for
// none) and its lexical side, side by side on a large namespace, fused.
func (ix *index) search(q *memory.Query, qvec []float32) []hit {
	var vec, lex []scored
	if qvec != nil && q.Text != "" && len(ix.meta) >= parallelAbove {
		var wg sync.WaitGroup
		wg.Go(func() { lex = ix.lexicalSide(q, nil) })
		vec = ix.vectorSide(q, qvec)
		wg.Wait()
	} else {
		vec, lex = ix.vectorSide(q, qvec), ix.lexicalSide(q, nil)
	}
	return fuse(vec, lex, q.Limit)
}

// depth is how deep each side of a search looks: a little past the limit,
// so fusion has material.
func depth(q *memory.Query) int {
	limit := q.Limit
	if limit <= 0 {
		limit = 10
	}
	return limit + 10
}

// lexicalSide is q's lexical side (j: as lexical's).
func (ix *index) lexicalSide(q *memory.Query, j *joinPoint) []scored {
	if q.Text == "" {
		return nil
	}
	terms := ix.queryTerms(q.Text)
	top := ix.rankTerms(&q.Filter, terms, depth(q), j)
	if q.Around > 0 {
		top = ix.around(q, terms, top, depth(q))
	}
	return top
}

// vectorSide is q's vector side, for qvec (normalised; nil: none).
func (ix *index) vectorSide(q *memory.Query, qvec []float32) []scored {
	if qvec == nil {
		return nil
	}
	return ix.vector(&q.Filter, qvec, q.Threshold, depth(q))
}

// fuse ranks the slots of the two sides by reciprocal rank fusion, best
// first, ties in the order they came (vector side first), up to limit
// (0: 10).
func fuse(vec, lex []scored, limit int) []hit {
	if limit <= 0 {
		limit = 10
	}
	order := make([]hit, 0, len(vec)+len(lex))
	at := func(s int32) *hit {
		for i := range order {
			if order[i].slot == s {
				return &order[i]
			}
		}
		order = append(order, hit{slot: s})
		return &order[len(order)-1]
	}
	for r, c := range vec {
		h := at(c.slot)
		h.rrf += 1 / float64(rrfK+r+1)
		h.cos = c.score
	}
	for r, c := range lex {
		h := at(c.slot)
		h.rrf += 1 / float64(rrfK+r+1)
		h.bm25 = c.score
	}
	slices.SortStableFunc(order, func(a, b hit) int {
		switch {
		case a.rrf > b.rrf:
			return -1
		case a.rrf < b.rrf:
			return 1
		}
		return 0
	})
	if len(order) > limit {
		order = order[:limit]
	}
	return order
}

// normalize returns v scaled to unit length (nil for a zero vector).
func normalize(v []float32) []float32 {
	var ss float64
	for _, x := range v {
		ss += float64(x) * float64(x)
	}
	if ss == 0 {
		return nil
	}
	inv := float32(1 / math.Sqrt(ss))
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = x * inv
	}
	return out
}

func dot(a, b []float32) float64 {
	b = b[:len(a)]
	var s0, s1, s2, s3, s4, s5, s6, s7 float32
	i := 0
	for ; i+8 <= len(a); i += 8 {
		x, y := a[i:i+8:i+8], b[i:i+8:i+8]
		s0 += x[0] * y[0]
		s1 += x[1] * y[1]
		s2 += x[2] * y[2]
		s3 += x[3] * y[3]
		s4 += x[4] * y[4]
		s5 += x[5] * y[5]
		s6 += x[6] * y[6]
		s7 += x[7] * y[7]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return float64((s0 + s1) + (s2 + s3) + (s4 + s5) + (s6 + s7))
}

func signBits(v []float32, words int) []uint64 {
	out := make([]uint64, words)
	for i, x := range v {
		if x > 0 {
			out[i/64] |= 1 << (i % 64)
		}
	}
	return out
}
