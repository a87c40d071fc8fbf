package index

import "runtime"

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
// term (champions.go). Neither arrays nor champions are in the
// snapshot: a load makes them from the postings. A namespace of fewer
// than Options.CommonMin slots keeps neither.

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
func (ix *Namespace) promote(id int32) {
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
func (ix *Namespace) isMid(id int32) bool {
	n := int(ix.post[id].n)
	return len(ix.meta) >= ix.opts.CommonMin && n*midShare >= len(ix.meta) && n > 0 && !ix.isCommon(id)
}

// presentOf makes term id's bits, from its postings.
func (ix *Namespace) presentOf(id int32) []uint64 {
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
func (ix *Namespace) notePresent(id, s int32) {
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
func (ix *Namespace) cursorOf(id int32) cursor {
	return cursor{p: &ix.post[id], present: ix.present[id]}
}

// isCommon says whether term id is common.
func (ix *Namespace) isCommon(id int32) bool {
	n := int(ix.post[id].n)
	return len(ix.meta) >= ix.opts.CommonMin && n*commonShare >= len(ix.meta) && n > 0
}

// commonParts is what a common term keeps besides its postings.
type commonParts struct {
	arr       []uint8
	champions *champions
	strongest *strongest
}

// commonOf makes term id's parts, from its postings; it changes nothing.
func (ix *Namespace) commonOf(id int32) commonParts {
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
func (ix *Namespace) setCommon(id int32, c commonParts) {
	if ix.common == nil {
		ix.common, ix.champions, ix.strongest = map[int32][]uint8{}, map[int32]*champions{}, map[int32]*strongest{}
	}
	ix.common[id], ix.champions[id], ix.strongest[id] = c.arr, c.champions, c.strongest
}

// lenOf is slot s's length; the slot being added has none in lens yet.
func (ix *Namespace) lenOf(s int32) float32 {
	if int(s) < len(ix.lens) {
		return ix.lens[s]
	}
	return ix.adding
}

// noteCommon records that term id occurs tf times in slot s, the newest,
// in its array if it has one, and gives it one if it became common.
func (ix *Namespace) noteCommon(id int32, s int32, tf uint32) {
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
func (ix *Namespace) commonAll() {
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
