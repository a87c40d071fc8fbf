package index

import (
	"math"
	"slices"

	"github.com/vera-proxy/vera/memory"
	"github.com/vera-proxy/vera/text"
)

// queryTerm is one distinct query term with its BM25 weight: scale is
// IDF·(k1+1)·(times it occurs in the query), which is also the most one
// document can get from the term (tf/(tf+k1·norm) < 1).
type queryTerm struct {
	id    int32
	scale float64
}

// lexical ranks the documents passing f by BM25 over the query terms,
// exactly: the same ranking as scoring every document (ties keep the
// lower slot). Questions with a rare term are ranked document at a time
// (maxScore), questions of common terms only a window of slots at a time
// (dense).
//
// With j, a ranking on several cores leaves one worker to whoever joins
// (JoinPoint).
func (ix *Namespace) lexical(f *memory.Filter, text string, limit int, j *JoinPoint) []scored {
	return ix.rankTerms(f, ix.queryTerms(text), limit, j)
}

// rankTerms is lexical for the query's terms (queryTerms).
func (ix *Namespace) rankTerms(f *memory.Filter, terms []queryTerm, limit int, j *JoinPoint) []scored {
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

// bm25 is BM25's scoring for the index as it is now.
func (ix *Namespace) bm25() bm25 {
	if ix.live == 0 {
		return newBM25(1)
	}
	return newBM25(float64(ix.total) / float64(ix.live))
}

// queryTerms weighs the query's terms that the index holds (BM25's idf,
// times k1+1; a term asked twice counts twice), heaviest first. A term's
// document frequency counts the postings of removed documents too, until
// the index is compacted.
func (ix *Namespace) queryTerms(content string) []queryTerm {
	qt := text.Terms(content)
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
