package memory

import (
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
