package embedded

import (
	"math"
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
		cs[i] = termCursor{cursor: cursor{p: p}, scale: t.scale, ub: bound(t.scale, p.maxTF, p.minLen), order: i}
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
	meta := ix.meta
	top := topK{k: limit}
	// A document enters the results only with a score above theta (the
	// limit-th best so far once there are limit of them). Bounds are
	// compared a hair high, against rounding.
	theta := math.Inf(-1)
	const slack = 1 + 1e-9
	essential := 0 // cs[essential:] are walked; cs[:essential] looked up
	// The window: up to the end of the first block, among every term's
	// blocks around the candidate, and what any document in it can get
	// at most (as of theta then).
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
			ub := 0.0
			winEnd, winTheta = endSlot, theta
			for i := range cs {
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
		m := &meta[d]
		if !sf.ok(m) {
			for i := essential; i < len(cs); i++ {
				if cs[i].slot == d {
					cs[i].next()
				}
			}
			continue
		}
		score := 0.0
		for i := essential; i < len(cs); i++ {
			if c := &cs[i]; c.slot == d {
				contrib[c.order] = bm.score(c.scale, c.tf, m.length)
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
			c.seek(d)
			if c.slot == d {
				contrib[c.order] = bm.score(c.scale, c.tf, m.length)
				score += contrib[c.order]
			}
		}
		if score*slack > theta || len(top.h) < top.k {
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

// denseBuf is the score array of dense, pooled: one float64 a slot.
type denseBuf struct{ acc []float64 }

var densePool = sync.Pool{New: func() any { return new(denseBuf) }}

// dense ranks as lexical does, term at a time: every posting of every term
// adds into one score per slot (in the query's order of terms, as
// exhaustive scoring adds), then one pass keeps the best.
func (ix *index) dense(f *memory.Filter, terms []queryTerm, bm bm25, limit int) []scored {
	buf := densePool.Get().(*denseBuf)
	defer densePool.Put(buf)
	n := len(ix.meta)
	if cap(buf.acc) < n {
		// With room: every chat adds a turn.
		buf.acc = make([]float64, n, n+n/8+1024)
	}
	acc := buf.acc[:n]
	meta := ix.meta
	for _, t := range terms {
		c := cursor{p: &ix.post[t.id]}
		for c.start(); c.slot != endSlot; c.next() {
			acc[c.slot] += bm.score(t.scale, c.tf, meta[c.slot].length)
		}
	}
	sf := compile(f)
	top := topK{k: limit}
	for s, v := range acc {
		if v != 0 {
			if sf.ok(&meta[s]) {
				top.offer(scored{slot: int32(s), score: v})
			}
			acc[s] = 0
		}
	}
	return top.best()
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
