package index

import (
	"math"
	"slices"

	"github.com/vera-proxy/vera/memory"
)

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

// maxScore is lexical's document-at-a-time ranking.
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
// documents give (rarestFloor).
func (ix *Namespace) maxScore(f *memory.Filter, terms []queryTerm, bm bm25, limit int) []scored {
	m := ix.newMaxScoring(f, terms, bm, limit)
	defer func() { ix.unread.Add(m.unread) }()
	for {
		d := m.candidate()
		if d == endSlot {
			break
		}
		if (d > m.winEnd || m.winTheta != m.theta) && m.skipWindow(d) {
			continue
		}
		if m.theta > math.Inf(-1) && m.dismissed(d) {
			continue
		}
		m.score(d)
	}
	return m.top.best()
}

// maxScoring is one ranking of maxScore: its terms' cursors and where its
// walk is.
type maxScoring struct {
	ix *Namespace
	bm bm25
	sf slotFilter
	// cs are the cursors by bound, weakest first; prefix[i] is the sum of
	// the bounds of cs[:i]. cs[essential:] are walked; cs[:essential]
	// looked up.
	cs        []termCursor
	prefix    []float64
	essential int
	contrib   []float64 // a candidate's score of each term, in the query's order
	tfs       []uint32  // a candidate's frequency of each non-essential term, by place in cs
	top       topK
	// A document enters the results only with a score above theta: the
	// limit-th best so far once there are limit of them, and from the
	// start at least the rarest term's floor.
	theta float64
	// The window: up to the end of the first block, among the essential
	// terms' blocks around the candidate, and theta when it was bounded.
	winEnd   int32
	winTheta float64
	unread   int64 // candidates dismissed before their length was read
}

// newMaxScoring sets a ranking of terms up: the cursors at their first
// postings, ordered by bound, theta at the rarest term's floor.
func (ix *Namespace) newMaxScoring(f *memory.Filter, terms []queryTerm, bm bm25, limit int) *maxScoring {
	cs := make([]termCursor, len(terms))
	for i, t := range terms {
		p := &ix.post[t.id]
		cs[i] = termCursor{cursor: ix.cursorOf(t.id), scale: t.scale, ub: bm.score(t.scale, p.maxTF, p.minLen), order: i, common: ix.common[t.id]}
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
	m := &maxScoring{ix: ix, bm: bm, sf: compile(f), cs: cs, prefix: make([]float64, len(cs)+1),
		contrib: make([]float64, len(terms)), tfs: make([]uint32, len(terms)), top: topK{k: limit}}
	for i := range cs {
		m.prefix[i+1] = m.prefix[i] + cs[i].ub
	}
	m.theta = ix.rarestFloor(cs, &m.sf, bm, limit)
	for m.essential < len(cs) && m.prefix[m.essential+1]*slack <= m.theta {
		m.essential++
	}
	m.winEnd, m.winTheta = -1, m.theta
	return m
}

// candidate is the next candidate: the lowest slot of an essential term
// (endSlot: none is left).
func (m *maxScoring) candidate() int32 {
	d := int32(endSlot)
	for i := m.essential; i < len(m.cs); i++ {
		d = min(d, m.cs[i].slot)
	}
	return d
}

// skipWindow bounds the window of candidate d, entered anew (or theta has
// risen since it was bounded), and skips the essential terms past it when
// no document in it can enter. What any document in it can get at most:
// the essential terms' blocks' bounds, and the other terms' whole bounds
// (looking their blocks up too cost more than it saved: a rare candidate
// is a window of its own).
func (m *maxScoring) skipWindow(d int32) bool {
	cs := m.cs
	ub := m.prefix[m.essential]
	m.winEnd, m.winTheta = endSlot, m.theta
	for i := m.essential; i < len(cs); i++ {
		c := &cs[i]
		if b := c.blockOf(d); b < len(c.p.blocks) {
			blk := &c.p.blocks[b]
			ub += m.bm.score(c.scale, blk.maxTF, blk.minLen)
			m.winEnd = min(m.winEnd, blk.last)
		}
	}
	if ub*slack > m.theta || m.winEnd == endSlot {
		return false
	}
	// No document up to the window's end can enter: the essential terms
	// skip past it, block by block.
	m.ix.pruned.Add(1)
	for i := m.essential; i < len(cs); i++ {
		cs[i].seek(m.winEnd + 1)
	}
	m.winEnd = -1
	return true
}

// dismissed bounds what candidate d could get at most, without its
// length (a cache miss away in a large namespace), and moves past it when
// that cannot beat theta: the essential terms' frequencies at d, each
// with its block's shortest length, and the other terms' whole bounds.
// Most candidates of a question of a few rare words hold one of them, and
// stop here. Then each other term, strongest first, in place of its whole
// bound: its frequency at d with its block's shortest length (nothing
// when d lacks it), kept in tfs for score. A candidate of one middling
// word needs another word to pass, and most lack it.
func (m *maxScoring) dismissed(d int32) bool {
	cs, bm, theta := m.cs, m.bm, m.theta
	ub := m.prefix[m.essential]
	for i := m.essential; i < len(cs); i++ {
		if c := &cs[i]; c.slot == d {
			ub += bm.score(c.scale, c.tf, c.p.blocks[c.blk].minLen)
		}
	}
	for i := m.essential - 1; i >= 0 && ub*slack > theta; i-- {
		c := &cs[i]
		ub -= c.ub
		m.tfs[i] = 0
		if c.lacks(d) {
			continue
		}
		b := c.blockOf(d)
		if b == len(c.p.blocks) {
			continue
		}
		if blk := &c.p.blocks[b]; (ub+bm.score(c.scale, blk.maxTF, blk.minLen))*slack > theta {
			if m.tfs[i] = tfIn(c.common, &c.cursor, d); m.tfs[i] > 0 {
				ub += bm.score(c.scale, m.tfs[i], blk.minLen)
			}
		}
	}
	if ub*slack > theta {
		return false
	}
	for i := m.essential; i < len(cs); i++ {
		if c := &cs[i]; c.slot == d {
			c.next()
		}
	}
	m.unread++
	return true
}

// score scores candidate d, its length read, moves the essential terms
// past it, and offers it; a new theta may make more terms non-essential.
// The non-essential terms' frequencies at d were looked up for its bound
// (dismissed; there are some only once theta is above -Inf).
func (m *maxScoring) score(d int32) {
	cs, bm, contrib := m.cs, m.bm, m.contrib
	ln := m.ix.lens[d]
	score := 0.0
	for i := m.essential; i < len(cs); i++ {
		if c := &cs[i]; c.slot == d {
			contrib[c.order] = bm.score(c.scale, c.tf, ln)
			score += contrib[c.order]
			c.next()
		}
	}
	for i := range m.essential {
		if tf := m.tfs[i]; tf > 0 {
			contrib[cs[i].order] = bm.score(cs[i].scale, tf, ln)
			score += contrib[cs[i].order]
		}
	}
	// The filter is asked only of a document that could enter: its meta
	// is a cache miss away.
	if !(score*slack > m.theta && m.sf.ok(&m.ix.meta[d])) {
		clear(contrib)
		return
	}
	// The sum again in the query's order, as exhaustive scoring adds: the
	// ranking does not depend on which terms were looked up.
	exact := 0.0
	for i, v := range contrib {
		exact += v
		contrib[i] = 0
	}
	top := &m.top
	if top.offer(scored{slot: d, score: exact}) && len(top.h) == top.k && top.h[0].score > m.theta {
		m.theta = top.h[0].score
		for m.essential < len(cs) && m.prefix[m.essential+1]*slack <= m.theta {
			m.essential++
			m.ix.pruned.Add(1)
		}
	}
}

// rarestFloor is where maxScore's theta starts: just under the limit-th
// best score the rarest term alone gives the documents passing sf that
// hold it, when it is rare (a few times limit); else -Inf. That many
// documents score at least as much in all, so none below can enter; a
// candidate of the commoner terms alone is then bounded from the start,
// not once the walk has found limit better ones.
func (ix *Namespace) rarestFloor(cs []termCursor, sf *slotFilter, bm bm25, limit int) float64 {
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
