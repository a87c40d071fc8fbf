package proxy

import (
	"container/list"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"strings"
	"sync"
	"time"

	"github.com/vera-proxy/vera/memory"
)

// A conversation is what vera remembers of one chat between its turns
// (SPEC §4, Conversations): the layers it forwarded at the first turn (its
// plan), the memory blocks later turns added, and the turns it recorded, by
// their place in the chat. With them a later turn's prompt starts with the
// previous prompt plus its answer, so Ollama's prompt cache evaluates only
// what is new; a regenerate or an edit replaces the turn it redoes; and an
// agent's tool loop reuses its turn's memory instead of recalling again.
type conversation struct {
	keys []string // every key the conversation is known by
	// plan is the layers chosen afresh at the conversation's first turn,
	// or when it was rebuilt; nil until then.
	plan   *memory.Context
	blocks []convBlock
	// user is the user text of the turn under way, for a Responses tool
	// loop chained by previous_response_id (its requests carry none); at
	// most maxKeptUser bytes.
	user  string
	point string
	// last is what the turn under way forwarded: the steps of its tool
	// loop forward it again.
	last  *memory.Context
	turns []recordedTurn // the latest turns recorded, oldest first
}

// convBlock is a later turn's memory block, and the user message it is on.
type convBlock struct {
	memory.Block
	digest string // of the user message's text
	hits   []memory.Hit
	tokens int
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

// replaceWindow is how long after a turn a request without a chat id or a
// previous_response_id is taken for its regenerate or edit (SPEC §4).
const replaceWindow = 10 * time.Minute

// conversations is a bounded set of conversations, least recently used
// first out. It is lost on restart, which costs each conversation one full
// turn.
type conversations struct {
	max int

	mu    sync.Mutex
	order *list.List               // *conversation, most recently used first
	keys  map[string]*list.Element // key → element of order
}

// defaultConversations is how many conversations are remembered when
// Server.Conversations is 0.
const defaultConversations = 2048

func newConversations(max int) *conversations {
	if max <= 0 {
		max = defaultConversations
	}
	return &conversations{max: max, order: list.New(), keys: map[string]*list.Element{}}
}

// get returns the conversation known by key, or nil.
func (cs *conversations) get(key string) *conversation {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	e, ok := cs.keys[key]
	if !ok {
		return nil
	}
	cs.order.MoveToFront(e)
	return e.Value.(*conversation)
}

// start begins a conversation under key, in place of the one known by it
// (whose recorded turns it keeps, so that a first turn asked again can
// still replace the turn it redoes).
func (cs *conversations) start(key string) *conversation {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cv := &conversation{}
	if e, ok := cs.keys[key]; ok {
		old := e.Value.(*conversation)
		cv.turns = append(cv.turns, old.turns...)
		cs.unkey(e, key)
	}
	cs.add(cv, key)
	return cv
}

// alias makes cv known by key too.
func (cs *conversations) alias(cv *conversation, key string) {
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
func (cs *conversations) add(cv *conversation, key string) {
	cv.keys = append(cv.keys, key)
	var e *list.Element
	for _, k := range cv.keys[:len(cv.keys)-1] {
		if el, ok := cs.keys[k]; ok && el.Value == cv {
			e = el
			break
		}
	}
	if e == nil {
		e = cs.order.PushFront(cv)
	}
	cs.order.MoveToFront(e)
	cs.keys[key] = e
	for cs.order.Len() > cs.max {
		last := cs.order.Back()
		for _, k := range last.Value.(*conversation).keys {
			if cs.keys[k] == last {
				delete(cs.keys, k)
			}
		}
		cs.order.Remove(last)
	}
}

// unkey drops key from the conversation of e, and the conversation when
// no key is left; cs.mu is held.
func (cs *conversations) unkey(e *list.Element, key string) {
	delete(cs.keys, key)
	cv := e.Value.(*conversation)
	for _, k := range cv.keys {
		if cs.keys[k] == e {
			return
		}
	}
	cs.order.Remove(e)
}

// locked runs f with the conversations' lock held: a conversation's
// fields are read and written only so.
func (cs *conversations) locked(f func()) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	f()
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
	if len(cv.turns) > maxTurnsKept {
		cv.turns = cv.turns[len(cv.turns)-maxTurnsKept:]
	}
	return replaced
}

// place is where a request stands in its conversation.
type place struct {
	key    string // the conversation's key
	strong bool   // identified by a chat id or previous_response_id
	// first: no earlier answer in the request; its layers are chosen
	// afresh.
	first    bool
	toolLoop bool
	// point identifies the history before the last user message: a
	// request at the point of a recorded turn redoes it.
	point string
	// user is the ordinal, among the request's user messages, of its last
	// one with text (-1: none), and userDigest that message's digest.
	user       int
	userDigest string
	// answerKey, when set, makes a key of an answer: a conversation
	// without an id is known by its first user message and the first
	// answer vera gave to it.
	answerKey func(answer string) string
}

// placeOf tells which conversation a request belongs to and where in it it
// stands: by Open WebUI's chat id, else by the Responses API's
// previous_response_id, else by the namespace, the first user message and
// the first answer in the request.
func placeOf(ns string, th thread, msgs []memory.Message) place {
	p := place{toolLoop: th.toolLoop, user: -1}
	h := sha256.New()
	users, last, firstAnswer, answered := 0, -1, "", false
	for i, m := range msgs {
		switch m.Role {
		case "user":
			if strings.TrimSpace(m.Content) != "" {
				last, p.user = i, users
			}
			users++
		case "assistant":
			answered = true
			if firstAnswer == "" {
				firstAnswer = m.Content
			}
		}
	}
	for _, m := range msgs[:max(last, 0)] {
		writeMessage(h, m)
	}
	if last >= 0 {
		p.userDigest = messageDigest(msgs[last].Content)
	}
	// A tool loop's step continues a turn even when its calls are not
	// messages (the Responses API's function_call items).
	p.first = !answered && !th.toolLoop && th.previousResponseID == ""
	switch {
	case th.chatID != "":
		p.key, p.strong = "chat\x00"+ns+"\x00"+th.chatID, true
	case th.previousResponseID != "":
		p.key, p.strong = responseKey(ns, th.previousResponseID), true
		fmt.Fprintf(h, "prev:%s", th.previousResponseID)
	case firstAnswer != "":
		p.key = answerKey(ns, th.firstUser, firstAnswer)
	default:
		first := th.firstUser
		p.key = "first\x00" + ns + "\x00" + digest(normalize(first))
		p.answerKey = func(answer string) string { return answerKey(ns, first, answer) }
	}
	p.point = hex.EncodeToString(h.Sum(nil)[:16])
	return p
}

func answerKey(ns, firstUser, answer string) string {
	return "answer\x00" + ns + "\x00" + digest(normalize(firstUser)) + "\x00" + digest(normalize(answer))
}

func responseKey(ns, id string) string { return "response\x00" + ns + "\x00" + id }

func writeMessage(h hash.Hash, m memory.Message) {
	c := m.Content
	if len(c) <= maxNormalized {
		c = normalize(c)
	}
	fmt.Fprintf(h, "%s:%d:%s\n", m.Role, len(c), c)
}

// maxNormalized is the longest message whose spacing is normalised
// before it is compared: normalising costs time in proportion to its size
// on every turn, and no client re-spaces a message that long.
const maxNormalized = 256 << 10

// messageDigest identifies a message's text.
func messageDigest(s string) string {
	if len(s) <= maxNormalized {
		s = normalize(s)
	}
	return digest(s)
}

func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:16])
}

// normalize makes texts comparable across clients that trim or re-space
// what they send back.
func normalize(s string) string { return strings.Join(strings.Fields(s), " ") }
