// Package conversation is what vera remembers of each chat between its
// turns: which conversation a request belongs to and where in it it
// stands, the layers forwarded at its first turn (its plan) and the
// blocks later turns added, so that every later prompt starts with the
// previous one; the turns recorded at each place, so that a regenerate or
// an edit replaces the turn it redoes; and the withdrawal of deleted
// memories from every kept prompt.
package conversation

import (
	"container/list"
	"context"
	"sync"
	"time"

	"github.com/vera-proxy/vera/memory"
)

// A conversation is what vera remembers of one chat between its turns
// (Conversations): the layers it forwarded at the first turn (its
// plan), the memory blocks later turns added, and the turns it recorded, by
// their place in the chat. With them a later turn's prompt starts with the
// previous prompt plus its answer, so Ollama's prompt cache evaluates only
// what is new; a regenerate or an edit replaces the turn it redoes; and an
// agent's tool loop reuses its turn's memory instead of recalling again.
type conversation struct {
	keys []string // every key the conversation is known by
	// plan is the layers chosen afresh at the conversation's first turn,
	// or when it was rebuilt; nil until then.
	Plan   *memory.Context
	Blocks []convBlock
	// user is the user text of the turn under way, for a Responses tool
	// loop chained by previous_response_id (its requests carry none); at
	// most maxKeptUser bytes.
	User  string
	Point string
	// last is what the turn under way forwarded: the steps of its tool
	// loop forward it again.
	Last  *memory.Context
	turns []recordedTurn // the latest turns recorded, oldest first
	// older are the ids of the turns recorded before those (at most
	// maxOlder): its summary may quote them, so erasing one forgets it.
	older []string
	// advanced is set once a later turn came: a first message asked again
	// is then a new chat, never a regenerate of this one's first turn.
	Advanced bool
	// size is what the conversation holds, in bytes, as last accounted.
	size int
	// NS is the conversation's namespace, set when it starts (every key
	// it is known by is of that namespace); space is its part of the set,
	// and used when it was last used (Set.tick).
	NS    string
	space *space
	used  uint64
	// Compaction is its summary, once it outgrew its window.
	Compaction compaction
	// id names it in the store (keep.go), rev counts the saves of it
	// this instance made or read; saving orders its saves. stored: the
	// store held this copy (saved or read); synced is when this copy was
	// last known to be the chat's (begun, saved or read); sum is the
	// digest of the copy saved last.
	id     string
	rev    uint64
	saving sync.Mutex
	stored bool
	synced time.Time
	sum    [32]byte
}

// footprint estimates the bytes a conversation holds.
func (cv *conversation) footprint() int {
	n := 256 + len(cv.User) + 64*len(cv.turns) + 40*len(cv.older) + len(cv.Compaction.Summary)
	for _, j := range []*summaryJob{cv.Compaction.job, cv.Compaction.ready} {
		if j != nil {
			n += len(j.prev) + len(j.text)
			for _, p := range j.pieces {
				for _, l := range p {
					n += len(l)
				}
			}
		}
	}
	for _, k := range cv.keys {
		n += len(k)
	}
	for _, mc := range []*memory.Context{cv.Plan, cv.Last} {
		if mc == nil {
			continue
		}
		n += len(mc.System) + 64*len(mc.Semantic)
		for _, m := range mc.Recent {
			n += len(m.Content)
		}
		for _, b := range mc.Blocks {
			n += len(b.Text)
		}
	}
	return n
}

// convBlock is a later turn's memory block, and the user message it is on.
type convBlock struct {
	memory.Block
	Digest string // of the user message's text
	Hits   []memory.Hit
	Tokens int
	// Private: the reasons of the private memories in it.
	Private []string
}

// recordedTurn is a turn vera recorded at a place in the conversation.
type recordedTurn struct {
	point string
	id    string
	at    time.Time
}

// maxTurnsKept bounds the recorded turns a conversation remembers: older
// ones can no longer be regenerated in place.
const maxTurnsKept = 64

// maxOlder bounds the ids of older turns a conversation remembers (past
// it, the oldest's text has long left any summary of a chat that size).
const maxOlder = 1024

// replaceWindow is how long after a turn a request without a chat id or a
// previous_response_id is taken for its regenerate or edit.
const replaceWindow = 10 * time.Minute

// Set is a bounded set of conversations, shared fairly by the namespaces
// (share.go): when it is full, the namespace holding the most gives up its
// least recently used conversation. It is lost on restart, which costs
// each conversation one full turn.
type Set struct {
	// Recaller chooses the layers of the turns that need them (Layers);
	// nil: none.
	Recaller Recaller
	// EveryTurn chooses them afresh on every turn of a conversation
	// (memory.stable_prefix = false); by default later turns keep the
	// plan.
	EveryTurn bool
	// Tokens counts the prompts compaction measures; nil: about four
	// bytes a token.
	Tokens Tokenizer
	// CompactAt is the share of its context window past which a
	// conversation is compacted (memory.compact_at); 0: never.
	CompactAt float64
	// SummaryTimeout bounds one summary: one not written by then is
	// abandoned, and the conversation goes on as if it were not ready;
	// 0: three minutes.
	SummaryTimeout time.Duration
	// UserText returns the user's own words in a user message: Open
	// WebUI's RAG template unwrapped, so that a summary never takes the
	// retrieved documents for what the user said. Nil: the message as is.
	UserText func(string) string
	// Plans, when set, keeps each conversation's plan (keep.go), so
	// that a restart or another instance on the same store forwards the
	// same prefix.
	Plans   memory.PlanStore
	keeping keeping

	max      int
	maxBytes int

	// work and ctx own the summaries under way (Close).
	closed bool // under mu
	work   sync.WaitGroup
	ctx    context.Context
	cancel context.CancelFunc

	mu    sync.Mutex
	bytes int    // the conversations' footprints, summed
	held  int    // the conversations held
	tick  uint64 // counts uses: a conversation's used is its latest
	// gen counts withdrawals; withdrawals holds the latest (at most
	// maxWithdrawals), and floor is the count before the oldest kept.
	gen         uint64
	floor       uint64
	withdrawals []withdrawal
	spaces      map[string]*space        // namespace → its conversations
	shares      shares                   // the spaces, by share of the set
	keys        map[string]*list.Element // key → element of a space's order
	// writing counts the summaries under way, writingNS those of each
	// namespace (at most maxNamespaceSummaries).
	writing   int
	writingNS map[string]int
}

// defaultConversations is how many conversations are remembered when
// New is given 0; maxConversationBytes bounds what they hold
// together (a caller's system prompt can be long).
const (
	defaultConversations = 2048
	maxConversationBytes = 64 << 20
)

// maxKeys bounds the keys one conversation is known by: every Responses
// answer adds one, and only the latest are ever chained to.
const maxKeys = 16

func New(max int) *Set {
	if max <= 0 {
		max = defaultConversations
	}
	ctx, cancel := context.WithCancel(context.Background())
	cs := &Set{max: max, maxBytes: maxConversationBytes, keys: map[string]*list.Element{}, spaces: map[string]*space{},
		writingNS: map[string]int{}, ctx: ctx, cancel: cancel}
	cs.shares.cs = cs
	return cs
}

// get returns the conversation known by key, or nil.
func (cs *Set) get(key string) *conversation {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	e, ok := cs.keys[key]
	if !ok {
		return nil
	}
	cs.touch(e)
	return e.Value.(*conversation)
}

// start begins a conversation of namespace ns under key (one of ns's),
// in place of the one known by it. It keeps that one's recorded turns, so
// that a first turn asked again can still replace the turn it redoes,
// when the key is an id (strong) or the old conversation never went past
// its first turn.
func (cs *Set) start(ns, key string, strong bool) *conversation {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cv := &conversation{NS: ns, synced: time.Now()}
	if e, ok := cs.keys[key]; ok {
		if old := e.Value.(*conversation); strong || !old.Advanced {
			cv.turns = append(cv.turns, old.turns...)
			cv.older = append(cv.older, old.older...)
		}
		cs.unkey(e, key)
	}
	cs.add(cv, key)
	return cv
}

// alias makes cv known by key too.
func (cs *Set) alias(cv *conversation, key string) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if e, ok := cs.keys[key]; ok {
		if e.Value == cv {
			return
		}
		cs.unkey(e, key)
	}
	cs.add(cv, key)
}

// add files cv under key; cs.mu is held.
func (cs *Set) add(cv *conversation, key string) {
	var e *list.Element
	for _, k := range cv.keys {
		if el, ok := cs.keys[k]; ok && el.Value == cv {
			e = el
			break
		}
	}
	if e == nil {
		e = cs.file(cv)
	} else {
		cs.touch(e)
	}
	cv.keys = append(cv.keys, key)
	if len(cv.keys) > maxKeys {
		// The oldest alias goes; the first key (an id, or the first
		// message) stays.
		if cs.keys[cv.keys[1]] == e {
			delete(cs.keys, cv.keys[1])
		}
		cv.keys = append(cv.keys[:1], cv.keys[2:]...)
	}
	cs.keys[key] = e
	cs.account(cv)
}

// unkey drops key from the conversation of e, and the conversation when
// no key is left; cs.mu is held.
func (cs *Set) unkey(e *list.Element, key string) {
	delete(cs.keys, key)
	cv := e.Value.(*conversation)
	for _, k := range cv.keys {
		if cs.keys[k] == e {
			return
		}
	}
	cs.remove(e)
}

// locked runs f with the conversations' lock held: a conversation's
// fields are read and written only so.
func (cs *Set) locked(f func()) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	f()
}

// update runs f on cv with the lock held, then accounts for what cv holds
// now.
func (cs *Set) update(cv *conversation, f func()) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	f()
	for _, k := range cv.keys {
		if e, ok := cs.keys[k]; ok && e.Value == cv {
			cs.account(cv) // still remembered: not evicted meanwhile
			return
		}
	}
}

// replacing returns the id of the turn that a request at place, answered
// now, would replace (a regenerate or an edit), "" for none: by the rules
// of start and replace. That turn is never recalled into the request.
func (cs *Set) replacing(at place, now time.Time) string {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	e, ok := cs.keys[at.Key]
	if !ok {
		return ""
	}
	cv := e.Value.(*conversation)
	if at.First && !at.Strong && cv.Advanced {
		return "" // a first message asked again after later turns: a new chat
	}
	for _, t := range cv.turns {
		if t.point == at.Point && (at.Strong || now.Sub(t.at) < replaceWindow) {
			return t.id
		}
	}
	return ""
}

// replace records that turn id was recorded at point, and returns the ID
// of the turn it replaces there, if any: one recorded at the same point,
// at any time when the conversation is identified by an id (strong), else
// within replaceWindow. cs.mu is held.
func (cv *conversation) replace(point, id string, now time.Time, strong bool) string {
	var replaced string
	for i, t := range cv.turns {
		if t.point != point {
			continue
		}
		if strong || now.Sub(t.at) < replaceWindow {
			replaced = t.id
		}
		cv.turns = append(cv.turns[:i], cv.turns[i+1:]...)
		break
	}
	cv.turns = append(cv.turns, recordedTurn{point: point, id: id, at: now})
	if n := len(cv.turns) - maxTurnsKept; n > 0 {
		for _, t := range cv.turns[:n] {
			cv.older = append(cv.older, t.id)
		}
		cv.older = cv.older[max(0, len(cv.older)-maxOlder):]
		cv.turns = cv.turns[n:]
	}
	return replaced
}
