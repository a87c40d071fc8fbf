package text

import (
	"strings"
	"unicode/utf8"
)

// Capping: a text kept within a number of tokens by its head and tail
// around a "[…]" marker, in time proportional to the cap, not to the
// text. A nil Tokenizer counts about four bytes a token.

// CutMarker stands where the middle of a capped text was left out.
const CutMarker = " […] "

// Cap keeps text within maxTokens (> 0): a longer one keeps its head and
// tail around CutMarker. It returns the text (trimmed, made valid UTF-8),
// its token count, and whether it was cut.
func Cap(tok *Tokenizer, text string, maxTokens int) (string, int, bool) {
	text = strings.TrimSpace(strings.ToValidUTF8(text, "\uFFFD"))
	cut := CountAtMost(tok, text, maxTokens) > maxTokens
	if cut {
		text = Clip(tok, text, maxTokens)
	}
	return text, Count(tok, text), cut
}

// CapPair keeps two texts (a question and its answer) within budget
// tokens together, so both survive whatever their lengths: the longer
// side gives way first, and each side too long keeps its head and tail
// around CutMarker. Both are trimmed.
func CapPair(tok *Tokenizer, a, b string, budget int) (string, string) {
	a, b = strings.TrimSpace(a), strings.TrimSpace(b)
	na := CountAtMost(tok, a, budget)
	nb := CountAtMost(tok, b, budget)
	if na+nb <= budget {
		return a, b
	}
	half := budget / 2
	switch {
	case na <= half:
		b = Clip(tok, b, budget-na)
	case nb <= half:
		a = Clip(tok, a, budget-nb)
	default:
		a = Clip(tok, a, half)
		b = Clip(tok, b, budget-half)
	}
	return a, b
}

// Clip keeps the head and tail of s within n tokens around CutMarker.
func Clip(tok *Tokenizer, s string, n int) string {
	n -= 4 // the marker
	if n <= 2 {
		return strings.TrimSpace(CutMarker)
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
		return strings.TrimSpace(head) + CutMarker + strings.TrimSpace(tail)
	}
	return strings.TrimSpace(tok.Head(s, headN)) + CutMarker + strings.TrimSpace(tok.Tail(s, n-headN))
}

// CountAtMost is tok.CountAtMost, or a guess of four bytes a token
// (limit+1 at most) when tok is nil.
func CountAtMost(tok *Tokenizer, s string, limit int) int {
	if tok == nil {
		return min((len(s)+3)/4, limit+1)
	}
	return tok.CountAtMost(s, limit)
}

// Count is tok.Count(s), or a guess of four bytes a token when tok is
// nil. On a capped text it is exact at what the cap allows, and the count
// stored is the one the builder would make.
func Count(tok *Tokenizer, s string) int {
	if tok == nil {
		return (len(s) + 3) / 4
	}
	return tok.Count(s)
}
