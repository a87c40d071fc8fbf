package embedded

import (
	"encoding/binary"
	"math"
	"math/bits"
	"slices"
	"sync"

	"github.com/vera-proxy/vera/memory"
)

// queryTerm is one distinct query term with its BM25 weight: scale is
// IDF·(k1+1)·(times it occurs in the query), which is also the most one
// document can get from the term (tf/(tf+k1·norm) < 1).
type queryTerm struct {
	id    int32
	scale float64
}

// termCursor walks one query term's postings during a search.
type termCursor struct {
	cursor
	scale float64
	ub    float64 // the most the term can give any document
	order int     // the term's place in the query, which sums go in
	// common is the term's frequencies by slot, if it is common: looked
	// up, it is read there rather than sought.
	common []uint8
}

// lexical ranks the documents passing f by BM25 over the query terms.
//
// It is block-max MaxScore (Turtle and Flood, 1995; with block bounds as
// in Ding and Suel, 2011, and Lucene): the terms go by their bound, the
// most any document can get from them. Once the limit-th best score so
// far (theta) is at least what the weakest terms together can give, those
// are non-essential: a document holding none of the others cannot enter
// the results, so only the other (rarer) terms' postings are walked, and
// a candidate looks a non-essential term up (skipping whole blocks) only
// while its score plus the bounds of the blocks left could still beat
// theta. A question of common words so reads few of their postings. A
// candidate is first bounded by its frequencies and its blocks' shortest
// lengths, the non-essential terms' looked up too, and its own length (a
// cache miss in a large namespace) is read only when that bound could
// beat theta. When one term is rare, theta starts at the floor its own
// documents give (rarestFloor). The ranking is exact: the same as
// scoring every document (ties keep the lower slot).
//
// With j, a ranking on several cores leaves one worker to whoever joins
// (joinPoint).
func (ix *index) lexical(f *memory.Filter, text string, limit int, j *joinPoint) []scored {
	return ix.rankTerms(f, ix.queryTerms(text), limit, j)
}

// rankTerms is lexical for the query's terms (queryTerms).
func (ix *index) rankTerms(f *memory.Filter, terms []queryTerm, limit int, j *joinPoint) []scored {
	if len(terms) == 0 || limit <= 0 {
		return nil
	}
	bm := ix.bm25()
	rarest := int32(math.MaxInt32)
	for _, t := range terms {
		rarest = min(rarest, ix.post[t.id].n)
	}
	if int(rarest) >= len(ix.meta)/8 {
		// Only terms that many memories hold: adding their postings a
		// window of slots at a time beats walking them document by
		// document (no rare term leads the way).
		return ix.dense(f, terms, bm, limit, j)
	}
	return ix.maxScore(f, terms, bm, limit)
}

// rarestFloor is where maxScore's theta starts: just under the limit-th
// best score the rarest term alone gives the documents passing sf that
// hold it, when it is rare (a few times limit); else -Inf. That many
// documents score at least as much in all, so none below can enter; a
// candidate of the commoner terms alone is then bounded from the start,
// not once the walk has found limit better ones.
func (ix *index) rarestFloor(cs []termCursor, sf *slotFilter, bm bm25, limit int) float64 {
	if len(cs) < 2 {
		return math.Inf(-1)
	}
	r := &cs[0]
	for i := range cs {
		if cs[i].p.n < r.p.n {
			r = &cs[i]
		}
	}
	if int(r.p.n) < limit || int(r.p.n) > limit*rarestFloorAt {
		return math.Inf(-1)
	}
	top := topK{k: limit}
	c := cursor{p: r.p}
	for c.start(); c.slot != endSlot; c.next() {
		if s := c.slot; sf.ok(&ix.meta[s]) {
			top.offer(scored{slot: s, score: bm.score(r.scale, c.tf, ix.lens[s])})
		}
	}
	if len(top.h) < limit {
		return math.Inf(-1)
	}
	// Strictly under: a document scoring the floor itself may still
	// enter, on a lower slot.
	return top.h[0].score * (1 - 1e-9)
}

// rarestFloorAt: the rarest term gives maxScore a floor when it holds at
// most this many times the limit's documents; each is a length read.
const rarestFloorAt = 16

// slack: bounds are compared with scores a hair high, against rounding.
const slack = 1 + 1e-9

// bm25 scores a term in a document: k1·(1-b) and k1·b/avg, so that the
// length normalisation is one multiply-add.
type bm25 struct{ c0, c1 float64 }

// newBM25 is the scoring for documents of avg terms on average (0: 1).
func newBM25(avg float64) bm25 {
	if !(avg > 0) {
		avg = 1
	}
	return bm25{c0: bm25K1 * (1 - bm25B), c1: bm25K1 * bm25B / avg}
}

// score is what a term of weight scale, found tf times in a document of
// length terms, gives it; with a block's highest tf and shortest length,
// the most it gives any document of the block.
func (bm bm25) score(scale float64, tf uint32, length float32) float64 {
	t := float64(tf)
	return scale * t / (t + bm.c0 + bm.c1*float64(length))
}

// maxScore is lexical's document-at-a-time ranking.
func (ix *index) maxScore(f *memory.Filter, terms []queryTerm, bm bm25, limit int) []scored {
	bound := bm.score
	// Cursors by bound, weakest first; prefix[i] is the sum of the
	// bounds of cs[:i].
	cs := make([]termCursor, len(terms))
	for i, t := range terms {
		p := &ix.post[t.id]
		cs[i] = termCursor{cursor: ix.cursorOf(t.id), scale: t.scale, ub: bound(t.scale, p.maxTF, p.minLen), order: i, common: ix.common[t.id]}
		cs[i].start()
	}
	slices.SortStableFunc(cs, func(a, b termCursor) int {
		switch {
		case a.ub < b.ub:
			return -1
		case a.ub > b.ub:
			return 1
		}
		return 0
	})
	prefix := make([]float64, len(cs)+1)
	for i := range cs {
		prefix[i+1] = prefix[i] + cs[i].ub
	}
	contrib := make([]float64, len(terms))
	tfs := make([]uint32, len(terms)) // by place in cs
	sf := compile(f)
	meta, lens := ix.meta, ix.lens
	top := topK{k: limit}
	// A document enters the results only with a score above theta: the
	// limit-th best so far once there are limit of them, and from the
	// start at least the rarest term's floor. Bounds are compared a hair
	// high, against rounding.
	theta := ix.rarestFloor(cs, &sf, bm, limit)
	essential := 0 // cs[essential:] are walked; cs[:essential] looked up
	for essential < len(cs) && prefix[essential+1]*slack <= theta {
		essential++
	}
	// The window: up to the end of the first block, among the essential
	// terms' blocks around the candidate, and what any document in it can
	// get at most (as of theta then): those blocks' bounds, and the other
	// terms' whole bounds (looking their blocks up too cost more than it
	// saved: a rare candidate is a window of its own).
	winEnd, winTheta := int32(-1), theta
	unread := int64(0) // candidates dismissed before their length was read
	defer func() { ix.unread.Add(unread) }()
	for {
		// The next candidate: the lowest slot of an essential term.
		d := int32(endSlot)
		for i := essential; i < len(cs); i++ {
			d = min(d, cs[i].slot)
		}
		if d == endSlot {
			break
		}
		if d > winEnd || winTheta != theta {
			ub := prefix[essential]
			winEnd, winTheta = endSlot, theta
			for i := essential; i < len(cs); i++ {
				c := &cs[i]
				if b := c.blockOf(d); b < len(c.p.blocks) {
					blk := &c.p.blocks[b]
					ub += bound(c.scale, blk.maxTF, blk.minLen)
					winEnd = min(winEnd, blk.last)
				}
			}
			if ub*slack <= theta && winEnd < endSlot {
				// No document up to the window's end can enter:
				// the essential terms skip past it, block by block.
				ix.pruned.Add(1)
				for i := essential; i < len(cs); i++ {
					cs[i].seek(winEnd + 1)
				}
				winEnd = -1
				continue
			}
		}
		if theta > math.Inf(-1) {
			// What d could get at most, without its length (a cache
			// miss away in a large namespace): the essential terms'
			// frequencies at d, each with its block's shortest
			// length, and the other terms' whole bounds. Most
			// candidates of a question of a few rare words hold one
			// of them, and stop here.
			ub := prefix[essential]
			for i := essential; i < len(cs); i++ {
				if c := &cs[i]; c.slot == d {
					ub += bm.score(c.scale, c.tf, c.p.blocks[c.blk].minLen)
				}
			}
			// Then each other term, strongest first, in place of its
			// whole bound: its frequency at d with its block's
			// shortest length (nothing when d lacks it). A candidate
			// of one middling word needs another word to pass, and
			// most lack it.
			for i := essential - 1; i >= 0 && ub*slack > theta; i-- {
				c := &cs[i]
				ub -= c.ub
				tfs[i] = 0
				if c.lacks(d) {
					continue
				}
				b := c.blockOf(d)
				if b == len(c.p.blocks) {
					continue
				}
				if blk := &c.p.blocks[b]; (ub+bound(c.scale, blk.maxTF, blk.minLen))*slack > theta {
					if tfs[i] = tfIn(c.common, &c.cursor, d); tfs[i] > 0 {
						ub += bm.score(c.scale, tfs[i], blk.minLen)
					}
				}
			}
			if ub*slack <= theta {
				for i := essential; i < len(cs); i++ {
					if c := &cs[i]; c.slot == d {
						c.next()
					}
				}
				unread++
				continue
			}
		}
		// The filter is asked only of a document that could enter: its
		// meta is a cache miss away.
		ln := lens[d]
		score := 0.0
		for i := essential; i < len(cs); i++ {
			if c := &cs[i]; c.slot == d {
				contrib[c.order] = bm.score(c.scale, c.tf, ln)
				score += contrib[c.order]
				c.next()
			}
		}
		// The non-essential terms' frequencies at d were looked up for
		// its bound (there are some only once theta is above -Inf).
		for i := range essential {
			if tf := tfs[i]; tf > 0 {
				contrib[cs[i].order] = bm.score(cs[i].scale, tf, ln)
				score += contrib[cs[i].order]
			}
		}
		if score*slack > theta && sf.ok(&meta[d]) {
			// The sum again in the query's order, as exhaustive scoring
			// adds: the ranking does not depend on which terms were
			// looked up.
			exact := 0.0
			for i, v := range contrib {
				exact += v
				contrib[i] = 0
			}
			if top.offer(scored{slot: d, score: exact}) && len(top.h) == top.k && top.h[0].score > theta {
				theta = top.h[0].score
				for essential < len(cs) && prefix[essential+1]*slack <= theta {
					essential++
					ix.pruned.Add(1)
				}
			}
		} else {
			clear(contrib)
		}
	}
	return top.best()
}

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

// densePiece is how many slots a worker of dense claims at a time (a
// variable for the tests).
var densePiece = 8 * window

var densePool = sync.Pool{New: func() any { return new([]densePart) }}

// markPool keeps the arrays of strongest.mark's bitmaps.
var markPool = sync.Pool{New: func() any { return new([]uint64) }}

// dense ranks as lexical does, for questions whose rarest term most
// memories hold, a window of slots at a time: each term's postings in
// the window add into the window's scores, in the query's order of terms
// (as exhaustive scoring adds). A large namespace is ranked on every
// core, each worker to its own best, merged.
func (ix *index) dense(f *memory.Filter, terms []queryTerm, bm bm25, limit int, j *joinPoint) []scored {
	return ix.denseIn(f, terms, bm, limit, densePiece, spreadWorkers(len(ix.meta)), j)
}

// denseIn is dense in pieces of piece slots, on up to workers workers.
func (ix *index) denseIn(f *memory.Filter, terms []queryTerm, bm bm25, limit, piece, workers int, j *joinPoint) []scored {
	parts := densePool.Get().(*[]densePart)
	defer densePool.Put(parts)
	if len(*parts) < workers {
		*parts = make([]densePart, workers)
	}
	for w := range workers {
		(*parts)[w].started = false
	}
	q := denseQuery{ix: ix, sf: compile(f), terms: terms, bm: bm, limit: limit}
	// rest[i]: the most terms[i:] can add to one document.
	q.rest = make([]float64, len(terms)+1)
	q.common = make([][]uint8, len(terms))
	for i := len(terms) - 1; i >= 0; i-- {
		p := &ix.post[terms[i].id]
		q.rest[i] = q.rest[i+1] + bm.score(terms[i].scale, p.maxTF, p.minLen)
		q.common[i] = ix.common[terms[i].id]
	}
	if q.floor = q.championsFloor(); len(terms) > 0 && q.rest[1]*slack <= q.floor {
		q.need = q.needFor(q.floor - q.rest[1])
		ix.floors.Add(1)
		if st := ix.strongest[terms[0].id]; st != nil {
			// The bitmap's array is kept for the next question: a new one
			// each time (25 KB at 200k memories) would be fresh memory,
			// each of its pages touched first (hugePages).
			buf := markPool.Get().(*[]uint64)
			defer markPool.Put(buf)
			if q.marked = st.mark(len(ix.meta), terms[0].scale, q.floor-q.rest[1], bm, *buf); q.marked != nil {
				*buf = q.marked
				ix.marked.Add(1)
			}
		}
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

// denseQuery is one question of dense.
type denseQuery struct {
	ix     *index
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
	ix := q.ix
	if !part.started {
		part.started, part.windows, part.theta = true, 0, q.floor
		part.top = part.top[:0]
		part.cs = slices.Grow(part.cs[:0], len(q.terms))[:len(q.terms)]
		part.many = slices.Grow(part.many[:0], len(q.terms))[:len(q.terms)]
		for i, t := range q.terms {
			part.cs[i] = ix.cursorOf(t.id)
			part.cs[i].start()
			part.many[i] = false
		}
	}
	cs, many, common := part.cs, part.many, q.common
	meta, lens := ix.meta, ix.lens
	top := topK{k: q.limit, h: part.top}
	theta := part.theta
	acc := &part.acc
	for w := lo; w < hi; w += window {
		end := min(w+window, hi)
		retry := part.windows%16 == 0
		part.windows++
		all := true // every slot of the window goes on; else part.cand
		first := 0  // the first term not added yet
		if q.need != nil && q.rest[1]*slack <= theta {
			// A slot without the strongest term cannot enter, nor one
			// that does not get enough from it: the window's candidates
			// are chosen on its array, without a division a slot.
			part.cand = q.firstCommon(common[0], &cs[0], acc, w, end, part.cand[:0])
			all, first = false, 1
		}
		for i, t := range q.terms {
			if i < first {
				continue
			}
			if all && i > 0 && q.rest[i]*slack < theta && (!many[i] || retry) {
				// Only the slots that could still reach theta, if
				// they are few next to the term's postings here.
				least := theta - q.rest[i]
				most := int(int64(end-w) * int64(ix.post[t.id].n) / int64(len(meta)) / 8)
				cand := part.cand[:0]
				for o, v := range acc[:end-w] {
					if v*slack > least {
						if len(cand) == most {
							break
						}
						cand = append(cand, int32(o))
					}
				}
				part.cand = cand
				all = len(cand) == most
				many[i] = all
			}
			if all {
				if common[i] != nil {
					q.addCommon(common[i], &cs[i], t, acc, w, end)
				} else {
					q.add(&cs[i], t, acc, w, end)
				}
				continue
			}
			cand := part.cand[:0]
			for _, o := range part.cand {
				if (acc[o]+q.rest[i])*slack <= theta {
					continue // it cannot reach theta
				}
				s := w + o
				if tf := tfIn(common[i], &cs[i], s); tf > 0 {
					acc[o] += q.bm.score(t.scale, tf, lens[s])
				}
				cand = append(cand, o)
			}
			part.cand = cand
		}
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
		clear(acc[:end-w])
	}
	part.top, part.theta = top.h, theta
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

// queryTerms weighs the query's terms that the index holds (BM25's idf,
// times k1+1; a term asked twice counts twice), heaviest first. A term's
// document frequency counts the postings of removed documents too, until
// the index is compacted.
func (ix *index) queryTerms(text string) []queryTerm {
	qt := memory.Terms(text)
	if len(qt) == 0 || ix.live == 0 {
		return nil
	}
	n := float64(ix.live)
	var terms []queryTerm
	for _, t := range qt {
		id, ok := ix.terms[t]
		if !ok || ix.post[id].n == 0 {
			continue
		}
		// Never above the live documents: the removed ones' postings
		// must not make a term's weight negative.
		df := min(float64(ix.post[id].n), n)
		scale := math.Log(1+(n-df+0.5)/(df+0.5)) * (bm25K1 + 1)
		if i := slices.IndexFunc(terms, func(q queryTerm) bool { return q.id == id }); i >= 0 {
			terms[i].scale += scale
		} else {
			terms = append(terms, queryTerm{id: id, scale: scale})
		}
	}
	slices.SortFunc(terms, func(a, b queryTerm) int {
		switch {
		case a.scale > b.scale:
			return -1
		case a.scale < b.scale:
			return 1
		}
		return int(a.id - b.id)
	})
	return terms
}
