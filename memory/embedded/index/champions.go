package index

import (
	"slices"
	"sync"
)

// champions are a common term's champions, with what a search's floor
// reads of them kept (kept): the champions are the same for every
// question the term leads, and reading their lengths and the other
// terms' frequencies, each a slot of its own, costs a cache miss a
// champion and a term on a chat that comes cold.
type champions struct {
	topK
	mu   sync.Mutex // searches share the index
	kept *championsKept
}

// championsKept is what a search read of its champions: their slots in
// slot order, their lengths, and the frequency in each of every term
// asked with them so far. A champion that comes (and so one that goes)
// drops it all; slots are not renumbered but by a compaction, which makes
// every term's champions anew; lengths and frequencies never change for
// a slot. Whether a champion is still live and passes a search's filter
// is read from meta, at the search.
type championsKept struct {
	slots []int32
	lens  []float32
	tfs   map[int32][]uint32 // term id → frequency in each of slots
}

// keptTerms bounds the terms a champions' kept frequencies hold: past
// it, a term's are read for the search and not kept.
const keptTerms = 64

// offer offers the slot being added, and drops what was kept if it came
// in.
func (c *champions) offer(s scored) {
	if c.topK.offer(s) {
		c.mu.Lock()
		c.kept = nil
		c.mu.Unlock()
	}
}

// scores returns the champions' slots and their BM25 scores for terms
// (each sum in the terms' order, as scoresOf adds), from what is kept,
// keeping what it had to read. The lock is held only to find and keep:
// what is kept never changes once there.
func (c *champions) scores(ix *Namespace, terms []queryTerm, bm bm25) ([]int32, []float64) {
	c.mu.Lock()
	k := c.kept
	if k == nil {
		k = &championsKept{tfs: map[int32][]uint32{}}
		for _, h := range c.h {
			k.slots = append(k.slots, h.slot)
		}
		slices.Sort(k.slots)
		k.lens = make([]float32, len(k.slots))
		for i, s := range k.slots {
			k.lens[i] = ix.lens[s]
		}
		c.kept = k
	}
	cols := make([][]uint32, len(terms))
	for i, t := range terms {
		cols[i] = k.tfs[t.id]
	}
	c.mu.Unlock()
	for i, t := range terms {
		if cols[i] != nil {
			continue
		}
		tfs := ix.freqsAt(t.id, k.slots)
		cols[i] = tfs
		c.mu.Lock()
		if c.kept == k && len(k.tfs) < keptTerms {
			k.tfs[t.id] = tfs
		}
		c.mu.Unlock()
	}
	sums := make([]float64, len(k.slots))
	for i, t := range terms {
		for j, tf := range cols[i] {
			if tf > 0 {
				sums[j] += bm.score(t.scale, tf, k.lens[j])
			}
		}
	}
	return k.slots, sums
}
