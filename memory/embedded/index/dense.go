package index

import (
	"encoding/binary"
	"math"
	"math/bits"
	"slices"

	"github.com/vera-proxy/vera/memory"
)

// densePart is one worker's state in dense, pooled: its place in the
// terms' postings and its best so far, which carry from one of its pieces
// to the next; a window's scores, and its candidates.
type densePart struct {
	acc   [window]float64
	cand  []int32
	top   []scored
	theta float64
	cs    []cursor
	// many[i]: the last window that tried had too many slots for term i
	// to be looked up; the next few windows add it without trying.
	many    []bool
	windows int // windows ranked so far
	started bool
}

// window is how many slots dense scores at a time: its scores stay in
// the core's first cache.
const window = 2048

// dense ranks as lexical does, for questions whose rarest term most
// memories hold, a window of slots at a time: each term's postings in
// the window add into the window's scores, in the query's order of terms
// (as exhaustive scoring adds). A large namespace is ranked on every
// core, each worker to its own best, merged.
func (ix *Namespace) dense(f *memory.Filter, terms []queryTerm, bm bm25, limit int, j *JoinPoint) []scored {
	return ix.denseIn(f, terms, bm, limit, ix.opts.DensePiece, ix.spreadWorkers(), j)
}

// denseIn is dense in pieces of piece slots, on up to workers workers.
func (ix *Namespace) denseIn(f *memory.Filter, terms []queryTerm, bm bm25, limit, piece, workers int, j *JoinPoint) []scored {
	parts := ix.denseWorkers(workers)
	defer ix.denseParts.Put(parts)
	q := ix.newDenseQuery(f, terms, bm, limit)
	if buf := q.startFromFloor(); buf != nil {
		defer ix.marks.Put(buf)
	}
	spread(len(ix.meta), piece, workers, j, func(w, lo, hi int) { q.rank(&(*parts)[w], int32(lo), int32(hi)) })
	top := topK{k: limit}
	for w := range workers {
		if part := &(*parts)[w]; part.started {
			for _, h := range part.top {
				top.offer(h)
			}
		}
	}
	return top.best()
}

// denseWorkers returns the state of workers workers, from the pool, none
// started.
func (ix *Namespace) denseWorkers(workers int) *[]densePart {
	parts, _ := ix.denseParts.Get().(*[]densePart)
	if parts == nil {
		parts = new([]densePart)
	}
	if len(*parts) < workers {
		*parts = make([]densePart, workers)
	}
	for w := range workers {
		(*parts)[w].started = false
	}
	return parts
}

// denseQuery is one question of dense.
type denseQuery struct {
	ix     *Namespace
	sf     slotFilter
	terms  []queryTerm
	common [][]uint8 // the terms' arrays of frequencies, if common
	rest   []float64 // rest[i]: the most terms[i:] can add
	bm     bm25
	limit  int
	// floor is a score limit documents are known to reach (-Inf: none):
	// a document below it cannot enter, whatever the workers found.
	floor float64
	// need is what the first term, common, must give a slot for it to
	// reach the floor: the least frequency by length (needFor); nil when
	// a slot without the term could.
	need []uint8
	// marked has the bit of every slot the first term's strongest cells
	// hold that could pass need (nil: every slot is read).
	marked []uint64
}

func (ix *Namespace) newDenseQuery(f *memory.Filter, terms []queryTerm, bm bm25, limit int) *denseQuery {
	q := &denseQuery{ix: ix, sf: compile(f), terms: terms, bm: bm, limit: limit}
	q.rest = make([]float64, len(terms)+1)
	q.common = make([][]uint8, len(terms))
	for i := len(terms) - 1; i >= 0; i-- {
		p := &ix.post[terms[i].id]
		q.rest[i] = q.rest[i+1] + bm.score(terms[i].scale, p.maxTF, p.minLen)
		q.common[i] = ix.common[terms[i].id]
	}
	return q
}

// startFromFloor sets the floor the workers start from (championsFloor),
// and when it leaves only the slots that get enough from the first term,
// what they need (need) and, when its strongest cells hold them all,
// which they are (marked). It returns the array of marked, taken from the
// pool, for the caller to put back once the ranking is done (nil: none
// was taken).
func (q *denseQuery) startFromFloor() *[]uint64 {
	ix, terms := q.ix, q.terms
	if q.floor = q.championsFloor(); !(len(terms) > 0 && q.rest[1]*slack <= q.floor) {
		return nil
	}
	q.need = q.needFor(q.floor - q.rest[1])
	ix.floors.Add(1)
	st := ix.strongest[terms[0].id]
	if st == nil {
		return nil
	}
	// The bitmap's array is kept for the next question: a new one each
	// time (25 KB at 200k memories) would be fresh memory, each of its
	// pages touched first (hugePages).
	buf, _ := ix.marks.Get().(*[]uint64)
	if buf == nil {
		buf = new([]uint64)
	}
	if q.marked = st.mark(len(ix.meta), terms[0].scale, q.floor-q.rest[1], q.bm, *buf); q.marked != nil {
		*buf = q.marked
		ix.marked.Add(1)
	}
	return buf
}

// championsFloor scores the champions of the strongest term, if it is
// common, and returns the limit-th best score among those passing the
// filter (-Inf if fewer pass). They are real documents, so the ranking's
// limit-th best is at least that: the workers start from it.
func (q *denseQuery) championsFloor() float64 {
	ix := q.ix
	if len(q.terms) == 0 || q.common[0] == nil {
		return math.Inf(-1)
	}
	champs := ix.champions[q.terms[0].id]
	if champs == nil || len(champs.h) < q.limit {
		return math.Inf(-1)
	}
	// Only a champion whose score can enter is checked against the
	// filter (its meta read).
	slots, scores := champs.scores(ix, q.terms, q.bm)
	top := topK{k: q.limit}
	for i, score := range scores {
		c := scored{slot: slots[i], score: score}
		if (len(top.h) < top.k || worse(top.h[0], c)) && q.sf.ok(&ix.meta[c.slot]) {
			top.offer(c)
		}
	}
	if len(top.h) < q.limit {
		return math.Inf(-1)
	}
	return top.h[0].score
}

// rank ranks the slots in [lo, hi) into part.top, a window at a time;
// a worker's pieces come in increasing order, so its cursors only move
// on.
//
// MaxScore's test prunes within each window: once the limit-th best
// score so far (theta) is above the most the terms left can add, only the
// window's slots whose score so far could still reach theta go on. When
// they are few next to the term's postings in the window, the term is
// looked up for them alone (from its array of frequencies when it is
// common) instead of added whole. A question of common words adds the
// postings of its one or two rarest words, and looks the rest up for the
// few memories that can still enter.
func (q *denseQuery) rank(part *densePart, lo, hi int32) {
	if !part.started {
		q.startPart(part)
	}
	top := topK{k: q.limit, h: part.top}
	for w := lo; w < hi; w += window {
		end := min(w+window, hi)
		all := q.addWindow(part, w, end)
		q.offerWindow(part, &top, all, w, end)
		clear(part.acc[:end-w])
	}
	part.top = top.h
}

// startPart starts a worker's first piece: its cursors at the terms'
// first postings, theta at the floor.
func (q *denseQuery) startPart(part *densePart) {
	part.started, part.windows, part.theta = true, 0, q.floor
	part.top = part.top[:0]
	part.cs = slices.Grow(part.cs[:0], len(q.terms))[:len(q.terms)]
	part.many = slices.Grow(part.many[:0], len(q.terms))[:len(q.terms)]
	for i, t := range q.terms {
		part.cs[i] = q.ix.cursorOf(t.id)
		part.cs[i].start()
		part.many[i] = false
	}
}

// addWindow adds the terms' scores in the slots of the window [w, end)
// into part.acc, and says whether every slot of it goes on (all); else
// those that do are part.cand.
func (q *denseQuery) addWindow(part *densePart, w, end int32) (all bool) {
	cs, common, theta := part.cs, q.common, part.theta
	retry := part.windows%16 == 0
	part.windows++
	all = true
	first := 0 // the first term not added yet
	if q.need != nil && q.rest[1]*slack <= theta {
		// A slot without the strongest term cannot enter, nor one that
		// does not get enough from it: the window's candidates are chosen
		// on its array, without a division a slot.
		part.cand = q.firstCommon(common[0], &cs[0], &part.acc, w, end, part.cand[:0])
		all, first = false, 1
	}
	for i := first; i < len(q.terms); i++ {
		if all && i > 0 && q.rest[i]*slack < theta && (!part.many[i] || retry) {
			all = q.fewLeft(part, i, w, end)
		}
		switch {
		case all && common[i] != nil:
			q.addCommon(common[i], &cs[i], q.terms[i], &part.acc, w, end)
		case all:
			q.add(&cs[i], q.terms[i], &part.acc, w, end)
		default:
			q.lookUp(part, i, w)
		}
	}
	return all
}

// fewLeft takes as part.cand the window's slots that could still reach
// theta with term i and those after it, and says whether they are too
// many to look term i up for (next to its postings in the window): then
// it is added whole.
func (q *denseQuery) fewLeft(part *densePart, i int, w, end int32) (many bool) {
	least := part.theta - q.rest[i]
	most := int(int64(end-w) * int64(q.ix.post[q.terms[i].id].n) / int64(len(q.ix.meta)) / 8)
	cand := part.cand[:0]
	for o, v := range part.acc[:end-w] {
		if v*slack > least {
			if len(cand) == most {
				break
			}
			cand = append(cand, int32(o))
		}
	}
	part.cand = cand
	part.many[i] = len(cand) == most
	return part.many[i]
}

// lookUp adds term i's score in the candidates of the window from w that
// can still reach theta, and keeps those as the candidates.
func (q *denseQuery) lookUp(part *densePart, i int, w int32) {
	t, common, c, theta, lens := q.terms[i], q.common[i], &part.cs[i], part.theta, q.ix.lens
	acc := &part.acc
	cand := part.cand[:0]
	for _, o := range part.cand {
		if (acc[o]+q.rest[i])*slack <= theta {
			continue // it cannot reach theta
		}
		s := w + o
		if tf := tfIn(common, c, s); tf > 0 {
			acc[o] += q.bm.score(t.scale, tf, lens[s])
		}
		cand = append(cand, o)
	}
	part.cand = cand
}

// offerWindow offers top the window's slots that go on (all of them, or
// part.cand) with a score above theta, raising theta as top fills.
func (q *denseQuery) offerWindow(part *densePart, top *topK, all bool, w, end int32) {
	acc, meta, theta := &part.acc, q.ix.meta, part.theta
	offer := func(o int32) {
		v := acc[o]
		if v == 0 || v*slack <= theta {
			return
		}
		if s := w + o; q.sf.ok(&meta[s]) && top.offer(scored{slot: s, score: v}) && len(top.h) == top.k {
			theta = max(theta, top.h[0].score)
		}
	}
	if all {
		for o := range end - w {
			offer(o)
		}
	} else {
		for _, o := range part.cand {
			offer(o)
		}
	}
	part.theta = theta
}

// addCommon is add for a common term, from its array of frequencies.
func (q *denseQuery) addCommon(common []uint8, c *cursor, t queryTerm, acc *[window]float64, w, end int32) {
	if int(w) >= len(common) {
		return // no slot this far holds the term
	}
	lens := q.ix.lens[w:end]
	arr := common[w:min(end, int32(len(common)))]
	lens = lens[:len(arr)]
	// A slot without the term adds 0 (exactly: the sum is unchanged),
	// which costs less than a branch that most slots take one way and
	// many the other.
	for o, f := range arr {
		tf := uint32(f)
		if f == tfSaturated {
			tf = tfIn(nil, c, w+int32(o))
		}
		acc[o] += q.bm.score(t.scale, tf, lens[o])
	}
}

// firstCommon adds the first term, common, into acc for the slots of [w,
// end) whose frequency reaches q.need for their length, and returns them
// (from slot w) appended to cand. It reads the slots marked, if any, else
// every slot's frequency.
func (q *denseQuery) firstCommon(common []uint8, c *cursor, acc *[window]float64, w, end int32, cand []int32) []int32 {
	if int(w) >= len(common) {
		return cand
	}
	t, need := q.terms[0], q.need
	arr := common[w:min(end, int32(len(common)))]
	lens := q.ix.lens[w : w+int32(len(arr))]
	take := func(o int32) {
		f := arr[o]
		if f < need[min(int(lens[o]), len(need)-1)] {
			return
		}
		u := uint32(f)
		if f == tfSaturated {
			u = tfIn(nil, c, w+o)
		}
		acc[o] += q.bm.score(t.scale, u, lens[o])
		cand = append(cand, o)
	}
	if q.marked == nil {
		for o := range int32(len(arr)) {
			take(o)
		}
		return cand
	}
	n := w + int32(len(arr))
	for base := w &^ 63; base < n; base += 64 {
		word := q.marked[base>>6]
		if base < w {
			word &= ^uint64(0) << (w - base)
		}
		if n-base < 64 {
			word &= 1<<(n-base) - 1
		}
		for ; word != 0; word &= word - 1 {
			take(base + int32(bits.TrailingZeros64(word)) - w)
		}
	}
	return cand
}

// needFor returns, by document length (the last standing for every
// length past it), the least frequency of the first term that can give
// more than least: a slot below it cannot enter. Rounded towards letting
// a slot through; tfSaturated always passes.
func (q *denseQuery) needFor(least float64) []uint8 {
	need := make([]uint8, 1024)
	scale := q.terms[0].scale
	for l := range need {
		// score > least ⟺ tf·(scale-least) > least·(c0+c1·l), the
		// denominator tf+c0+c1·l being positive.
		n := 1.0
		if least > 0 {
			if scale <= least {
				need[l] = tfSaturated
				continue
			}
			n = math.Floor(least*(1-1e-6)*(q.bm.c0+q.bm.c1*float64(l))/(scale-least)) + 1
		}
		need[l] = uint8(min(max(n, 1), tfSaturated))
	}
	return need
}

// add adds term t's score in every slot of [w, end) holding it into acc
// (from slot w), its postings read from c on, inline: most varints are a
// byte.
func (q *denseQuery) add(c *cursor, t queryTerm, acc *[window]float64, w, end int32) {
	c.seek(w) // a window that looked the term up left it behind
	p, lens := c.p, q.ix.lens
	data, blocks := p.data, p.blocks
	blk, pos, stop, slot, tf := c.blk, c.pos, c.end, c.slot, c.tf
	for slot < end {
		acc[slot-w] += q.bm.score(t.scale, tf, lens[slot])
		if pos >= stop {
			if blk++; blk >= len(blocks) {
				slot = endSlot
				break
			}
			pos, stop = int(blocks[blk].off), p.blockEnd(blk)
			slot = blocks[blk-1].last
		}
		delta := uint64(data[pos])
		pos++
		if delta >= 0x80 {
			v, n := binary.Uvarint(data[pos-1:])
			delta, pos = v, pos-1+n
		}
		f := uint64(data[pos])
		pos++
		if f >= 0x80 {
			v, n := binary.Uvarint(data[pos-1:])
			f, pos = v, pos-1+n
		}
		slot += int32(delta)
		tf = uint32(f)
	}
	c.blk, c.pos, c.end, c.slot, c.tf = blk, pos, stop, slot, tf
}
