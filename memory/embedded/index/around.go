package index

import (
	"cmp"
	"slices"
	"time"

	"github.com/vera-proxy/vera/memory"
)

// A question's words are often split across two turns of a conversation:
// one asks, the next answers. Query.Around lets a raw turn's lexical
// score take in a share of its neighbours' (the raw turns just before
// and after it in its namespace, within memory.ExchangeWindow): a turn
// next to a strong match rises, and two halves of one exchange of ideas
// rise together. Only the lexical side does this, and only over its exact
// BM25 ranking's best and their neighbours (the candidates): a turn that
// neither ranks nor neighbours one is not lifted, and a candidate takes
// in only its neighbours among the candidates (the exhaustive ranking
// with the share would have to score every turn's neighbours). A
// neighbour's own neighbour outside the candidates (a turn two places
// from a ranked one) would cost a score from memory for each, which a
// chat reads cold; it changed no figure of vera eval locomo --cv.

// around re-ranks top, the lexical ranking of q's terms (best first):
// every memory in it, and every neighbour of a raw turn in it passing
// q's filter, scores its own BM25 plus q.Around times that of each of
// its neighbours among them (a memory of another type has none); the
// best limit, equal scores keeping the lower slot.
func (ix *Namespace) around(q *memory.Query, terms []queryTerm, top []scored, limit int) []scored {
	if len(top) == 0 || ix.live == 0 {
		return top
	}
	sf := compile(&q.Filter)
	c := ix.candidates(top, &sf)
	c.scoreRest(ix, terms, &sf)
	best := topK{k: limit}
	for i, s := range c.slots {
		v := c.own[i]
		for _, x := range c.nbs[i] {
			if x >= 0 {
				v += q.Around * c.own[x]
			}
		}
		if v > 0 {
			best.offer(scored{slot: s, score: v})
		}
	}
	return best.best()
}

// aroundCandidates are the ranked turns and their neighbours, by slot,
// with each one's neighbours among them (their places in slots, -1: none)
// and its own BM25 score.
type aroundCandidates struct {
	slots []int32
	nbs   [][2]int32
	own   []float64
	// ranked are the ranked turns by slot, rnbs their neighbours' slots.
	ranked []scored
	rnbs   [][2]int32
}

// candidates gathers the ranked turns of top and their neighbours passing
// sf; the ranked ones have their scores.
func (ix *Namespace) candidates(top []scored, sf *slotFilter) *aroundCandidates {
	c := &aroundCandidates{ranked: slices.Clone(top)}
	slices.SortFunc(c.ranked, func(a, b scored) int { return cmp.Compare(a.slot, b.slot) })
	c.rnbs = make([][2]int32, len(c.ranked))
	c.slots = make([]int32, 0, 3*len(c.ranked))
	for j, t := range c.ranked {
		c.rnbs[j] = ix.neighboursOf(t.slot, sf)
		c.slots = append(c.slots, t.slot)
		for _, x := range c.rnbs[j] {
			if x >= 0 {
				c.slots = append(c.slots, x)
			}
		}
	}
	slices.Sort(c.slots)
	c.slots = slices.Compact(c.slots)
	return c
}

// place is x's index in c.slots, or -1. A neighbour of c.slots[i] is
// usually next to it there (slots are in time order, but for turns
// stored late), so those places are tried first.
func (c *aroundCandidates) place(x int32, i int) int32 {
	cand := c.slots
	if x < 0 {
		return -1
	}
	if i > 0 && cand[i-1] == x {
		return int32(i - 1)
	}
	if i+1 < len(cand) && cand[i+1] == x {
		return int32(i + 1)
	}
	if k, ok := slices.BinarySearch(cand, x); ok {
		return int32(k)
	}
	return -1
}

// scoreRest finds each candidate's neighbours among the candidates, and
// its score: the ranked turns have theirs (walked alongside, both by
// slot); the others are scored together.
func (c *aroundCandidates) scoreRest(ix *Namespace, terms []queryTerm, sf *slotFilter) {
	c.nbs = make([][2]int32, len(c.slots))
	c.own = make([]float64, len(c.slots))
	var unscored []int32
	var at []int // unscored[k] is c.slots[at[k]]
	j := 0
	for i, s := range c.slots {
		for j < len(c.ranked) && c.ranked[j].slot < s {
			j++
		}
		var n [2]int32
		if j < len(c.ranked) && c.ranked[j].slot == s {
			n, c.own[i] = c.rnbs[j], c.ranked[j].score
		} else {
			n = ix.neighboursOf(s, sf)
			unscored = append(unscored, s)
			at = append(at, i)
		}
		c.nbs[i] = [2]int32{c.place(n[0], i), c.place(n[1], i)}
	}
	for k, score := range ix.scoresOf(terms, ix.bm25(), unscored) {
		c.own[at[k]] = score
	}
}

// neighboursOf returns the live raw turns just before and just after raw
// slot s in time, within memory.ExchangeWindow, as memory.Builder looks a
// hit's context up (Latest and Earliest): the newest in [t-window, t) and
// the oldest in [t+1µs, t+window), t being s's time. A neighbour that
// fails sf (nil: none) is -1, as is a missing one, and both for a slot of
// another type.
func (ix *Namespace) neighboursOf(s int32, sf *slotFilter) [2]int32 {
	out := [2]int32{-1, -1}
	raw := typeBit(memory.Raw)
	if ix.meta[s].typ != raw {
		return out
	}
	i := ix.timePos(s)
	ts, win := ix.meta[s].ts, int64(memory.ExchangeWindow)
	for k := i - 1; k >= 0; k-- {
		x := ix.slotAt(k)
		if ix.meta[x].ts < ts-win {
			break
		}
		if ix.meta[x].typ == raw && ix.meta[x].ts < ts {
			out[0] = x
			break
		}
	}
	for k := i + 1; k < len(ix.meta); k++ {
		x := ix.slotAt(k)
		if ix.meta[x].ts >= ts+win {
			break
		}
		if ix.meta[x].typ == raw && ix.meta[x].ts >= ts+int64(time.Microsecond) {
			out[1] = x
			break
		}
	}
	for k, x := range out {
		if x >= 0 && sf != nil && !sf.ok(&ix.meta[x]) {
			out[k] = -1
		}
	}
	return out
}

// scoresOf returns the BM25 score of each of slots, which it sorts, for
// terms: each sum in the terms' order (as every ranking adds), a term's
// postings read once, forwards.
func (ix *Namespace) scoresOf(terms []queryTerm, bm bm25, slots []int32) []float64 {
	slices.Sort(slots)
	sums := make([]float64, len(slots))
	for _, t := range terms {
		for i, tf := range ix.freqsAt(t.id, slots) {
			if tf > 0 {
				sums[i] += bm.score(t.scale, tf, ix.lens[slots[i]])
			}
		}
	}
	return sums
}

// freqsAt returns term id's frequency in each of slots (in slot order),
// its postings read once, forwards.
func (ix *Namespace) freqsAt(id int32, slots []int32) []uint32 {
	tfs := make([]uint32, len(slots))
	c := ix.cursorOf(id)
	c.start()
	common := ix.common[id]
	for i, s := range slots {
		tfs[i] = tfIn(common, &c, s)
	}
	return tfs
}
