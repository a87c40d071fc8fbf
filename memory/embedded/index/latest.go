package index

import (
	"cmp"
	"slices"
	"sort"

	"github.com/vera-proxy/vera/memory"
)

// Latest returns the rows of the newest memories passing f, newest first
// (equal times: the later indexed first), or with oldest the oldest,
// oldest first (the earlier indexed first).
func (ix *Namespace) Latest(f *memory.Filter, limit int, oldest bool) []int64 {
	slots := ix.inTimeOrder(f, limit, oldest)
	seqs := make([]int64, len(slots))
	for i, s := range slots {
		seqs[i] = ix.seqs[s]
	}
	return seqs
}

// inTimeOrder returns the slots of Latest. The slots between since and
// until are found by binary search in time order (the turns around a hit
// are looked up so); types other than raw are read from their own lists.
func (ix *Namespace) inTimeOrder(f *memory.Filter, limit int, oldest bool) []int32 {
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
func (ix *Namespace) slotAt(i int) int32 {
	if ix.unordered {
		return ix.byTime[i]
	}
	return int32(i)
}

// timePos is slot s's place in time order (slotAt's index).
func (ix *Namespace) timePos(s int32) int {
	if !ix.unordered {
		return int(s)
	}
	// Equal times are in slot order (inTime puts a slot after them).
	ts := ix.meta[s].ts
	i := sort.Search(len(ix.byTime), func(i int) bool {
		x := ix.byTime[i]
		return ix.meta[x].ts > ts || ix.meta[x].ts == ts && x >= s
	})
	if i < len(ix.byTime) && ix.byTime[i] == s {
		return i
	}
	return slices.Index(ix.byTime, s) // not found so: never left out
}

// kindsNewestFirst returns the slots of types other than raw passing sf,
// from their lists, newest first.
func (ix *Namespace) kindsNewestFirst(sf *slotFilter) []int32 {
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
