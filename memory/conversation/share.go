package conversation

import (
	"container/heap"
	"container/list"
)

// The set is shared by every namespace, and one of them must not push the
// others' conversations out: a client may open any number of chats. So
// when the set is full, the conversation that goes is the least recently
// used one of the namespace that holds the largest share of the set. A
// namespace's share is the larger of its part of the conversations (of
// max) and its part of the bytes (of maxBytes): many small chats and a
// few huge ones both count. Between equal shares, the namespace whose
// least recently used conversation is the oldest loses it, so that among
// namespaces alike the set is least recently used first out. The
// namespaces sit in a heap by share: a use, an addition or an eviction
// costs O(log n) in namespaces.
//
// A client that makes up a namespace per chat is as many users as
// namespaces: only an identity the client cannot choose (memory.jwt_secret,
// or API keys and no trusted loopback) tells them apart.

// space is one namespace's part of the set.
type space struct {
	ns    string
	order *list.List // *conversation, most recently used first
	bytes int        // its conversations' footprints, summed
	index int        // in the heap; -1 when out of it
}

// oldest is when the space's least recently used conversation was used.
func (sp *space) oldest() uint64 { return sp.order.Back().Value.(*conversation).used }

// shares is the heap of the namespaces, the one to lose a conversation
// first on top. It reads max and maxBytes from cs.
type shares struct {
	cs  *Set
	all []*space
}

var _ heap.Interface = (*shares)(nil)

// share is sp's share of the set, scaled by max·maxBytes to stay an
// integer.
func (h *shares) share(sp *space) int {
	return max(sp.order.Len()*h.cs.maxBytes, sp.bytes*h.cs.max)
}

func (h *shares) Len() int { return len(h.all) }

func (h *shares) Less(i, j int) bool {
	a, b := h.all[i], h.all[j]
	if sa, sb := h.share(a), h.share(b); sa != sb {
		return sa > sb
	}
	return a.oldest() < b.oldest()
}

func (h *shares) Swap(i, j int) {
	h.all[i], h.all[j] = h.all[j], h.all[i]
	h.all[i].index, h.all[j].index = i, j
}

func (h *shares) Push(x any) {
	sp := x.(*space)
	sp.index = len(h.all)
	h.all = append(h.all, sp)
}

func (h *shares) Pop() any {
	n := len(h.all) - 1
	sp := h.all[n]
	h.all[n], h.all = nil, h.all[:n]
	sp.index = -1
	return sp
}

// file puts cv, not in the set, in its namespace's space as its most
// recently used conversation; cs.mu is held.
func (cs *Set) file(cv *conversation) *list.Element {
	sp := cs.spaces[cv.NS]
	if sp == nil {
		sp = &space{ns: cv.NS, order: list.New(), index: -1}
		cs.spaces[cv.NS] = sp
	}
	cv.space, cv.size = sp, 0 // accounted afresh
	e := sp.order.PushFront(cv)
	cs.held++
	if sp.index < 0 {
		heap.Push(&cs.shares, sp)
	}
	cs.touch(e)
	return e
}

// touch makes the conversation of e its namespace's most recently used;
// cs.mu is held.
func (cs *Set) touch(e *list.Element) {
	cv := e.Value.(*conversation)
	cs.tick++
	cv.used = cs.tick
	cv.space.order.MoveToFront(e)
	heap.Fix(&cs.shares, cv.space.index)
}

// remove forgets the conversation of e and every key it is known by;
// cs.mu is held.
func (cs *Set) remove(e *list.Element) {
	cv := e.Value.(*conversation)
	for _, k := range cv.keys {
		if cs.keys[k] == e {
			delete(cs.keys, k)
		}
	}
	sp := cv.space
	sp.order.Remove(e)
	sp.bytes -= cv.size
	cs.bytes -= cv.size
	cs.held--
	if sp.order.Len() == 0 {
		heap.Remove(&cs.shares, sp.index)
		delete(cs.spaces, sp.ns)
		return
	}
	heap.Fix(&cs.shares, sp.index)
}

// account updates the footprint of cv, which is in the set, and forgets
// conversations while there are too many or they hold too much, each the
// least recently used of the namespace with the largest share; cs.mu is
// held.
func (cs *Set) account(cv *conversation) {
	n := cv.footprint()
	cs.bytes += n - cv.size
	cv.space.bytes += n - cv.size
	cv.size = n
	heap.Fix(&cs.shares, cv.space.index)
	for cs.held > cs.max || (cs.bytes > cs.maxBytes && cs.held > 1) {
		cs.remove(cs.shares.all[0].order.Back())
	}
}
