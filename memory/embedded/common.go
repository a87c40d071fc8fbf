package embedded

import (
	"cmp"
	"math"
	"runtime"
	"slices"
	"sync"
)

// The commonest terms keep their frequencies twice: in their postings,
// and in an array of one byte a slot. A search that looks such a term up
// for a few documents (a question's common word, for the memories its
// rarer words found) then reads one byte, where the postings would be
// decoded up to the document, a block of 64 at a time.
//
// A common term also keeps its champions: the slots it weighs most in
// (highest frequency for their length, as BM25 weighed them when they
// came). A question whose strongest term is common scores them first:
// the limit-th best of those is a floor the ranking's scan starts from,
// instead of from nothing, so it dismisses most slots on their first
// term. Neither arrays nor champions are in the snapshot: a load makes
// them from the postings.

// commonMin: a namespace of fewer slots keeps no arrays (a variable for
// the tests).
var commonMin = 4096

// championCount is how many champions a common term keeps: many more
// than a search asks for, so that their floor comes close to the
// ranking's own.
const championCount = 1024

const (
	// commonShare: a term in at least 1/commonShare of the slots is
	// common. Every slot holds a term's byte, so no more terms can be
	// common than commonShare times the distinct terms of a memory.
	commonShare = 4
	// tfSaturated stands for a frequency of 255 or more: the postings
	// hold it.
	tfSaturated = 255
)

// promote gives term id its array, from its postings, once it is common
// (its bits go).
func (ix *index) promote(id int32) {
	if _, ok := ix.common[id]; ok || !ix.isCommon(id) {
		return
	}
	ix.setCommon(id, ix.commonOf(id))
	delete(ix.present, id)
}

// A term in fewer slots than a common one but still many (a sixteenth)
// keeps a bit a slot: looked up for a document (a question's middling
// word, for the memories its rarer words found, or for the neighbours of
// the ranked turns), most documents lack it, and the bit says so where
// the postings would be decoded up to the document, a block of 64 at a
// time. A bit costs an eighth of a common term's byte.

// midShare: a term in at least 1/midShare of the slots, and not common,
// keeps its bits.
const midShare = 16

// isMid says whether term id keeps bits.
func (ix *index) isMid(id int32) bool {
	n := int(ix.post[id].n)
	return len(ix.meta) >= commonMin && n*midShare >= len(ix.meta) && n > 0 && !ix.isCommon(id)
}

// presentOf makes term id's bits, from its postings.
func (ix *index) presentOf(id int32) []uint64 {
	p := &ix.post[id]
	bits := make([]uint64, p.blocks[len(p.blocks)-1].last/64+1)
	p.each(func(s int32, _ uint32) { bits[s>>6] |= 1 << (uint(s) & 63) })
	return bits
}

// notePresent records that term id, not common, is in slot s, the
// newest: in its bits if it has them, and gives it them if it has come
// to need them. A term the namespace has outgrown (in less than half of
// 1/midShare of the slots: half, so that a term at the line is not built
// again and again) gives them up.
func (ix *index) notePresent(id, s int32) {
	if bits, ok := ix.present[id]; ok {
		if int(ix.post[id].n)*midShare*2 < len(ix.meta) {
			delete(ix.present, id)
			return
		}
		for len(bits) <= int(s>>6) {
			bits = append(bits, 0)
		}
		bits[s>>6] |= 1 << (uint(s) & 63)
		ix.present[id] = bits
		return
	}
	if ix.isMid(id) {
		if ix.present == nil {
			ix.present = map[int32][]uint64{}
		}
		ix.present[id] = ix.presentOf(id)
	}
}

// cursorOf is a cursor on term id's postings, with its bits if any.
func (ix *index) cursorOf(id int32) cursor {
	return cursor{p: &ix.post[id], present: ix.present[id]}
}

// isCommon says whether term id is common.
func (ix *index) isCommon(id int32) bool {
	n := int(ix.post[id].n)
	return len(ix.meta) >= commonMin && n*commonShare >= len(ix.meta) && n > 0
}

// commonParts is what a common term keeps besides its postings.
type commonParts struct {
	arr       []uint8
	champions *champions
	strongest *strongest
}

// champions are a common term's champions, with what a search's floor
// reads of them kept (kept): the champions are the same for every
// question the term leads, and reading their lengths and the other
// terms' frequencies, each a slot of its own, costs a cache miss a
// champion and a term on a chat that comes cold.
type champions struct {
	topK
	mu   sync.Mutex // searches share the index
	kept *championsKept
}

// championsKept is what a search read of its champions: their slots in
// slot order, their lengths, and the frequency in each of every term
// asked with them so far. A champion that comes (and so one that goes)
// drops it all; slots are not renumbered but by a compaction, which makes
// every term's champions anew; lengths and frequencies never change for
// a slot. Whether a champion is still live and passes a search's filter
// is read from meta, at the search.
type championsKept struct {
	slots []int32
	lens  []float32
	tfs   map[int32][]uint32 // term id → frequency in each of slots
}

// keptTerms bounds the terms a champions' kept frequencies hold: past
// it, a term's are read for the search and not kept.
const keptTerms = 64

// offer offers the slot being added, and drops what was kept if it came
// in.
func (c *champions) offer(s scored) {
	if c.topK.offer(s) {
		c.mu.Lock()
		c.kept = nil
		c.mu.Unlock()
	}
}

// scores returns the champions' slots and their BM25 scores for terms
// (each sum in the terms' order, as scoresOf adds), from what is kept,
// keeping what it had to read. The lock is held only to find and keep:
// what is kept never changes once there.
func (c *champions) scores(ix *index, terms []queryTerm, bm bm25) ([]int32, []float64) {
	c.mu.Lock()
	k := c.kept
	if k == nil {
		k = &championsKept{tfs: map[int32][]uint32{}}
		for _, h := range c.h {
			k.slots = append(k.slots, h.slot)
		}
		slices.Sort(k.slots)
		k.lens = make([]float32, len(k.slots))
		for i, s := range k.slots {
			k.lens[i] = ix.lens[s]
		}
		c.kept = k
	}
	cols := make([][]uint32, len(terms))
	for i, t := range terms {
		cols[i] = k.tfs[t.id]
	}
	c.mu.Unlock()
	for i, t := range terms {
		if cols[i] != nil {
			continue
		}
		tfs := ix.freqsAt(t.id, k.slots)
		cols[i] = tfs
		c.mu.Lock()
		if c.kept == k && len(k.tfs) < keptTerms {
			k.tfs[t.id] = tfs
		}
		c.mu.Unlock()
	}
	sums := make([]float64, len(k.slots))
	for i, t := range terms {
		for j, tf := range cols[i] {
			if tf > 0 {
				sums[j] += bm.score(t.scale, tf, k.lens[j])
			}
		}
	}
	return k.slots, sums
}

// commonOf makes term id's parts, from its postings; it changes nothing.
func (ix *index) commonOf(id int32) commonParts {
	p := &ix.post[id]
	arr := make([]uint8, p.blocks[len(p.blocks)-1].last+1)
	champs, bm := &champions{topK: topK{k: championCount}}, ix.bm25()
	p.each(func(s int32, tf uint32) {
		arr[s] = uint8(min(tf, tfSaturated))
		champs.offer(scored{slot: s, score: bm.score(1, tf, ix.lenOf(s))})
	})
	return commonParts{arr: arr, champions: champs, strongest: ix.strongestOf(arr, bm)}
}

// setCommon keeps term id's parts.
func (ix *index) setCommon(id int32, c commonParts) {
	if ix.common == nil {
		ix.common, ix.champions, ix.strongest = map[int32][]uint8{}, map[int32]*champions{}, map[int32]*strongest{}
	}
	ix.common[id], ix.champions[id], ix.strongest[id] = c.arr, c.champions, c.strongest
}

// bm25 is BM25's scoring for the index as it is now.
func (ix *index) bm25() bm25 {
	if ix.live == 0 {
		return newBM25(1)
	}
	return newBM25(float64(ix.total) / float64(ix.live))
}

// lenOf is slot s's length; the slot being added has none in lens yet.
func (ix *index) lenOf(s int32) float32 {
	if int(s) < len(ix.lens) {
		return ix.lens[s]
	}
	return ix.adding
}

// noteCommon records that term id occurs tf times in slot s, the newest,
// in its array if it has one, and gives it one if it became common.
func (ix *index) noteCommon(id int32, s int32, tf uint32) {
	arr, ok := ix.common[id]
	if !ok {
		if ix.promote(id); ix.common[id] == nil {
			ix.notePresent(id, s)
		}
		return
	}
	for int32(len(arr)) < s {
		arr = append(arr, 0)
	}
	f := uint8(min(tf, tfSaturated))
	ix.common[id] = append(arr, f)
	ix.champions[id].offer(scored{slot: s, score: ix.bm25().score(1, tf, ix.adding)})
	ix.noteStrongest(id, s, f)
}

// commonAll gives every common term its parts again (after a load or a
// compaction), on every core.
func (ix *index) commonAll() {
	ix.common, ix.champions, ix.strongest, ix.present = nil, nil, nil, nil
	var ids, mids []int32
	for id := range ix.post {
		switch {
		case ix.isCommon(int32(id)):
			ids = append(ids, int32(id))
		case ix.isMid(int32(id)):
			mids = append(mids, int32(id))
		}
	}
	parts := make([]commonParts, len(ids))
	bits := make([][]uint64, len(mids))
	spread(len(ids)+len(mids), 1, runtime.GOMAXPROCS(0), nil, func(_, lo, hi int) {
		for i := lo; i < hi; i++ {
			if i < len(ids) {
				parts[i] = ix.commonOf(ids[i])
			} else {
				bits[i-len(ids)] = ix.presentOf(mids[i-len(ids)])
			}
		}
	})
	for i, id := range ids {
		ix.setCommon(id, parts[i])
	}
	if len(mids) > 0 {
		ix.present = make(map[int32][]uint64, len(mids))
	}
	for i, id := range mids {
		ix.present[id] = bits[i]
	}
}

// tfIn returns the frequency of a term in slot, 0 when it is not there:
// from the term's array when it has one (common, else nil), else from
// its postings through c, unless c's bits say the slot lacks it. Slots
// must not go down between calls with the same c.
func tfIn(common []uint8, c *cursor, slot int32) uint32 {
	if common != nil {
		if int(slot) >= len(common) {
			return 0
		}
		if v := common[slot]; v < tfSaturated {
			return uint32(v)
		}
	}
	if c.lacks(slot) {
		return 0
	}
	if c.seek(slot); c.slot == slot {
		return c.tf
	}
	return 0
}

// A common term also keeps its strongest slots by cell, so that a
// question led by it finds its candidates without reading every slot's
// frequency. A slot's cell is its frequency (32 and up share a row) and
// its length's class (4 lengths a class, from 1020 on one class). For
// BM25's length weight c1, a slot of frequency tf and length l gives the
// term more than least exactly when its key tf/(c0+c1·l) is above
// least/(scale-least); a cell's key, at its class's shortest length, is
// the most any of its slots has. The cells are ordered by key, strongest
// first, and the term holds the slots of the first cells, up to a
// quarter of its slots, cell by cell: a question takes the cells whose
// key can pass, a prefix.
//
// The keys are made with the c1 of their build; the average length, and
// so c1, changes with every write. A slot's key at c1 is at most its key
// at the build's c1 divided by min(1, c1/c1 built), so the question's
// bound is lowered by that factor: the cells taken always hold every slot
// that can pass. Slots added since the build are kept apart (tail) when
// their cell is held or had no slot at the build (its place is unknown:
// always marked); a long tail builds the cells again.

const (
	strongRows  = 32 // frequencies 1 to 31 have a row each; 32 and up the last
	strongWidth = 4  // lengths in a class
	strongLens  = 1024 / strongWidth
	strongCells = strongRows * strongLens
	// strongShare: a term holds at least 1/strongShare of its slots.
	strongShare = 4
)

// strongest is a common term's strongest slots by cell.
type strongest struct {
	c1    float64   // BM25's c1 when the cells were ordered
	keys  []float64 // keys[i]: the key of the i-th strongest cell (held cells, and the next)
	ends  []int32   // ends[i]: where the i-th held cell's slots end in slots
	slots []int32   // the held cells' slots, strongest cell first
	rank  []uint16  // rank[cell]: its place in the order (strongCells: no slot)
	// tail holds the slots added since the build whose cell is held or
	// had no slot then (rank strongCells), in
	// slot order, with their cell's rank.
	tail []rankedSlot
}

type rankedSlot struct {
	slot int32
	rank uint16
}

// cellOf is the cell of a slot of frequency f (a byte of the term's
// array) and length l.
func cellOf(f uint8, l float32) int {
	return (int(min(f, strongRows))-1)*strongLens + min(int(l), 1023)/strongWidth
}

// cellKey is a cell's key for BM25 bm: its slots' most, at the class's
// shortest length; the last row's slots pass whatever the bound.
func cellKey(cell int, bm bm25) float64 {
	row, class := cell/strongLens, cell%strongLens
	if row == strongRows-1 {
		return math.Inf(1)
	}
	return float64(row+1) / (bm.c0 + bm.c1*float64(class*strongWidth))
}

// strongestOf orders the cells of a common term of frequencies arr by
// key for BM25 bm and holds the slots of the strongest.
func (ix *index) strongestOf(arr []uint8, bm bm25) *strongest {
	st := &strongest{c1: bm.c1, rank: make([]uint16, strongCells)}
	count := make([]int32, strongCells)
	total := 0
	for s, f := range arr {
		if f != 0 {
			count[cellOf(f, ix.lenOf(int32(s)))]++
			total++
		}
	}
	var order []int
	for c, n := range count {
		if n > 0 {
			order = append(order, c)
		}
	}
	keys := make([]float64, strongCells)
	for _, c := range order {
		keys[c] = cellKey(c, bm)
	}
	slices.SortFunc(order, func(a, b int) int {
		if c := cmp.Compare(keys[b], keys[a]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	for c := range st.rank {
		st.rank[c] = strongCells
	}
	held, n := 0, int32(0)
	for held < len(order) && int(n)*strongShare < total {
		n += count[order[held]]
		st.ends = append(st.ends, n)
		held++
	}
	for i, c := range order {
		st.rank[c] = uint16(i)
		if i <= held {
			st.keys = append(st.keys, keys[c])
		}
	}
	// Each held cell's slots, in slot order: next[i] is where the next
	// slot of the i-th cell goes.
	st.slots = make([]int32, n)
	next := make([]int32, held)
	for i := 1; i < held; i++ {
		next[i] = st.ends[i-1]
	}
	for s, f := range arr {
		if f == 0 {
			continue
		}
		if r := int(st.rank[cellOf(f, ix.lenOf(int32(s)))]); r < held {
			st.slots[next[r]] = int32(s)
			next[r]++
		}
	}
	return st
}

// noteStrongest adds slot s, the newest, of frequency f, to term id's
// cells, building them again once the slots kept apart are many.
func (ix *index) noteStrongest(id, s int32, f uint8) {
	st := ix.strongest[id]
	if st == nil {
		return
	}
	// A cell held, or one that had no slot at the build (its place is
	// unknown).
	if r := st.rank[cellOf(f, ix.adding)]; int(r) < len(st.ends) || r == strongCells {
		st.tail = append(st.tail, rankedSlot{slot: s, rank: r})
	}
	if len(st.tail) > max(1024, len(st.slots)/8) {
		ix.strongest[id] = ix.strongestOf(ix.common[id], ix.bm25())
	}
}

// mark returns a bitmap of n slots with the bit of every slot that can
// give the term, of weight scale, more than least for BM25 bm (and some
// that cannot), made in buf's array if it is large enough; nil when the
// held cells may not hold them all (the caller reads every slot's
// frequency instead).
func (st *strongest) mark(n int, scale, least float64, bm bm25, buf []uint64) []uint64 {
	if !(least > 0) || scale <= least {
		return nil
	}
	// A hair low, against rounding: the same margin as needFor's, and
	// then some.
	bound := least / (scale - least) * (1 - 2e-6) * min(1, bm.c1/st.c1)
	taken := 0
	for taken < len(st.ends) && st.keys[taken] >= bound {
		taken++
	}
	if taken == len(st.ends) && taken < len(st.keys) && st.keys[taken] >= bound {
		return nil // a cell not held can pass
	}
	marked := slices.Grow(buf[:0], (n+63)/64)[:(n+63)/64]
	clear(marked)
	end := int32(0)
	if taken > 0 {
		end = st.ends[taken-1]
	}
	for _, s := range st.slots[:end] {
		marked[s>>6] |= 1 << (s & 63)
	}
	for _, t := range st.tail {
		if int(t.rank) < taken || t.rank == strongCells {
			marked[t.slot>>6] |= 1 << (t.slot & 63)
		}
	}
	return marked
}
