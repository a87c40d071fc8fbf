package conversation

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"strings"

	"github.com/vera-proxy/vera/memory"
)

// Where a request stands: which conversation it belongs to (its keys),
// the point in it (the history before its last user message), and the
// digests that compare messages across clients that re-space them.

// place is where a request stands in its conversation.
type place struct {
	Key    string // the conversation's key
	Strong bool   // identified by a chat id or previous_response_id
	// First: no earlier answer in the request; its layers are chosen
	// afresh.
	First    bool
	ToolLoop bool
	// Chained: linked to the answer before by previous_response_id.
	Chained bool
	// Point identifies the history before the last user message: a
	// request at the point of a recorded turn redoes it.
	Point string
	// User is the ordinal, among the request's user messages, of its last
	// one (-1: none), and userDigest that message's digest.
	User       int
	UserDigest string
	// AnswerKey, when set, makes a key of an answer: a conversation
	// without an id is known by its first user message and the first
	// answer vera gave to it.
	AnswerKey func(answer string) string
}

// placeOf tells which conversation a request belongs to and where in it it
// stands: by Open WebUI's chat id, else by the Responses API's
// previous_response_id, else by the namespace, the first user message and
// the first answer in the request.
func placeOf(ns string, th Thread, msgs []memory.Message) place {
	p := place{ToolLoop: th.ToolLoop, User: -1}
	h := sha256.New()
	users, last, firstAnswer, answered := 0, -1, "", false
	for i, m := range msgs {
		switch m.Role {
		case "user": // tool results have role tool, whatever the dialect
			last, p.User = i, users
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
		p.UserDigest = messageDigest(msgs[last].Content)
	}
	// A tool loop's step continues a turn even when its calls are not
	// messages (the Responses API's function_call items).
	p.First = !answered && !th.ToolLoop && th.PreviousResponseID == ""
	switch {
	case th.ChatID != "":
		p.Key, p.Strong = "chat\x00"+ns+"\x00"+th.ChatID, true
	case th.PreviousResponseID != "":
		p.Key, p.Strong, p.Chained = responseKey(ns, th.PreviousResponseID), true, true
		fmt.Fprintf(h, "prev:%s", th.PreviousResponseID)
	case firstAnswer != "":
		p.Key = answerKey(ns, th.FirstUser, firstAnswer)
	default:
		first := th.FirstUser
		p.Key = "first\x00" + ns + "\x00" + digest(normalize(first))
		p.AnswerKey = func(answer string) string { return answerKey(ns, first, answer) }
	}
	p.Point = hex.EncodeToString(h.Sum(nil)[:16])
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

// keptBlocks returns the blocks of earlier turns that still stand where
// they were put (an edit of an earlier message drops its block and every
// later one), and the block of the request's own user message when it is
// asked again unchanged (a regenerate).
func keptBlocks(blocks []convBlock, msgs []memory.Message, at place) (kept []convBlock, again *convBlock) {
	users := map[int]string{}
	n := 0
	for _, m := range msgs {
		if m.Role == "user" {
			if n < at.User {
				users[n] = messageDigest(m.Content)
			}
			n++
		}
	}
	for i, b := range blocks {
		switch {
		case b.User < at.User && users[b.User] == b.Digest:
			kept = append(kept, b)
			continue
		case b.User == at.User && b.Digest == at.UserDigest:
			again = &blocks[i]
		}
		break
	}
	return kept, again
}

// Thread is what tells which conversation a request belongs to, and where
// in it the request is (Conversations): Open WebUI's chat id, the
// Responses API's previous_response_id, the conversation's first user
// message; and whether the request continues an agent's tool loop (its
// last message is a tool result), which continues the turn of the last
// user message rather than starting one.
type Thread struct {
	ChatID             string
	PreviousResponseID string
	FirstUser          string
	ToolLoop           bool
}
