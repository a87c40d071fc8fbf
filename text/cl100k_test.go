package text

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/dlclark/regexp2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// regexpPieces is cl100kPattern's matches in s, by regexp2 as tiktoken-go
// runs it: the reference nextPiece must equal.
func regexpPieces(t testing.TB, re *regexp2.Regexp, s string) []string {
	runes := []rune(s)
	var out []string
	m, err := re.FindStringMatch(s)
	require.NoError(t, err)
	for m != nil {
		out = append(out, string(runes[m.Index:m.Index+m.Length]))
		m, err = re.FindNextMatch(m)
		require.NoError(t, err)
	}
	return out
}

// pieces is s cut by nextPiece.
func pieces(s string) []string {
	var out []string
	for s != "" {
		n := nextPiece(s)
		out = append(out, s[:n])
		s = s[n:]
	}
	return out
}

// pieceCases are texts at every alternative's edges: contractions in
// either case and cut short, a letter run after a space, a tab, an
// apostrophe or a line break, digits by threes, punctuation after a space
// and before line breaks, whitespace runs ending in a line break, in a
// non-space or in the text's end, and characters outside ASCII of each
// class (letters, numbers of every kind, Unicode spaces, combining marks,
// emoji).
var pieceCases = []string{
	"", "a", " ", "tiktoken is great!", "hello world", "Hello, world!",
	"I'm here, you're there, we've been, he'll go, she'd say, it's, don't",
	"I'M HERE, YOU'RE, WE'VE, HE'LL, SHE'D, IT'S, DON'T", "'Re 'rE 'Ve 'lL 'L 'r 'v 'x '", "'sorry", "''s", "a'", "'\n",
	" hello", "\thello", "'hello", "\nhello", "\r\nhello", "\u00a0hello", "-hello", "  hello",
	"1", "12", "123", "1234", "1234567", "a1b22c333d4444", " 12", "x²³", "Ⅻ½٣٤٥٦", "3.14159",
	" ...", " ...\n\n", "!!!\r\n", " !", "  !", "a  b", "a \n b", "a\n\n  b", "a \t\n\t b", "trailing   ", "  \n  ", "\r\n\r\n",
	"one\u2028two\u2029three", "wide\u3000space", "nel\u0085x", "ogham\u1680x", "zw\u200bsp",
	"Mon chat s'appelle Félix 🐈 et il a 3 ans.", "e\u0301te\u0301", "Привет, как дела? Всё хорошо.", "中文字符和标点。", "ſ'ſ K'K İ'İ ß",
	"<|endoftext|>", "func main() {\n\tfmt.Println(\"hi\")\n}\n", "    indented\n        more\n", "x\v\fy",
}

func TestCl100kPieces(t *testing.T) {
	re := regexp2.MustCompile(cl100kPattern, regexp2.None)
	for _, s := range pieceCases {
		assert.Equal(t, regexpPieces(t, re, s), pieces(s), "%q", s)
	}
	// Random texts over those characters, many classes next to each
	// other.
	alphabet := []rune("aAsStTrReEvVlLmMdDxz019 '\t\r\n\v\f.,!-_\"(\u00a0\u0085\u2028\u3000\u200bé中ж٣²Ⅻ½\u0301🐈ſKİß\ufffd")
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		b := make([]rune, rng.IntN(24)+1)
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		s := string(b)
		if !assert.Equal(t, regexpPieces(t, re, s), pieces(s), "%q", s) {
			return
		}
	}
}

// FuzzCl100kPieces: go test -fuzz FuzzCl100kPieces ./memory/
func FuzzCl100kPieces(f *testing.F) {
	for _, s := range pieceCases {
		f.Add(s)
	}
	re := regexp2.MustCompile(cl100kPattern, regexp2.None)
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			return // counted by tiktoken-go itself
		}
		assert.Equal(t, regexpPieces(t, re, s), pieces(s), "%q", s)
	})
}

// The counts equal tiktoken-go's, BPE's merges included: pieces that are
// tokens, words that are not (long, rare, misspelt, in other scripts),
// runs of one character, and texts that are not valid UTF-8 (left to
// tiktoken-go).
func TestCountIsTiktokens(t *testing.T) {
	tok, err := NewTokenizer()
	require.NoError(t, err)
	texts := append(append([]string(nil), pieceCases...), "antidisestablishmentarianism", "Pneumonoultramicroscopicsilicovolcanoconiosis",
		"qwzxkjv qwzxkjv", strings.Repeat("a", 300), strings.Repeat("ab", 200), strings.Repeat("🐈", 40),
		"aGVsbG8gd29ybGQgdGhpcyBpcyBiYXNlNjQgZW5jb2RlZCB0ZXh0", "bad \xff\xfe bytes", "\xc3", "cut \xe4\xb8")
	rng := rand.New(rand.NewPCG(3, 4))
	words := strings.Fields("the of memory vera Ollama recall zygote quixotic Straße naïve Жизнь 東京 42 3.14 don't I'll e-mail x86_64 ¿qué? 🐈‍⬛")
	for range 2000 {
		var b strings.Builder
		for range rng.IntN(30) + 1 {
			b.WriteString(words[rng.IntN(len(words))])
			b.WriteString([]string{" ", " ", " ", "  ", "\n", ", ", ".\n\n", "\t"}[rng.IntN(8)])
		}
		texts = append(texts, b.String())
	}
	for _, s := range texts {
		if !assert.Equal(t, len(tok.enc.EncodeOrdinary(s)), tok.Count(s), "%q", s) {
			return
		}
	}
}

// BenchmarkCount: a question as the harness asks it, and a stored turn.
//
//	go test -run '^$' -bench Count ./memory/
func BenchmarkCount(b *testing.B) {
	tok, err := NewTokenizer()
	require.NoError(b, err)
	for name, s := range map[string]string{
		"question": "what about w175ad w80ac9 w21eed and w6c58b?",
		"turn":     "User: Can you remind me what we decided about the trip to Lisbon in May?\nAssistant: You decided to fly on the 12th, stay four nights near Alfama, and book the tram tour on the second day. You also wanted a restaurant with fado on the last evening.",
	} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				tok.Count(s)
			}
		})
	}
}

// The heap's merge gives the scan's count on pieces of every length,
// including runs that tie on rank everywhere ("aaaa...").
func TestBPECountLongMatchesTheScan(t *testing.T) {
	tok, err := NewTokenizer()
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(1, 2))
	alphabets := []string{"a", "ab", "abcdefghijklmnopqrstuvwxyz", "etaoinshrdlu", "xyzqj", "é日本語ab"}
	for range 300 {
		abc := []rune(alphabets[rng.IntN(len(alphabets))])
		n := 2 + rng.IntN(600)
		var b strings.Builder
		for b.Len() < n {
			b.WriteRune(abc[rng.IntN(len(abc))])
		}
		piece := b.String()
		assert.Equal(t, bpeCountScan(piece, tok.ranks), bpeCountLong(piece, tok.ranks), "%q", piece)
	}
}

// bpeCountScan is bpeCount's scan at any length.
func bpeCountScan(piece string, ranks map[string]int) int {
	type part struct{ start, rank int }
	const noRank = int(^uint(0) >> 1)
	parts := make([]part, 0, len(piece)+1)
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

// A megabyte without a space costs what a megabyte of words costs, give
// or take: the merge is n log n, not n².
func BenchmarkCountOneLongWord(b *testing.B) {
	tok, err := NewTokenizer()
	require.NoError(b, err)
	for _, size := range []int{1 << 10, 1 << 16, 1 << 20} {
		word := strings.Repeat("abcdefghijklmnopqrstuvwxyz", size/26)
		b.Run(fmt.Sprint(size), func(b *testing.B) {
			b.SetBytes(int64(len(word)))
			for b.Loop() {
				tok.Count(word)
			}
		})
	}
}
