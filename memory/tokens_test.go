package memory

import (
	"fmt"
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

// Long texts' counts are kept by digest: asked again, the same count;
// another text of the same length, its own; and still right once the
// kept counts have been dropped for room.
func TestCountKeepsLongTexts(t *testing.T) {
	tok, err := NewTokenizer()
	require.NoError(t, err)
	a := strings.Repeat("the quick brown fox ", 100)
	b := strings.Repeat("thequickbrownfox    ", 100)
	require.Equal(t, len(a), len(b))
	na, nb := tok.Count(a), tok.Count(b)
	assert.Equal(t, tok.count(a), na)
	assert.NotEqual(t, na, nb)
	assert.Len(t, tok.kept, 2)
	for i := range 200 {
		s := strings.Repeat(fmt.Sprintf("word%d ", i), 300)
		assert.Equal(t, tok.count(s), tok.Count(s))
		assert.Equal(t, tok.Count(s), tok.Count(s))
	}
	assert.Equal(t, na, tok.Count(a))
	assert.Equal(t, nb, tok.Count(b))
	assert.LessOrEqual(t, len(tok.kept), maxKept)
}
