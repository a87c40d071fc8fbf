package index

import "slices"

// The bounded heap of search: the k best scored candidates.

// scored is a candidate with a score, for top-k selection.
type scored struct {
	slot  int32
	score float64
}

// topK keeps the k highest scores (a min-heap), and of equal scores the
// lower slots, whatever order they are offered in. Its heap is typed, not
// container/heap's: that one boxes every pushed value in an interface, an
// allocation per candidate.
type topK struct {
	k int
	h []scored
}

// offer keeps s if it is among the k best so far, and says whether it
// was.
func (t *topK) offer(s scored) bool {
	if len(t.h) < t.k {
		if t.h == nil {
			t.h = make([]scored, 0, t.k)
		}
		t.h = append(t.h, s)
		t.up(len(t.h) - 1)
		return true
	}
	if worse(t.h[0], s) {
		t.h[0] = s
		t.down(0)
		return true
	}
	return false
}

func (t *topK) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !worse(t.h[i], t.h[p]) {
			return
		}
		t.h[p], t.h[i] = t.h[i], t.h[p]
		i = p
	}
}

func (t *topK) down(i int) {
	for {
		c := 2*i + 1
		if c >= len(t.h) {
			return
		}
		if c+1 < len(t.h) && worse(t.h[c+1], t.h[c]) {
			c++
		}
		if !worse(t.h[c], t.h[i]) {
			return
		}
		t.h[i], t.h[c] = t.h[c], t.h[i]
		i = c
	}
}

// worse reports whether a ranks below b: a lower score, or the same
// score in a higher slot.
func worse(a, b scored) bool {
	return a.score < b.score || a.score == b.score && a.slot > b.slot
}

// best returns the kept candidates, best first.
func (t *topK) best() []scored {
	out := slices.Clone(t.h)
	slices.SortFunc(out, bestFirst)
	return out
}

// bestFirst orders scored candidates best first, equal scores by slot.
func bestFirst(a, b scored) int {
	switch {
	case a.score > b.score:
		return -1
	case a.score < b.score:
		return 1
	}
	return int(a.slot - b.slot)
}
