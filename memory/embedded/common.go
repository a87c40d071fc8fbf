package embedded

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

// championCount is how many champions a common term keeps: more than a
// search asks for.
const championCount = 256

const (
	// commonShare: a term in at least 1/commonShare of the slots is
	// common. Every slot holds a term's byte, so no more terms can be
	// common than commonShare times the distinct terms of a memory.
	commonShare = 4
	// tfSaturated stands for a frequency of 255 or more: the postings
	// hold it.
	tfSaturated = 255
)

// promote gives term id its array, from its postings, once it is common.
func (ix *index) promote(id int32) {
	p := &ix.post[id]
	if len(ix.meta) < commonMin || int(p.n)*commonShare < len(ix.meta) || p.n == 0 {
		return
	}
	if _, ok := ix.common[id]; ok {
		return
	}
	arr := make([]uint8, p.blocks[len(p.blocks)-1].last+1)
	champs, bm := topK{k: championCount}, ix.bm25()
	p.each(func(s int32, tf uint32) {
		arr[s] = uint8(min(tf, tfSaturated))
		champs.offer(scored{slot: s, score: bm.score(1, tf, ix.lenOf(s))})
	})
	if ix.common == nil {
		ix.common, ix.champions = map[int32][]uint8{}, map[int32]*topK{}
	}
	ix.common[id], ix.champions[id] = arr, &champs
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
		ix.promote(id)
		return
	}
	for int32(len(arr)) < s {
		arr = append(arr, 0)
	}
	ix.common[id] = append(arr, uint8(min(tf, tfSaturated)))
	ix.champions[id].offer(scored{slot: s, score: ix.bm25().score(1, tf, ix.adding)})
}

// commonAll gives every common term its array again (after a load or a
// compaction).
func (ix *index) commonAll() {
	ix.common, ix.champions = nil, nil
	for id := range ix.post {
		ix.promote(int32(id))
	}
}

// tfIn returns the frequency of a term in slot, 0 when it is not there:
// from the term's array when it has one (common, else nil), else from
// its postings through c. Slots must not go down between calls with the
// same c.
func tfIn(common []uint8, c *cursor, slot int32) uint32 {
	if common != nil {
		if int(slot) >= len(common) {
			return 0
		}
		if v := common[slot]; v < tfSaturated {
			return uint32(v)
		}
	}
	if c.seek(slot); c.slot == slot {
		return c.tf
	}
	return 0
}
