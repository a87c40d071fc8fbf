package conversation

import (
	"container/list"
	"slices"

	"github.com/vera-proxy/vera/memory"
)

// A deleted memory is taken out of every conversation whose kept prompt
// carries it, and a recall under way while it was deleted is not kept as
// a plan (stale).

// holds reports whether the conversation's prompt carries one of ids, or
// any memory at all when all is set.
func (cv *conversation) holds(ids map[string]bool, all bool) bool {
	for _, mc := range []*memory.Context{cv.Plan, cv.Last} {
		if mc == nil {
			continue
		}
		for _, id := range mc.IDs() {
			if all || ids[id] {
				return true
			}
		}
	}
	for _, b := range cv.Blocks {
		for _, h := range b.Hits {
			if all || ids[h.ID] {
				return true
			}
		}
	}
	return false
}

// withdrawal is one call of withdraw, kept so that a recall that was under
// way meanwhile is not kept as a plan (stale).
type withdrawal struct {
	gen uint64
	ns  string
	ids map[string]bool
}

// maxWithdrawals bounds the withdrawals kept: a recall older than all of
// them is taken as stale.
const maxWithdrawals = 256

// generation is the withdrawal count now: a recall notes it when it
// begins.
func (cs *Set) generation() uint64 {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.gen
}

// stale reports whether a withdrawal since generation since touches
// what the contexts carry (a memory of ids, or any memory of a forgotten
// namespace ns): a recall under way when a memory was deleted must not
// become a plan that replays it. cs.mu is held.
func (cs *Set) stale(since uint64, ns string, mcs ...*memory.Context) bool {
	if since == cs.gen {
		return false
	}
	if since < cs.floor {
		return true
	}
	for _, w := range cs.withdrawals {
		if w.gen <= since {
			continue
		}
		for _, mc := range mcs {
			if mc == nil {
				continue
			}
			for _, id := range mc.IDs() {
				if w.ids[id] || w.ns != "" && w.ns == ns {
					return true
				}
			}
		}
	}
	return false
}

// Withdraw takes deleted or hidden memories out of the conversations
// whose kept prompt carries them: each rebuilds its layers at its next
// turn, without them. A deleted memory is never sent again, not even
// inside a conversation's kept prefix. With ns set and no ids, every
// conversation of that namespace that holds any memory rebuilds (a
// namespace forgotten whole). It reports how many will rebuild.
func (cs *Set) Withdraw(ns string, ids ...string) int { return cs.pull(ns, ids, false) }

// Erase is Withdraw for memories erased (with ns and no ids, a namespace
// erased): a conversation that told one of them is forgotten whole too.
func (cs *Set) Erase(ns string, ids ...string) int { return cs.pull(ns, ids, true) }

// pull withdraws ids (or ns) in memory and in the store.
func (cs *Set) pull(ns string, ids []string, erase bool) int {
	set := make(map[string]bool, len(ids))
	for _, id := range ids {
		set[id] = true
	}
	if len(ids) > 0 {
		ns = ""
	}
	return max(cs.withdraw(ns, set, erase), cs.drop(ns, ids))
}

// withdraw drops the plan of every conversation whose prompt carries one
// of ids, or, with ns set, any memory of that namespace.
func (cs *Set) withdraw(ns string, ids map[string]bool, erase bool) int {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.gen++
	cs.withdrawals = append(cs.withdrawals, withdrawal{gen: cs.gen, ns: ns, ids: ids})
	if len(cs.withdrawals) > maxWithdrawals {
		cs.floor = cs.withdrawals[0].gen
		cs.withdrawals = slices.Delete(cs.withdrawals, 0, 1)
	}
	spaces := cs.shares.all
	if ns != "" {
		spaces = nil
		if sp := cs.spaces[ns]; sp != nil {
			spaces = []*space{sp}
		}
	}
	n := 0
	var told []*list.Element
	for _, sp := range spaces {
		for e := sp.order.Front(); e != nil; e = e.Next() {
			cv := e.Value.(*conversation)
			if erase && cv.told(ids, ns != "") {
				told = append(told, e)
				n++
				continue
			}
			if !cv.holds(ids, ns != "") {
				continue
			}
			cv.Plan, cv.Blocks, cv.Last = nil, nil, nil
			n++
		}
	}
	// A conversation that told one of them keeps its text in what it
	// holds of its own (a Responses chain's user text, the summary of its
	// turns): it is forgotten whole, its summary under way stopped, and
	// nothing of it saved again. The client's next request starts it anew.
	for _, e := range told {
		if stop := e.Value.(*conversation).Compaction.stop; stop != nil {
			stop()
		}
		cs.remove(e)
	}
	return n
}

// told reports whether one of the turns cv recorded is among ids (any,
// with all).
func (cv *conversation) told(ids map[string]bool, all bool) bool {
	for _, t := range cv.turns {
		if all || ids[t.id] {
			return true
		}
	}
	for _, id := range cv.older {
		if ids[id] {
			return true
		}
	}
	return false
}
