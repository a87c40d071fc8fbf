package embedded

import (
	"math"
	"slices"

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
// It is block-max WAND (Ding and Suel, 2011): the terms' postings are
// walked together, document by document, and a document is scored only
// when the bounds of the terms that can hold it, first of their whole
// lists, then of the blocks around it, could beat the limit-th best score
// so far. Blocks that cannot are skipped without being read, which is
// most of the postings of a question made of common words. The ranking is
// exact: the same as scoring every document (ties keep the lower slot).
func (ix *index) lexical(f *memory.Filter, text string, limit int) []scored {
	terms := ix.queryTerms(text)
	if len(terms) == 0 || limit <= 0 {
		return nil
	}
	avg := float64(ix.total) / float64(ix.live)
	if avg == 0 {
		avg = 1
	}
	// k1·(1-b) and k1·b/avg: the length normalisation is then one
	// multiply-add.
	c0, c1 := bm25K1*(1-bm25B), bm25K1*bm25B/avg
	bound := func(scale float64, tf uint32, length float32) float64 {
		t := float64(tf)
		return scale * t / (t + c0 + c1*float64(length))
	}
	tcs := make([]termCursor, len(terms))
	cs := make([]*termCursor, len(terms))
	for i, t := range terms {
		p := &ix.post[t.id]
		tcs[i] = termCursor{cursor: cursor{p: p}, scale: t.scale, ub: bound(t.scale, p.maxTF, p.minLen), order: i}
		tcs[i].start()
		cs[i] = &tcs[i]
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
	for {
		// Cursors by their current slot; finished ones last.
		slices.SortFunc(cs, func(a, b *termCursor) int { return int(a.slot) - int(b.slot) })
		for len(cs) > 0 && cs[len(cs)-1].slot == endSlot {
			cs = cs[:len(cs)-1]
		}
		if len(cs) == 0 {
			break
		}
		// The pivot: the first slot where the terms so far could beat
		// theta; no document before it can.
		p, acc := -1, 0.0
		for i, c := range cs {
			if acc += c.ub; acc*slack > theta {
				p = i
				break
			}
		}
		if p < 0 {
			break
		}
		pivot := cs[p].slot
		for p+1 < len(cs) && cs[p+1].slot == pivot {
			p++
		}
		// The bound of the blocks around the pivot, and where the first
		// of them ends.
		blocks, skipTo := 0.0, int32(endSlot)
		for _, c := range cs[:p+1] {
			i := c.blockOf(pivot)
			if i == len(c.p.blocks) {
				continue // the term ends before the pivot
			}
			b := &c.p.blocks[i]
			blocks += bound(c.scale, b.maxTF, b.minLen)
			skipTo = min(skipTo, b.last+1)
		}
		switch {
		case blocks*slack <= theta:
			// Nothing up to the end of the first of those blocks can
			// beat theta: skip there (or to the next term's slot).
			ix.pruned.Add(1)
			if p+1 < len(cs) {
				skipTo = min(skipTo, cs[p+1].slot)
			}
			for _, c := range cs[:p+1] {
				c.seek(skipTo)
			}
		case cs[0].slot == pivot:
			// Every term that holds the pivot is on it: score it.
			if m := &meta[pivot]; sf.ok(m) {
				for _, c := range cs[:p+1] {
					t := float64(c.tf)
					contrib[c.order] = c.scale * t / (t + c0 + c1*float64(m.length))
				}
				score := 0.0
				for i, v := range contrib {
					score += v
					contrib[i] = 0
				}
				if top.offer(scored{slot: pivot, score: score}) && len(top.h) == top.k {
					theta = top.h[0].score
				}
			}
			for _, c := range cs[:p+1] {
				c.next()
			}
		default:
			// The terms before the pivot move up to it.
			for _, c := range cs[:p] {
				c.seek(pivot)
			}
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
