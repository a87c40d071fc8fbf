package memory

import (
	"errors"
	"fmt"

	"github.com/vera-proxy/vera/text"
)

// DefaultMaxTurnTokens is memory.max_turn_tokens' default.
const DefaultMaxTurnTokens = 4096

// exchangeOverhead is what FormatExchange adds to the two sides, in
// tokens, with room to spare.
const exchangeOverhead = 8

// CapExchange renders a turn as FormatExchange does, keeping it within
// maxTokens (0: DefaultMaxTurnTokens): a side too long keeps its head and
// tail around a "[…]" marker, so the question and the answer both survive
// whatever their lengths (a 10 MB paste must not become a memory that
// costs every later chat its whole budget). It returns the text and its
// token count. Work is proportional to maxTokens, not to the length of
// the turn.
func CapExchange(tok *text.Tokenizer, user, assistant string, maxTokens int) (string, int) {
	if maxTokens <= 0 {
		maxTokens = DefaultMaxTurnTokens
	}
	user, assistant = text.CapPair(tok, user, assistant, maxTokens-exchangeOverhead)
	s := FormatExchange(user, assistant)
	return s, text.Count(tok, s)
}

// CapText keeps a memory's text (a statement, a rule, a profile) within
// maxTokens (0: DefaultMaxTurnTokens) as CapExchange keeps a turn (see
// text.Cap). It returns the text, its token count, and whether it was
// cut.
func CapText(tok *text.Tokenizer, s string, maxTokens int) (string, int, bool) {
	if maxTokens <= 0 {
		maxTokens = DefaultMaxTurnTokens
	}
	return text.Cap(tok, s, maxTokens)
}

// ErrTooLong: a memory's text is longer than memory.max_turn_tokens allows;
// nothing was stored.
var ErrTooLong = errors.New("memory text too long")

// CheckLength returns ErrTooLong, wrapped with the figures, when s is
// over maxTokens (0: DefaultMaxTurnTokens), in time proportional to the
// cap. Paths where a person or an agent writes a memory refuse such a
// text with a clear error rather than cut it silently.
func CheckLength(tok *text.Tokenizer, s string, maxTokens int) error {
	if maxTokens <= 0 {
		maxTokens = DefaultMaxTurnTokens
	}
	if text.CountAtMost(tok, s, maxTokens) > maxTokens {
		return fmt.Errorf("%w: over %d tokens (memory.max_turn_tokens); shorten it", ErrTooLong, maxTokens)
	}
	return nil
}
