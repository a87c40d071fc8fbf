package text

import (
	"unicode"
	"unicode/utf8"
)

// Counting without the regular expression: cl100k_base's pre-tokenizer
// (cl100kPattern) written out by hand, and BPE's merges counted without
// building the tokens. tiktoken-go runs the pattern through regexp2, a
// backtracking engine: most of a count's time went there (about 40 µs for
// a one-line question), on every chat, every stored turn and every test
// corpus. The pieces, and so the counts, are the same (TestCl100kPieces,
// FuzzCl100kPieces compare them with regexp2's matches); a text that is
// not valid UTF-8 is left to tiktoken-go, whose runes turn bad bytes into
// U+FFFD first.

// nextPiece returns the length in bytes of the piece s starts with, as
// cl100kPattern would match it at the start of s (s valid UTF-8, not
// empty). The pattern's alternatives, tried in order:
//
//	(?i:'s|'t|'re|'ve|'m|'ll|'d)
//	[^\r\n\p{L}\p{N}]?\p{L}+
//	\p{N}{1,3}
//	 ?[^\s\p{L}\p{N}]+[\r\n]*
//	\s*[\r\n]+
//	\s+(?!\S)
//	\s+
//
// \s is unicode.IsSpace, \p{L} unicode.IsLetter and \p{N}
// unicode.IsNumber, as regexp2 has them; (?i) compares unicode.ToLower.
func nextPiece(s string) int {
	r0, w0 := decodeRune(s)
	k0 := kindOf(r0)
	// A contraction.
	if r0 == '\'' && len(s) > 1 {
		r1, w1 := decodeRune(s[1:])
		switch l1 := unicode.ToLower(r1); l1 {
		case 's', 't', 'm', 'd':
			return 1 + w1
		case 'r', 'v', 'l': // 're, 've, 'll
			if len(s) > 1+w1 {
				r2, w2 := decodeRune(s[1+w1:])
				if l2 := unicode.ToLower(r2); l2 == 'e' && l1 != 'l' || l2 == 'l' && l1 == 'l' {
					return 1 + w1 + w2
				}
			}
		}
	}
	// Letters, after at most one character that is none of a line
	// break, a letter or a number.
	if k0 == letter {
		return w0 + run(s[w0:], letter)
	}
	if r0 != '\r' && r0 != '\n' && k0 != number && len(s) > w0 {
		if r1, w1 := decodeRune(s[w0:]); kindOf(r1) == letter {
			return w0 + w1 + run(s[w0+w1:], letter)
		}
	}
	// One to three digits.
	if k0 == number {
		n := w0
		for i := 1; i < 3 && n < len(s); i++ {
			r, w := decodeRune(s[n:])
			if kindOf(r) != number {
				break
			}
			n += w
		}
		return n
	}
	// Other characters, after at most one space, then line breaks.
	start := -1
	if k0 == other {
		start = 0
	} else if r0 == ' ' && len(s) > 1 {
		if r1, _ := decodeRune(s[1:]); kindOf(r1) == other {
			start = 1
		}
	}
	if start >= 0 {
		n := start + run(s[start:], other)
		for n < len(s) && (s[n] == '\r' || s[n] == '\n') {
			n++
		}
		return n
	}
	// Whitespace (k0 == space): up to its last line break, if it holds
	// one; else all of it at the end of the text, or all but its last
	// character before a non-space, or all of a single one.
	end := w0 + run(s[w0:], space)
	for i := end - 1; i >= 0; i-- {
		if s[i] == '\r' || s[i] == '\n' {
			return i + 1
		}
	}
	if end == len(s) {
		return end
	}
	_, last := utf8.DecodeLastRuneInString(s[:end])
	if end-last > 0 {
		return end - last
	}
	return end
}

// The classes the pattern tells apart: \p{L}, \p{N}, \s, and the rest.
const (
	other = iota
	letter
	number
	space
)

// kindOf is r's class.
func kindOf(r rune) int {
	if r < utf8.RuneSelf {
		switch {
		case 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z':
			return letter
		case '0' <= r && r <= '9':
			return number
		case r == ' ' || '\t' <= r && r <= '\r':
			return space
		}
		return other
	}
	switch {
	case unicode.IsLetter(r):
		return letter
	case unicode.IsNumber(r):
		return number
	case unicode.IsSpace(r):
		return space
	}
	return other
}

// run is the length in bytes of the characters of class k s starts with.
func run(s string, k int) int {
	n := 0
	for n < len(s) {
		r, w := decodeRune(s[n:])
		if kindOf(r) != k {
			break
		}
		n += w
	}
	return n
}

// decodeRune is utf8.DecodeRuneInString, ASCII first.
func decodeRune(s string) (rune, int) {
	if s[0] < utf8.RuneSelf {
		return rune(s[0]), 1
	}
	return utf8.DecodeRuneInString(s)
}

// bpeCount is how many tokens BPE makes of piece with ranks: tiktoken's
// merge (its bytePairMerge) counted, not built. The lowest-ranked pair of
// adjacent parts is merged first, the leftmost of equals, until no pair
// is a token.
//
// Each merge scans the parts, so the work grows with the square of the
// piece's length: nothing for a word, minutes for a megabyte without a
// space in it (a pasted blob, or one long "remember that"). Past
// shortPiece bytes the same merge order is kept in a heap instead.
func bpeCount(piece string, ranks map[string]int) int {
	if len(piece) < 2 {
		return len(piece)
	}
	if len(piece) > shortPiece {
		return bpeCountLong(piece, ranks)
	}
	// parts[i]: where part i starts, and the rank of it merged with the
	// next (noRank: not a token).
	type part struct{ start, rank int }
	const noRank = int(^uint(0) >> 1)
	var buf [64]part
	parts := buf[:0]
	if len(piece)+1 > len(buf) {
		parts = make([]part, 0, len(piece)+1)
	}
	for i := range len(piece) + 1 {
		parts = append(parts, part{i, noRank})
	}
	rank := func(i, skip int) int {
		if i+skip+2 < len(parts) {
			if r, ok := ranks[piece[parts[i].start:parts[i+skip+2].start]]; ok {
				return r
			}
		}
		return noRank
	}
	for i := 0; i < len(parts)-2; i++ {
		parts[i].rank = rank(i, 0)
	}
	for len(parts) > 1 {
		best, at := noRank, -1
		for i := 0; i < len(parts)-1; i++ {
			if parts[i].rank < best {
				best, at = parts[i].rank, i
			}
		}
		if at < 0 {
			break
		}
		parts[at].rank = rank(at, 1)
		if at > 0 {
			parts[at-1].rank = rank(at-1, 1)
		}
		parts = append(parts[:at+1], parts[at+2:]...)
	}
	return len(parts) - 1
}

// shortPiece is the longest piece bpeCount merges by scanning: below it a
// scan is cheaper than a heap.
const shortPiece = 128

// bpeCountLong is bpeCount in time n log n: the parts are a linked list,
// and the pairs that are tokens wait in a heap ordered by rank, then by
// position (the leftmost of equals, as the scan picks). A merge makes the
// pairs on either side of it stale; they are skipped when popped.
func bpeCountLong(piece string, ranks map[string]int) int {
	n := len(piece)
	next := make([]int32, n) // the part after part i (parts start at byte i); n: none
	prev := make([]int32, n)
	gen := make([]int32, n) // bumped when part i changes; -1: merged away
	for i := range n {
		next[i], prev[i] = int32(i+1), int32(i-1)
	}
	end := func(i int32) int32 {
		if next[i] >= int32(n) {
			return int32(n)
		}
		return next[next[i]]
	}
	h := pairHeap{}
	push := func(i int32) {
		if next[i] >= int32(n) {
			return
		}
		if r, ok := ranks[piece[i:end(i)]]; ok {
			h.push(pair{rank: int32(r), at: i, gen: gen[i]})
		}
	}
	for i := range int32(n) {
		push(i)
	}
	parts := n
	for len(h) > 0 {
		p := h.pop()
		if gen[p.at] != p.gen {
			continue // stale: the part or its right neighbour grew since
		}
		j := next[p.at]
		next[p.at] = next[j]
		if next[j] < int32(n) {
			prev[next[j]] = p.at
		}
		gen[j] = -1
		gen[p.at]++
		parts--
		push(p.at)
		if q := prev[p.at]; q >= 0 {
			gen[q]++
			push(q)
		}
	}
	return parts
}

// pair is a merge waiting in a pairHeap: part at and the next one make the
// token of rank, as of the part's generation gen.
type pair struct{ rank, at, gen int32 }

func (a pair) before(b pair) bool { return a.rank < b.rank || a.rank == b.rank && a.at < b.at }

// pairHeap is a binary min-heap of pairs (container/heap without the
// interface calls, which the merges of a long piece would pay for).
type pairHeap []pair

func (h *pairHeap) push(p pair) {
	*h = append(*h, p)
	s := *h
	for i := len(s) - 1; i > 0; {
		parent := (i - 1) / 2
		if !s[i].before(s[parent]) {
			break
		}
		s[i], s[parent] = s[parent], s[i]
		i = parent
	}
}

func (h *pairHeap) pop() pair {
	s := *h
	top := s[0]
	last := len(s) - 1
	s[0] = s[last]
	s = s[:last]
	for i := 0; ; {
		l, m := 2*i+1, i
		if l < len(s) && s[l].before(s[m]) {
			m = l
		}
		if r := l + 1; r < len(s) && s[r].before(s[m]) {
			m = r
		}
		if m == i {
			break
		}
		s[i], s[m] = s[m], s[i]
		i = m
	}
	*h = s
	return top
}
