package index

import (
	"cmp"
	"slices"
	"sync"

	"github.com/vera-proxy/vera/memory"
)

// Hit is a search result: a memory's row in the file, with its scores.
type Hit struct {
	Row int64
	// RRF is the fused score; Cosine and BM25 are those of the vector
	// and lexical sides (0 where it was not ranked).
	RRF, Cosine, BM25 float64
	slot              int32
}

// Ranking is one side of a search ranked ahead of the other, on the index
// as its removals and changes were then. A lexical side holds while no
// slot it saw was removed: what the index gained meanwhile (the turn
// before, stored while the question was embedded) is left to the vector
// side. A vector side holds only while nothing changed at all.
type Ranking struct {
	ix       *Namespace
	removals uint64
	changes  uint64 // the vector side's: kept only while nothing changed
	top      []scored
}

// Len counts the memories ranked.
func (r *Ranking) Len() int { return len(r.top) }

// RankLexical ranks q's lexical side now; with j, on several cores it
// leaves one worker to whoever joins (JoinPoint).
func (ix *Namespace) RankLexical(q *memory.Query, j *JoinPoint) Ranking {
	return Ranking{ix: ix, removals: ix.removals, top: ix.lexicalSide(q, j)}
}

// RankVector ranks q's vector side for qvec (normalised) now.
func (ix *Namespace) RankVector(q *memory.Query, qvec []float32) Ranking {
	return Ranking{ix: ix, removals: ix.removals, changes: ix.changes, top: ix.vectorSide(q, qvec)}
}

// Search runs q on the index, its vector side for qvec (normalised; nil
// for none) and its lexical side, fused, in the builder's order
// (memory.BestFirst: best first, equal scores newest first). A lexical
// side ranked ahead (lex; nil: none) is used while it holds, and then a
// vector side ranked ahead (vec) while it holds; the sides that do not
// are ranked again.
func (ix *Namespace) Search(q *memory.Query, qvec []float32, lex, vec *Ranking) []Hit {
	var found []Hit
	if lex != nil && lex.ix == ix && lex.removals == ix.removals {
		var vs []scored
		if vec != nil && vec.ix == ix && vec.changes == ix.changes {
			vs = vec.top
		} else {
			vs = ix.vectorSide(q, qvec)
		}
		found = fuse(vs, lex.top, q.Limit)
	} else {
		found = ix.search(q, qvec)
	}
	// A memory's time is its slot's.
	slices.SortStableFunc(found, func(a, b Hit) int {
		if c := cmp.Compare(b.RRF, a.RRF); c != 0 {
			return c
		}
		return cmp.Compare(ix.meta[b.slot].ts, ix.meta[a.slot].ts)
	})
	for i := range found {
		found[i].Row = ix.seqs[found[i].slot]
	}
	return found
}

// Neighbours returns the rows of the raw turns just before and after h's
// in time, within memory.ExchangeWindow (-1: none), as memory.Builder
// looks a hit's context up (Latest and Earliest).
func (ix *Namespace) Neighbours(h Hit) [2]int64 {
	var out [2]int64
	for k, x := range ix.neighboursOf(h.slot, nil) {
		out[k] = -1
		if x >= 0 {
			out[k] = ix.seqs[x]
		}
	}
	return out
}

// search runs q on the index: its vector side (qvec, normalised; nil for
// none) and its lexical side, side by side on a large namespace, fused.
func (ix *Namespace) search(q *memory.Query, qvec []float32) []Hit {
	var vec, lex []scored
	if qvec != nil && q.Text != "" && len(ix.meta) >= ix.opts.ParallelAbove {
		var wg sync.WaitGroup
		wg.Go(func() { lex = ix.lexicalSide(q, nil) })
		vec = ix.vectorSide(q, qvec)
		wg.Wait()
	} else {
		vec, lex = ix.vectorSide(q, qvec), ix.lexicalSide(q, nil)
	}
	return fuse(vec, lex, q.Limit)
}

// depth is how deep each side of a search looks: a little past the limit,
// so fusion has material.
func depth(q *memory.Query) int {
	limit := q.Limit
	if limit <= 0 {
		limit = 10
	}
	return limit + 10
}

// lexicalSide is q's lexical side (j: as lexical's).
func (ix *Namespace) lexicalSide(q *memory.Query, j *JoinPoint) []scored {
	if q.Text == "" {
		return nil
	}
	terms := ix.queryTerms(q.Text)
	top := ix.rankTerms(&q.Filter, terms, depth(q), j)
	if q.Around > 0 {
		top = ix.around(q, terms, top, depth(q))
	}
	return top
}

// vectorSide is q's vector side, for qvec (normalised; nil: none).
func (ix *Namespace) vectorSide(q *memory.Query, qvec []float32) []scored {
	if qvec == nil {
		return nil
	}
	return ix.vector(&q.Filter, qvec, q.Threshold, depth(q))
}

// fuse ranks the slots of the two sides by reciprocal rank fusion, best
// first, ties in the order they came (vector side first), up to limit
// (0: 10).
func fuse(vec, lex []scored, limit int) []Hit {
	if limit <= 0 {
		limit = 10
	}
	order := make([]Hit, 0, len(vec)+len(lex))
	at := func(s int32) *Hit {
		for i := range order {
			if order[i].slot == s {
				return &order[i]
			}
		}
		order = append(order, Hit{slot: s})
		return &order[len(order)-1]
	}
	for r, c := range vec {
		h := at(c.slot)
		h.RRF += 1 / float64(rrfK+r+1)
		h.Cosine = c.score
	}
	for r, c := range lex {
		h := at(c.slot)
		h.RRF += 1 / float64(rrfK+r+1)
		h.BM25 = c.score
	}
	slices.SortStableFunc(order, func(a, b Hit) int {
		switch {
		case a.RRF > b.RRF:
			return -1
		case a.RRF < b.RRF:
			return 1
		}
		return 0
	})
	if len(order) > limit {
		order = order[:limit]
	}
	return order
}
