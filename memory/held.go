package memory

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/vera-proxy/vera/text"
)

// What the request already holds (its exchanges, and the facts a
// client's own memory carries): a memory saying the same again is not
// injected.

// historySet holds the request's own exchanges, normalised, so memories
// the conversation already contains are not injected again.
type historySet struct {
	user, assistant map[string]bool
	// carried holds the words of each fact the client's own memory puts
	// in the prompt (Request.Carried), and their normalised texts.
	carried     []map[string]bool
	carriedText map[string]bool
	// exchanges, for a later block, holds the words of each exchange the
	// request forwards (a user message and the answer after it): a
	// memory that mostly repeats one is left out (repeats), unless what
	// it adds is what the last user message asks about (asked).
	exchanges []map[string]bool
	asked     map[string]bool
	// stems finds the words' terms (the builder's own cache).
	stems *text.Stemmer
}

// withExchanges adds msgs' exchanges to h, for repeats.
func (h historySet) withExchanges(msgs []Message) historySet {
	var cur map[string]bool
	for _, m := range msgs {
		if len(m.Content) > maxHistoryBytes || m.Role != "user" && m.Role != "assistant" {
			continue
		}
		if m.Role == "user" || cur == nil {
			cur = map[string]bool{}
			h.exchanges = append(h.exchanges, cur)
		}
		if m.Role == "user" {
			h.asked = cur // the last user message's words, once read
		}
		for _, w := range h.stems.Terms(m.Content) {
			cur[w] = true
		}
	}
	return h
}

// needs reports whether text holds a word the last user message asks
// about that the model sees nowhere else in the request (in the turns
// forwarded before it, or in held, what the prompt carries besides):
// what a question about something told long ago needs, where an agent's
// alike turns only find more of what the prompt holds.
func (h historySet) needs(content string, held []string) bool {
	missing := map[string]bool{}
	for w := range h.asked {
		missing[w] = true
	}
	for i, ex := range h.exchanges {
		if i == len(h.exchanges)-1 {
			break // the question itself
		}
		for w := range ex {
			delete(missing, w)
		}
	}
	for _, s := range held {
		if len(missing) == 0 {
			break
		}
		for _, w := range h.stems.Terms(s) {
			delete(missing, w)
		}
	}
	if len(missing) > neededWords {
		// Not a question about one thing: a long message whose words the
		// prompt lacks (an agent's step, a pasted page) finds more of the
		// same, not something it needs.
		return false
	}
	for _, w := range h.stems.Terms(content) {
		if missing[w] {
			return true
		}
	}
	return false
}

// neededWords is the most words a question names that the prompt lacks:
// "what is my locker code?" names two.
const neededWords = 3

// repeatShare is the share of a memory's words that, all found in one
// exchange the model sees, make it a repeat of that exchange.
const repeatShare = 0.8

// repeats reports whether most of text's words are in one exchange the
// request forwards: the model sees what it says already. An agent's chat
// whose turns are alike would otherwise have every later turn recall its
// own earlier turns, and its blocks fill the room that a question about
// something else needs.
func (h historySet) repeats(content string) bool {
	if len(h.exchanges) == 0 {
		return false
	}
	if user, assistant, ok := ParseExchange(content); ok {
		content = user + "\n" + assistant // not its "User:" and "Assistant:"
	}
	words := map[string]bool{}
	for _, w := range h.stems.Terms(content) {
		words[w] = true
	}
	if len(words) == 0 {
		return false
	}
	for i, ex := range h.exchanges {
		if i == len(h.exchanges)-1 && len(h.exchanges) > 1 {
			continue // the question itself: a memory that answers it repeats it
		}
		in, adds := 0, false
		for w := range words {
			switch {
			case ex[w]:
				in++
			case h.asked[w]:
				adds = true // it adds what the question asks about
			}
		}
		if !adds && float64(in) >= repeatShare*float64(len(words)) {
			return true
		}
	}
	return false
}

// withCarried adds the client's own memories to h, for carries: the
// first maxCarried of them, within maxCarriedBytes (Open WebUI sends three;
// a request may claim any number, each compared with every memory).
func (h historySet) withCarried(facts []string) historySet {
	size := 0
	for i, f := range facts {
		if size += len(f); i == maxCarried || size > maxCarriedBytes {
			break
		}
		words := map[string]bool{}
		for _, w := range h.stems.Terms(f) {
			if !carriedSubject[w] {
				words[w] = true
			}
		}
		if h.carriedText == nil {
			h.carriedText = map[string]bool{}
		}
		h.carriedText[normalize(f)] = true
		h.carried = append(h.carried, words)
	}
	return h
}

// The most of the client's own facts compared with memories.
const (
	maxCarried      = 64
	maxCarriedBytes = 64 << 10
)

// carriedSubject are the words memories about a person use for them
// ("The user lives in Vienna", "User likes tea"): they say nothing a fact
// does not.
var carriedSubject = map[string]bool{"user": true}

// carries reports whether the client's own memory already says what text
// says: the same text, or one of its facts holds nearly all of text's
// words (repeatShare of them, stemmed, less the words for the person). A
// memory that adds to a fact (a turn that tells more) is not carried.
func (h historySet) carries(content string) bool {
	if len(h.carried) == 0 {
		return false
	}
	if h.carriedText[normalize(content)] {
		return true
	}
	if user, assistant, ok := ParseExchange(content); ok {
		content = user + "\n" + assistant
	}
	words := map[string]bool{}
	for _, w := range h.stems.Terms(content) {
		if !carriedSubject[w] {
			words[w] = true
		}
	}
	if len(words) == 0 {
		return false
	}
	for _, fact := range h.carried {
		in := 0
		for w := range words {
			if fact[w] {
				in++
			}
		}
		if float64(in) >= repeatShare*float64(len(words)) {
			return true
		}
	}
	return false
}

func history(msgs []Message, stems *text.Stemmer) historySet {
	h := historySet{user: map[string]bool{}, assistant: map[string]bool{}, stems: stems}
	for _, m := range msgs {
		if len(m.Content) > maxHistoryBytes {
			// Too long to have been stored whole (max_turn_tokens): it
			// cannot match a memory, and normalising it would cost
			// time in proportion to its size on every chat.
			continue
		}
		switch m.Role {
		case "user":
			h.user[normalize(m.Content)] = true
		case "assistant":
			h.assistant[normalize(m.Content)] = true
		}
	}
	return h
}

// has reports whether the exchange in text is already in the request: its
// question and its answer both appear there.
func (h historySet) has(text string) bool {
	if len(h.user) == 0 || len(h.assistant) == 0 {
		return false // a first turn: nothing to compare
	}
	user, assistant, ok := ParseExchange(text)
	if !ok {
		return false
	}
	return h.user[normalize(user)] && h.assistant[normalize(assistant)]
}

// maxHistoryBytes is the longest message compared with stored memories.
const maxHistoryBytes = 256 << 10

// normalize lowers s and reduces its runs of white space to one space,
// trimmed: strings.ToLower(strings.Join(strings.Fields(s), " ")) in one
// pass (it runs on every hit of every chat).
func normalize(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	space := false
	for _, r := range s {
		switch {
		case r < utf8.RuneSelf && asciiSpace[r]:
			space = true
			continue
		case r >= utf8.RuneSelf && unicode.IsSpace(r):
			space = true
			continue
		}
		if space && b.Len() > 0 {
			b.WriteByte(' ')
		}
		space = false
		if r < utf8.RuneSelf {
			if 'A' <= r && r <= 'Z' {
				r += 'a' - 'A'
			}
			b.WriteByte(byte(r))
		} else {
			b.WriteRune(unicode.ToLower(r))
		}
	}
	return b.String()
}

// asciiSpace is strings.Fields' white space among ASCII.
var asciiSpace = [utf8.RuneSelf]bool{'\t': true, '\n': true, '\v': true, '\f': true, '\r': true, ' ': true}
