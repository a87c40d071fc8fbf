package conversation

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/vera-proxy/vera/memory"
)

func TestTailAndCut(t *testing.T) {
	msgs := []memory.Message{
		{Role: "system", Content: "s"},
		{Role: "user", Content: "u0 aaaa aaaa"}, {Role: "assistant", Content: "a0"},
		{Role: "user", Content: "u1"}, {Role: "assistant", Content: "call"}, {Role: "tool", Content: "result"}, {Role: "assistant", Content: "a1"},
		{Role: "user", Content: "u2"},
	}
	assert.Equal(t, msgs, tail(msgs, 0))
	assert.Equal(t, []memory.Message{msgs[0], msgs[3], msgs[4], msgs[5], msgs[6], msgs[7]}, tail(msgs, 1), "from the second user message, the system message kept")
	assert.Equal(t, []memory.Message{msgs[0], msgs[7]}, tail(msgs, 2))
	assert.Equal(t, msgs, tail(msgs, 5), "fewer user messages: all")

	cs := New(0) // about four bytes a token
	assert.Equal(t, 2, cs.cutFor(msgs, 0), "the last user turn at least")
	assert.Equal(t, 1, cs.cutFor(msgs, 30), "the tool call stays with its result")
	assert.Equal(t, 0, cs.cutFor(msgs, 1000), "everything fits")
}

// wordTokens counts words as tokens, and how often it was asked.
type wordTokens struct{ calls int }

func (w *wordTokens) CountAtMost(s string, limit int) int {
	w.calls++
	limit = max(limit, 0)
	if n := len(strings.Fields(s)); n <= limit {
		return n
	}
	return limit + 1
}

func (w *wordTokens) Head(s string, n int) string { return s }

// Long texts' counts are kept: the same text asked again, at any limit,
// counts as CountAtMost would, without counting again when what is kept
// tells.
func TestCountsAreKept(t *testing.T) {
	tok := &wordTokens{}
	cs := &Set{Tokens: tok}
	long := strings.Repeat("word ", 400) // 2000 bytes, 400 words
	for _, limit := range []int{1000, 500, 400, 399, 100, 0, -5, 5000} {
		want := (&wordTokens{}).CountAtMost(long, limit)
		assert.Equal(t, want, cs.count(long, limit), "limit %d", limit)
	}
	assert.Equal(t, 1, tok.calls, "counted once: the first count was exact")

	tok, cs = &wordTokens{}, &Set{Tokens: &wordTokens{}}
	cs.Tokens = tok
	assert.Equal(t, 101, cs.count(long, 100))
	assert.Equal(t, 51, cs.count(long, 50), "more than 100 is more than 50")
	assert.Equal(t, 1, tok.calls)
	assert.Equal(t, 400, cs.count(long, 400), "past what was counted: counted again")
	assert.Equal(t, 2, tok.calls)
	short := "a few words"
	cs.count(short, 10)
	cs.count(short, 10)
	assert.Equal(t, 4, tok.calls, "short texts are not kept")
}

// Whether a prompt passes a limit is decided on the builder's figures
// for what it made (SystemTokens, RecentTokens), without counting the
// memories again; only the caller's own messages are counted.
func TestOverTakesTheBuildersFigures(t *testing.T) {
	tok := &wordTokens{}
	cs := &Set{Tokens: tok}
	long := strings.Repeat("memory ", 1000) // 7000 bytes, 1000 words
	msgs := []memory.Message{{Role: "user", Content: "a short question"}}
	mc := &memory.Context{System: long, SystemTokens: 1000,
		Recent: []memory.Message{{Role: "user", Content: long}, {Role: "assistant", Content: "ok"}}, RecentTokens: 1010}
	assert.False(t, cs.over(mc, msgs, 2100))
	assert.Zero(t, tok.calls, "the figures and the message's bytes fit: nothing counted")
	msgs[0].Content = strings.Repeat("x", 500) // 500 bytes, a word
	assert.False(t, cs.over(mc, msgs, 2100))
	assert.Equal(t, 1, tok.calls, "only the caller's message was counted")
	assert.True(t, cs.over(mc, msgs, 2000), "the figures alone pass the limit")
	assert.Equal(t, 1, tok.calls, "nothing counted")

	// Without figures (a context made by hand), every part is counted.
	tok.calls = 0
	mc = &memory.Context{System: long, Recent: mc.Recent}
	assert.False(t, cs.over(mc, msgs, 2100))
	assert.True(t, cs.over(mc, msgs, 2005))
	assert.Positive(t, tok.calls)
}
