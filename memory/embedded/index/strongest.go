package index

import (
	"cmp"
	"math"
	"slices"
)

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
func (ix *Namespace) strongestOf(arr []uint8, bm bm25) *strongest {
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
func (ix *Namespace) noteStrongest(id, s int32, f uint8) {
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
