package embedded

import (
	"math"
	"math/bits"
	"slices"
	"sync"

	"github.com/vera-proxy/vera/memory"
)

// lexBuf is the per-search scratch of lexical scoring, pooled: a fresh
// accumulator per search on a 100k namespace would be 400 KB of garbage.
type lexBuf struct {
	acc     []float32
	touched []int32
}

var scorePool = sync.Pool{New: func() any { return new(lexBuf) }}

// queryTerm is one distinct query term with its BM25 weight: scale is
// IDF·(k1+1)·(times it occurs in the query), which is also the most one
// document can get from the term (tf/(tf+k1·norm) < 1).
type queryTerm struct {
	id    int32
	scale float32
}

// lexical ranks the documents passing f by BM25 over the query terms.
//
// It uses MaxScore pruning (Turtle and Flood, 1995, as in Lucene): terms go
// rarest first, and once the limit-th best score so far is at least what
// all the remaining terms together could give a document, no document
// without a rarer term can reach the results. The remaining (common, long)
// postings then only add to the documents already scored, found by binary
// search, instead of being walked whole. The ranking is exact.
func (ix *index) lexical(f *memory.Filter, text string, limit int) []scored {
	terms := ix.queryTerms(text)
	if len(terms) == 0 {
		return nil
	}
	n := float64(ix.live)
	// rest[i]: the most terms[i:] can add to one document.
	rest := make([]float32, len(terms)+1)
	for i := len(terms) - 1; i >= 0; i-- {
		rest[i] = rest[i+1] + terms[i].scale
	}

	buf := scorePool.Get().(*lexBuf)
	defer scorePool.Put(buf)
	if cap(buf.acc) < len(ix.docs) {
		// With room to grow: every chat adds a turn, and a buffer sized
		// exactly would be made again (megabytes of fresh pages at a
		// million memories) for the next chat. Past the length used so
		// far the buffer is still zero.
		buf.acc = make([]float32, len(ix.docs), len(ix.docs)+len(ix.docs)/8+1024)
	}
	acc := buf.acc[:len(ix.docs)]
	touched := buf.touched[:0]
	defer func() { buf.touched = touched[:0] }()
	avg := float64(ix.total) / n
	if avg == 0 {
		avg = 1
	}
	// k1·(1-b) and k1·b/avg: the length normalisation is then one
	// multiply-add per posting.
	c0, c1 := float32(bm25K1*(1-bm25B)), float32(bm25K1*bm25B/avg)
	meta := ix.meta
	sf := compile(f)
	for i, t := range terms {
		p := ix.post[t.id]
		if i > 0 && ix.settled(acc, touched, &sf, limit, rest[i]) {
			// Only the documents already scored can still make the results.
			ix.pruned.Add(1)
			for _, t := range terms[i:] {
				ix.addTo(acc, touched, ix.post[t.id], t.scale, c0, c1)
			}
			break
		}
		for _, e := range p {
			tf := float32(e.tf)
			if acc[e.slot] == 0 {
				touched = append(touched, e.slot)
			}
			acc[e.slot] += t.scale * tf / (tf + c0 + c1*meta[e.slot].length)
		}
	}
	top := topK{k: limit}
	for _, s := range touched {
		if sf.ok(&meta[s]) {
			top.offer(scored{slot: s, score: float64(acc[s])})
		}
		acc[s] = 0
	}
	return top.best()
}

// queryTerms weighs the query's terms that the index holds (BM25's idf,
// times k1+1; a term asked twice counts twice), heaviest first.
func (ix *index) queryTerms(text string) []queryTerm {
	qt := memory.Terms(text)
	if len(qt) == 0 || ix.live == 0 {
		return nil
	}
	n := float64(ix.live)
	var terms []queryTerm
	for _, t := range qt {
		id, ok := ix.terms[t]
		if !ok || len(ix.post[id]) == 0 {
			continue
		}
		df := float64(len(ix.post[id]))
		scale := float32(math.Log(1+(n-df+0.5)/(df+0.5)) * (bm25K1 + 1))
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

// settled reports whether at least limit scored documents passing sf
// already have bound or more: then a document with none of the terms
// scored so far cannot make the results. One pass, stopping early.
func (ix *index) settled(acc []float32, touched []int32, sf *slotFilter, limit int, bound float32) bool {
	if len(touched) < limit {
		return false
	}
	n := 0
	for _, s := range touched {
		if acc[s] >= bound && sf.ok(&ix.meta[s]) {
			if n++; n >= limit {
				return true
			}
		}
	}
	return false
}

// addTo adds a term's scores to the documents already scored (acc > 0)
// that are in its postings p: by binary search for each document when
// that is cheaper than walking p, else by walking p.
func (ix *index) addTo(acc []float32, touched []int32, p []posting, scale, c0, c1 float32) {
	meta := ix.meta
	if len(touched)*bits.Len(uint(len(p))) < len(p) {
		for _, s := range touched {
			j, ok := slices.BinarySearchFunc(p, s, func(e posting, s int32) int { return int(e.slot - s) })
			if ok {
				tf := float32(p[j].tf)
				acc[s] += scale * tf / (tf + c0 + c1*meta[s].length)
			}
		}
		return
	}
	for _, e := range p {
		if acc[e.slot] != 0 {
			tf := float32(e.tf)
			acc[e.slot] += scale * tf / (tf + c0 + c1*meta[e.slot].length)
		}
	}
}
