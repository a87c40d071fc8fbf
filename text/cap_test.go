package text

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCapKeepsHeadAndTail(t *testing.T) {
	tok, err := NewTokenizer()
	require.NoError(t, err)
	long := "START " + strings.Repeat("filler words here ", 2000) + " END"
	for _, tk := range []*Tokenizer{tok, nil} {
		got, n, cut := Cap(tk, long, 100)
		assert.True(t, cut)
		assert.LessOrEqual(t, n, 100)
		assert.True(t, strings.HasPrefix(got, "START"), got)
		assert.True(t, strings.HasSuffix(got, "END"), got)
		assert.Contains(t, got, strings.TrimSpace(CutMarker))
	}
	got, n, cut := Cap(tok, "  short \xff text ", 100)
	assert.False(t, cut)
	assert.Equal(t, "short \uFFFD text", got, "trimmed, made valid UTF-8")
	assert.Equal(t, tok.Count(got), n)
}

func TestCapPairKeepsBothSides(t *testing.T) {
	tok, err := NewTokenizer()
	require.NoError(t, err)
	huge := strings.Repeat("paste ", 50000)
	q, a := CapPair(tok, "Where do I live?", huge+"Lisbon.", 200)
	assert.Equal(t, "Where do I live?", q, "the short side is kept whole")
	assert.True(t, strings.HasSuffix(a, "Lisbon."), "the long side keeps its tail")
	assert.LessOrEqual(t, tok.Count(q)+tok.Count(a), 200)

	q, a = CapPair(tok, huge+"Q?", huge+"A.", 200)
	assert.True(t, strings.HasSuffix(q, "Q?") && strings.HasSuffix(a, "A."), "both cut, both kept")
	assert.LessOrEqual(t, tok.Count(q)+tok.Count(a), 200)

	q, a = CapPair(nil, " hi ", " there ", 200)
	assert.Equal(t, []string{"hi", "there"}, []string{q, a}, "within the budget: trimmed only")
}
