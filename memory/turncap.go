package memory

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/vera-proxy/vera/text"
)

// DefaultMaxTurnTokens is memory.max_turn_tokens' default.
const DefaultMaxTurnTokens = 4096

// cutMarker stands where the middle of an over-long side of a turn was
// left out.
const cutMarker = " […] "

// exchangeOverhead is what FormatExchange adds to the two sides, in
// tokens, with room to spare.
const exchangeOverhead = 8

// CapExchange renders a turn as FormatExchange does, keeping it within
// maxTokens: a side too long keeps its head and tail around a "[…]"
// marker, so the question and the answer both survive whatever their
// lengths (a 10 MB paste must not become a memory that costs every later
// chat its whole budget). It returns the text and its token count. Work is
// proportional to maxTokens, not to the length of the turn.
func CapExchange(tok *text.Tokenizer, user, assistant string, maxTokens int) (string, int) {
	if maxTokens <= 0 {
		maxTokens = DefaultMaxTurnTokens
	}
	user, assistant = strings.TrimSpace(user), strings.TrimSpace(assistant)
	budget := maxTokens - exchangeOverhead
	nu := countAtMost(tok, user, budget)
	na := countAtMost(tok, assistant, budget)
	if nu+na > budget {
		half := budget / 2
		switch {
		case nu <= half:
			assistant = clipMiddle(tok, assistant, budget-nu)
		case na <= half:
			user = clipMiddle(tok, user, budget-na)
		default:
			user = clipMiddle(tok, user, half)
			assistant = clipMiddle(tok, assistant, budget-half)
		}
	}
	text := FormatExchange(user, assistant)
	if tok == nil {
		return text, (len(text) + 3) / 4
	}
	// Exact: the text is within the cap now, so this costs what the cap
	// allows, and the count stored is the one the builder would make.
	return text, tok.Count(text)
}

// clipMiddle keeps the head and tail of s within n tokens around cutMarker.
func clipMiddle(tok *text.Tokenizer, s string, n int) string {
	n -= 4 // the marker
	if n <= 2 {
		return strings.TrimSpace(cutMarker)
	}
	headN := n / 2
	if tok == nil {
		// About four bytes a token.
		head, tail := s[:min(len(s), headN*4)], s[max(0, len(s)-(n-headN)*4):]
		for len(head) > 0 && len(head) < len(s) && !utf8.RuneStart(s[len(head)]) {
			head = head[:len(head)-1]
		}
		for len(tail) > 0 && !utf8.RuneStart(tail[0]) {
			tail = tail[1:]
		}
		return strings.TrimSpace(head) + cutMarker + strings.TrimSpace(tail)
	}
	return strings.TrimSpace(tok.Head(s, headN)) + cutMarker + strings.TrimSpace(tok.Tail(s, n-headN))
}

func countAtMost(tok *text.Tokenizer, s string, limit int) int {
	if tok == nil {
		return min((len(s)+3)/4, limit+1)
	}
	return tok.CountAtMost(s, limit)
}

// CapText keeps a memory's text (a statement, a rule, a profile) within
// maxTokens as CapExchange keeps a turn: a longer one keeps its head and
// tail around a "[…]" marker. It returns the text, its token count, and
// whether it was cut. Work is proportional to maxTokens, not to the
// length of text, so a megabyte costs what the cap allows.
func CapText(tok *text.Tokenizer, text string, maxTokens int) (string, int, bool) {
	if maxTokens <= 0 {
		maxTokens = DefaultMaxTurnTokens
	}
	text = strings.TrimSpace(strings.ToValidUTF8(text, "\uFFFD"))
	n := countAtMost(tok, text, maxTokens)
	cut := n > maxTokens
	if cut {
		text = clipMiddle(tok, text, maxTokens)
	}
	if tok == nil {
		return text, (len(text) + 3) / 4, cut
	}
	// Exact, as a turn's: the text is within the cap now, so this
	// costs what the cap allows.
	return text, tok.Count(text), cut
}

// ErrTooLong: a memory's text is longer than memory.max_turn_tokens allows;
// nothing was stored.
var ErrTooLong = errors.New("memory text too long")

// CheckLength returns ErrTooLong, wrapped with the figures, when text is
// over maxTokens (0: DefaultMaxTurnTokens), in time proportional to the
// cap. Paths where a person or an agent writes a memory refuse such a
// text with a clear error rather than cut it silently.
func CheckLength(tok *text.Tokenizer, text string, maxTokens int) error {
	if maxTokens <= 0 {
		maxTokens = DefaultMaxTurnTokens
	}
	if countAtMost(tok, text, maxTokens) > maxTokens {
		return fmt.Errorf("%w: over %d tokens (memory.max_turn_tokens); shorten it", ErrTooLong, maxTokens)
	}
	return nil
}
