package embedded

import (
	"cmp"
	"encoding/binary"
	"math"
	"runtime"
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
// theta. A question of common words so reads few of their postings. The
// ranking is exact: the same as scoring every document (ties keep the
// lower slot).
func (ix *index) lexical(f *memory.Filter, text string, limit int) []scored {
	terms := ix.queryTerms(text)
	if len(terms) == 0 || limit <= 0 {
		return nil
	}
	avg := float64(ix.total) / float64(ix.live)
	if avg == 0 {
		avg = 1
	}
	bm := bm25{c0: bm25K1 * (1 - bm25B), c1: bm25K1 * bm25B / avg}
	rarest := int32(math.MaxInt32)
	for _, t := range terms {
		rarest = min(rarest, ix.post[t.id].n)
	}
	if int(rarest) >= len(ix.meta)/8 {
		// Only terms that many memories hold: adding their postings
		// into one array of scores beats walking them document by
		// document (no rare term leads the way).
		return ix.dense(f, terms, bm, limit)
	}
	return ix.maxScore(f, terms, bm, limit)
}

// bm25 scores a term in a document: k1·(1-b) and k1·b/avg, so that the
// length normalisation is one multiply-add.
type bm25 struct{ c0, c1 float64 }

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
		cs[i] = termCursor{cursor: cursor{p: p}, scale: t.scale, ub: bound(t.scale, p.maxTF, p.minLen), order: i, common: ix.common[t.id]}
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
	sf := compile(f)
	meta, lens := ix.meta, ix.lens
	top := topK{k: limit}
	// A document enters the results only with a score above theta (the
	// limit-th best so far once there are limit of them). Bounds are
	// compared a hair high, against rounding.
	theta := math.Inf(-1)
	const slack = 1 + 1e-9
	essential := 0 // cs[essential:] are walked; cs[:essential] looked up
	// The window: up to the end of the first block, among the essential
	// terms' blocks around the candidate, and what any document in it can
	// get at most (as of theta then): those blocks' bounds, and the other
	// terms' whole bounds (looking their blocks up too cost more than it
	// saved: a rare candidate is a window of its own).
	winEnd, winTheta := int32(-1), theta
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
		// The non-essential terms, strongest first, while they can
		// still lift the document above theta.
		for i := essential - 1; i >= 0; i-- {
			if (score+prefix[i+1])*slack <= theta {
				break
			}
			c := &cs[i]
			b := c.blockOf(d)
			if b == len(c.p.blocks) {
				continue
			}
			if blk := &c.p.blocks[b]; (score+prefix[i]+bound(c.scale, blk.maxTF, blk.minLen))*slack <= theta {
				// Not even this term's block and the weaker terms
				// together can lift it: it stays out.
				score = math.Inf(-1)
				break
			}
			if tf := tfIn(c.common, &c.cursor, d); tf > 0 {
				contrib[c.order] = bm.score(c.scale, tf, ln)
				score += contrib[c.order]
			}
		}
		if (score*slack > theta || len(top.h) < top.k) && sf.ok(&meta[d]) {
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

// denseBuf is dense's scratch, pooled: one float64 a slot, and each
// part's own.
type denseBuf struct {
	acc   []float64
	parts []densePart
}

// densePart is the scratch of one range of slots: a table of a term's
// scores, and the slots kept after the cut.
type densePart struct {
	table [tableTF * tableLen]float64
	kept  []scored
	top   []scored
}

// The score table covers frequencies below tableTF in documents shorter
// than tableLen terms: most postings of common terms.
const (
	tableTF  = 16
	tableLen = 256
)

var densePool = sync.Pool{New: func() any { return new(denseBuf) }}

// dense ranks as lexical does, term at a time, for questions whose rarest
// term most memories hold: every posting of a term adds into one score per
// slot, in the query's order of terms (as exhaustive scoring adds). A
// large namespace is cut into ranges of slots ranked on every core, each
// to its own best, merged.
func (ix *index) dense(f *memory.Filter, terms []queryTerm, bm bm25, limit int) []scored {
	chunks := 1
	if len(ix.meta) >= parallelAbove {
		chunks = runtime.GOMAXPROCS(0)
	}
	return ix.denseIn(f, terms, bm, limit, chunks)
}

// denseIn is dense in chunks ranges of slots.
func (ix *index) denseIn(f *memory.Filter, terms []queryTerm, bm bm25, limit, chunks int) []scored {
	buf := densePool.Get().(*denseBuf)
	defer densePool.Put(buf)
	n := len(ix.meta)
	if cap(buf.acc) < n {
		// With room: every chat adds a turn.
		buf.acc = make([]float64, n, n+n/8+1024)
	}
	if len(buf.parts) < chunks {
		buf.parts = make([]densePart, chunks)
	}
	q := denseQuery{ix: ix, acc: buf.acc[:n], sf: compile(f), terms: terms, bm: bm, limit: limit}
	// rest[i]: the most terms[i:] can add to one document.
	q.rest = make([]float64, len(terms)+1)
	for i := len(terms) - 1; i >= 0; i-- {
		p := &ix.post[terms[i].id]
		q.rest[i] = q.rest[i+1] + bm.score(terms[i].scale, p.maxTF, p.minLen)
	}
	step := (n + chunks - 1) / chunks
	var wg sync.WaitGroup
	for c := range chunks {
		lo, hi := int32(min(c*step, n)), int32(min((c+1)*step, n))
		wg.Go(func() { q.rank(&buf.parts[c], lo, hi) })
	}
	wg.Wait()
	top := topK{k: limit}
	for c := range chunks {
		for _, h := range buf.parts[c].top {
			top.offer(h)
		}
	}
	return top.best()
}

// denseQuery is one question of dense.
type denseQuery struct {
	ix    *index
	acc   []float64
	sf    slotFilter
	terms []queryTerm
	rest  []float64 // rest[i]: the most terms[i:] can add
	bm    bm25
	limit int
}

// rank ranks the slots in [lo, hi) into part.top.
//
// MaxScore's test cuts it short: once the limit-th best score so far
// (theta) is above the most the terms left can add, no slot below theta
// minus what they can add can enter the results. When few slots are above
// it, they are kept, and the terms left are sought for them alone, not
// added whole: a question of common words then adds the postings of its
// one or two rarest terms only.
func (q *denseQuery) rank(part *densePart, lo, hi int32) {
	const slack = 1 + 1e-9
	ix, acc := q.ix, q.acc[lo:hi]
	left := 0 // the postings of the terms not added yet, about, in range
	for _, t := range q.terms {
		left += int(ix.post[t.id].n)
	}
	left = int(int64(left) * int64(hi-lo) / int64(max(len(ix.meta), 1)))
	for i, t := range q.terms {
		top := q.accumulate(part, t, lo, hi)
		left -= int(int64(ix.post[t.id].n) * int64(hi-lo) / int64(max(len(ix.meta), 1)))
		if i+1 == len(q.terms) || len(top.h) < top.k || q.rest[i+1]*slack >= top.h[0].score {
			continue
		}
		// theta from the limit best so far, completed: near the final one.
		theta := q.finish(top.h, i+1)
		if least := theta - q.rest[i+1]; few(acc, least, left) {
			part.kept = survivors(acc, lo, least, part.kept[:0])
			part.top = q.complete(part.kept, i+1, theta)
			return
		}
	}
	meta := ix.meta
	top := topK{k: q.limit, h: part.top[:0]}
	for k, v := range acc {
		if v != 0 {
			if s := lo + int32(k); q.sf.ok(&meta[s]) {
				top.offer(scored{slot: s, score: v})
			}
			acc[k] = 0
		}
	}
	part.top = top.h
}

// accumulate adds term t's score in every slot of [lo, hi) holding it into
// acc, and returns the limit best of the sums it made in slots passing the
// filter. Scores only grow: the limit-th of them is below the final one.
func (q *denseQuery) accumulate(part *densePart, t queryTerm, lo, hi int32) topK {
	table := &part.table
	for tf := range tableTF {
		for l := range tableLen {
			table[tf*tableLen+l] = q.bm.score(t.scale, uint32(tf), float32(l))
		}
	}
	ix, acc := q.ix, q.acc
	meta, lens := ix.meta, ix.lens
	top := topK{k: q.limit}
	floor := math.Inf(-1) // the heap's least, once full
	p := &ix.post[t.id]
	data := p.data
	c := cursor{p: p}
	b := c.blockOf(lo)
	slot := int32(-1)
	if b > 0 && b < len(p.blocks) {
		slot = p.blocks[b-1].last
	}
	for ; b < len(p.blocks); b++ {
		// A block's postings, decoded inline: most varints are a byte.
		for pos, end := int(p.blocks[b].off), p.blockEnd(b); pos < end; {
			delta := uint64(data[pos])
			pos++
			if delta >= 0x80 {
				v, n := binary.Uvarint(data[pos-1:])
				delta, pos = v, pos-1+n
			}
			tf := uint64(data[pos])
			pos++
			if tf >= 0x80 {
				v, n := binary.Uvarint(data[pos-1:])
				tf, pos = v, pos-1+n
			}
			slot += int32(delta)
			if slot < lo {
				continue
			}
			if slot >= hi {
				return top
			}
			var v float64
			if l := lens[slot]; tf < tableTF && l < tableLen {
				v = table[int(tf)*tableLen+int(l)]
			} else {
				v = q.bm.score(t.scale, uint32(tf), l)
			}
			a := acc[slot] + v
			acc[slot] = a
			if a > floor && q.sf.ok(&meta[slot]) && top.offer(scored{slot: slot, score: a}) && len(top.h) == top.k {
				floor = top.h[0].score
			}
		}
	}
	return top
}

// finish returns the limit-th best final score of the slots in best
// (sums of the terms before from), the terms from on sought for each: a
// bound below the final limit-th best, and close to it.
func (q *denseQuery) finish(best []scored, from int) float64 {
	hs := slices.Clone(best)
	slices.SortFunc(hs, func(a, b scored) int { return cmp.Compare(a.slot, b.slot) })
	for _, t := range q.terms[from:] {
		c := cursor{p: &q.ix.post[t.id]}
		c.start()
		common := q.ix.common[t.id]
		for k := range hs {
			if tf := tfIn(common, &c, hs[k].slot); tf > 0 {
				hs[k].score += q.bm.score(t.scale, tf, q.ix.lens[hs[k].slot])
			}
		}
	}
	least := math.Inf(1)
	for _, h := range hs {
		least = min(least, h.score)
	}
	return least
}

// few reports whether few enough slots of acc are above least, by a
// sample, that seeking the terms left for them alone beats adding their
// postings (left of them): a seek costs about what adding a block's worth
// of postings does.
func few(acc []float64, least float64, left int) bool {
	const stride = 61
	n := 0
	for s := 0; s < len(acc); s += stride {
		if acc[s] > least {
			n++
		}
	}
	return n*stride*16 < left
}

// survivors returns the slots of acc (from slot lo) above least, with
// their scores, in slot order, and clears acc.
func survivors(acc []float64, lo int32, least float64, out []scored) []scored {
	const slack = 1 + 1e-9
	for k, v := range acc {
		if v != 0 {
			acc[k] = 0
			if v*slack > least {
				out = append(out, scored{slot: lo + int32(k), score: v})
			}
		}
	}
	return out
}

// complete ranks the kept slots (sums of the terms before from), the
// terms from on sought for each, document at a time: a slot stops as soon
// as it cannot reach theta, the limit-th best so far.
func (q *denseQuery) complete(kept []scored, from int, theta float64) []scored {
	const slack = 1 + 1e-9
	terms, rest := q.terms[from:], q.rest[from:]
	cs := make([]cursor, len(terms))
	common := make([][]uint8, len(terms))
	for j, t := range terms {
		cs[j] = cursor{p: &q.ix.post[t.id]}
		cs[j].start()
		common[j] = q.ix.common[t.id]
	}
	meta, lens := q.ix.meta, q.ix.lens
	top := topK{k: q.limit}
	for _, h := range kept {
		score := h.score
		for j := range terms {
			if (score+rest[j])*slack <= theta {
				score = -1
				break
			}
			if tf := tfIn(common[j], &cs[j], h.slot); tf > 0 {
				score += q.bm.score(terms[j].scale, tf, lens[h.slot])
			}
		}
		if score < 0 || score*slack <= theta && len(top.h) == top.k {
			continue
		}
		if q.sf.ok(&meta[h.slot]) && top.offer(scored{slot: h.slot, score: score}) && len(top.h) == top.k {
			theta = max(theta, top.h[0].score)
		}
	}
	return top.h
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
