package text

import (
	"fmt"
	"hash/maphash"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTokenizerIsCl100k(t *testing.T) {
	tok, err := NewTokenizer()
	require.NoError(t, err)
	// The ids OpenAI's cookbook shows for cl100k_base.
	assert.Equal(t, []int{83, 1609, 5963, 374, 2294, 0}, tok.enc.EncodeOrdinary("tiktoken is great!"))
	assert.Equal(t, 6, tok.Count("tiktoken is great!"))
	assert.Equal(t, 2, tok.Count("hello world"))
	assert.Equal(t, 0, tok.Count(""))

	// Control-token text from a user is ordinary text: several tokens, none
	// of them <|endoftext|> (100257), and it decodes back unchanged.
	ids := tok.enc.EncodeOrdinary("<|endoftext|>")
	assert.Greater(t, len(ids), 1)
	assert.NotContains(t, ids, 100257)
	assert.Equal(t, "<|endoftext|>", tok.enc.Decode(ids))

	text := "Mon chat s'appelle Félix 🐈 et il a 3 ans."
	assert.Equal(t, text, tok.enc.Decode(tok.enc.EncodeOrdinary(text)))
}

func TestTokenizerConcurrent(t *testing.T) {
	tok, err := NewTokenizer()
	require.NoError(t, err)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				assert.Equal(t, 4, tok.Count("Hello, world!"))
			}
		})
	}
	wg.Wait()
}

// Long texts' counts are kept by digest, as far as they were counted:
// asked again at any limit, the answer is the one counting gives, without
// counting again when what is kept tells; another text of the same length
// has its own; short texts are not kept; and all stays right once the kept
// counts are dropped for room.
func TestCountAtMostKeepsLongTexts(t *testing.T) {
	tok, err := NewTokenizer()
	require.NoError(t, err)
	long := strings.Repeat("word ", 400) // 2000 bytes
	exact := tok.countAtMost(long, 1<<20)
	key := keptKey{maphash.String(tok.seed, long), len(long)}
	for _, limit := range []int{1000, 500, exact, exact - 1, 100, 0, -5, 5000} {
		assert.Equal(t, tok.countAtMost(long, max(limit, 0)), tok.CountAtMost(long, limit), "limit %d", limit)
	}
	assert.Equal(t, [2]int{exact, 1000}, tok.kept[key], "counted once: the first count was exact")

	tok.kept = nil
	assert.Equal(t, 101, tok.CountAtMost(long, 100))
	assert.Equal(t, 51, tok.CountAtMost(long, 50), "more than 100 is more than 50")
	assert.Equal(t, [2]int{101, 100}, tok.kept[key], "not counted again")
	assert.Equal(t, exact, tok.CountAtMost(long, 5000), "past what was counted: counted again")
	assert.Equal(t, [2]int{exact, 5000}, tok.kept[key])
	tok.CountAtMost("a few words", 10)
	assert.Len(t, tok.kept, 1, "short texts are not kept")

	a := strings.Repeat("the quick brown fox ", 100)
	b := strings.Repeat("thequickbrownfox    ", 100)
	require.Equal(t, len(a), len(b))
	assert.Equal(t, tok.count(a), tok.CountAtMost(a, 1<<20))
	assert.Equal(t, tok.count(b), tok.CountAtMost(b, 1<<20))
	assert.NotEqual(t, tok.count(a), tok.count(b))
	for i := range 200 {
		s := strings.Repeat(fmt.Sprintf("word%d ", i), 300)
		assert.Equal(t, tok.countAtMost(s, 1<<20), tok.CountAtMost(s, 1<<20))
		assert.Equal(t, tok.countAtMost(s, 1<<20), tok.CountAtMost(s, 1<<20))
	}
	assert.Equal(t, tok.count(a), tok.CountAtMost(a, 1<<20))
	assert.LessOrEqual(t, len(tok.kept), maxKept)
}
