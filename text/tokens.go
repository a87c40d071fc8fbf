package text

import (
	"fmt"
	"hash/maphash"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/pkoukk/tiktoken-go"
	tiktokenloader "github.com/pkoukk/tiktoken-go-loader"
)

// cl100kPattern is cl100k_base's pre-tokenizer, as tiktoken defines it.
const cl100kPattern = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`

// Tokenizer counts tokens with tiktoken's cl100k_base. The ranks come from
// the copy compiled into the binary (tiktoken-go-loader): nothing is
// downloaded at run time, and no package-level loader is installed. It is
// safe for concurrent use.
type Tokenizer struct {
	enc   *tiktoken.Tiktoken
	ranks map[string]int // cl100k_base's tokens

	seed maphash.Seed
	mu   sync.Mutex
	kept map[keptKey][2]int // long texts: count, and the limit counted to

	fixed sync.Map // text vera writes itself (an intro, a header) → count
}

// keptKey identifies a long text without holding it.
type keptKey struct {
	sum uint64
	len int
}

// keptAbove is the length from which CountAtMost keeps a text's count: a
// system prompt sent with every turn, or a conversation's older messages,
// are counted once, where counting takes about a millisecond per 1,500
// tokens.
const keptAbove = 1024

// maxKept bounds how many counts are kept; all are dropped when full.
const maxKept = 64

// NewTokenizer loads cl100k_base. It takes a few hundred milliseconds:
// build one and share it.
func NewTokenizer() (*Tokenizer, error) {
	ranks, err := tiktokenloader.NewOfflineLoader().LoadTiktokenBpe("cl100k_base.tiktoken")
	if err != nil {
		return nil, fmt.Errorf("load cl100k_base: %w", err)
	}
	special := map[string]int{
		"<|endoftext|>":   100257,
		"<|fim_prefix|>":  100258,
		"<|fim_middle|>":  100259,
		"<|fim_suffix|>":  100260,
		"<|endofprompt|>": 100276,
	}
	bpe, err := tiktoken.NewCoreBPE(ranks, special, cl100kPattern)
	if err != nil {
		return nil, fmt.Errorf("build cl100k_base: %w", err)
	}
	set := make(map[string]any, len(special))
	for k := range special {
		set[k] = true
	}
	enc := tiktoken.NewTiktoken(bpe, &tiktoken.Encoding{
		Name: "cl100k_base", PatStr: cl100kPattern, MergeableRanks: ranks, SpecialTokens: special,
	}, set)
	return &Tokenizer{enc: enc, ranks: ranks, seed: maphash.MakeSeed()}, nil
}

// Count returns the number of tokens in s. Special-token text such as
// "<|endoftext|>" in user input counts as ordinary text, never as a control
// token.
func (t *Tokenizer) Count(s string) int {
	return t.count(s)
}

// CountFixed counts a text vera writes itself, of which there are few
// (an intro, the shape of a header): each is counted once.
func (t *Tokenizer) CountFixed(s string) int {
	if n, ok := t.fixed.Load(s); ok {
		return n.(int)
	}
	n := t.count(s)
	t.fixed.Store(s, n)
	return n
}

func (t *Tokenizer) count(s string) int {
	if !utf8.ValidString(s) {
		// tiktoken's own encoder, a chunk at a time: on a long piece it
		// takes time quadratic in the piece's length.
		n := 0
		for s != "" {
			c := chunk(s)
			n += len(t.enc.EncodeOrdinary(c))
			s = s[len(c):]
		}
		return n
	}
	n := 0
	for s != "" {
		p := s[:nextPiece(s)]
		if _, ok := t.ranks[p]; ok {
			n++
		} else {
			n += bpeCount(p, t.ranks)
		}
		s = s[len(p):]
	}
	return n
}

// chunkBytes is how much text is encoded at a time by the bounded
// functions below. BPE works per pre-tokenized piece, and a piece with no
// spaces in it (a base64 blob, a long run of one letter) costs time
// quadratic in its length: chunking bounds that cost as well as the total.
const chunkBytes = 2048

// chunk returns the first piece of s to encode: at most chunkBytes, cut
// after whitespace near the end when there is some (so few words are
// split), and always on a rune boundary.
func chunk(s string) string {
	if len(s) <= chunkBytes {
		return s
	}
	c := s[:chunkBytes]
	if i := strings.LastIndexAny(c[chunkBytes-256:], " \n\t"); i >= 0 {
		return c[:chunkBytes-256+i+1]
	}
	for len(c) > 0 && !utf8.RuneStart(s[len(c)]) {
		c = c[:len(c)-1]
	}
	if c == "" {
		// A run of continuation bytes (not UTF-8): cut anywhere, or
		// the callers would never advance.
		return s[:chunkBytes]
	}
	return c
}

// CountAtMost counts the tokens of s, but stops as soon as there are more
// than limit and returns limit+1: its work is proportional to limit, not
// to the length of s. Counts of long texts are approximate by a token or
// so per 2 KiB.
func (t *Tokenizer) CountAtMost(s string, limit int) int {
	limit = max(limit, 0)
	if len(s) < keptAbove {
		return t.countAtMost(s, limit)
	}
	// A long text's count is kept as far as it went: exact when it was
	// at most its limit, else only "more than".
	k := keptKey{maphash.String(t.seed, s), len(s)}
	t.mu.Lock()
	e, ok := t.kept[k]
	t.mu.Unlock()
	switch {
	case ok && e[0] <= e[1]: // exact
		return min(e[0], limit+1)
	case ok && limit <= e[1]: // more than e[1], so more than limit
		return limit + 1
	}
	n := t.countAtMost(s, limit)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.kept == nil || len(t.kept) >= maxKept {
		t.kept = map[keptKey][2]int{}
	}
	t.kept[k] = [2]int{n, limit}
	return n
}

func (t *Tokenizer) countAtMost(s string, limit int) int {
	n := 0
	for s != "" {
		c := chunk(s)
		n += t.count(c)
		if n > limit {
			return limit + 1
		}
		s = s[len(c):]
	}
	return n
}

// Head returns the longest start of s that holds at most n tokens.
func (t *Tokenizer) Head(s string, n int) string {
	end := 0
	for end < len(s) && n > 0 {
		c := chunk(s[end:])
		toks := t.enc.EncodeOrdinary(c)
		if len(toks) <= n {
			end += len(c)
			n -= len(toks)
			continue
		}
		end += len(t.enc.Decode(toks[:n]))
		break
	}
	return ValidPrefix(s[:end])
}

// Tail returns the longest end of s that holds at most n tokens (counted
// from the end in chunks, so approximately).
func (t *Tokenizer) Tail(s string, n int) string {
	start := len(s)
	for start > 0 && n > 0 {
		from := max(start-chunkBytes, 0)
		for from > 0 && !utf8.RuneStart(s[from]) {
			from++
		}
		toks := t.enc.EncodeOrdinary(s[from:start])
		if len(toks) <= n {
			start = from
			n -= len(toks)
			continue
		}
		start -= len(t.enc.Decode(toks[len(toks)-n:]))
		break
	}
	for start < len(s) && !utf8.RuneStart(s[start]) {
		start++
	}
	return s[start:]
}

// ValidPrefix drops a rune cut in half at the end of s.
func ValidPrefix(s string) string {
	for i := len(s) - 1; i >= 0 && i >= len(s)-utf8.UTFMax; i-- {
		if utf8.RuneStart(s[i]) {
			if !utf8.FullRuneInString(s[i:]) {
				return s[:i]
			}
			break
		}
	}
	return s
}
