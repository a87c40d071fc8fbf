package memory_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/memory"
	"github.com/vera-proxy/vera/memory/embedded"
	"github.com/vera-proxy/vera/prompts"
	"github.com/vera-proxy/vera/text"
)

var sharedTok = sync.OnceValues(text.NewTokenizer)

// linearBound is how long a step on 64 KiB may take before
// it is taken for a hang: a linear step takes milliseconds, even under
// the race detector; a quadratic one takes minutes.
const linearBound = 20 * time.Second

// within fails t when f does not return within linearBound.
func within(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(linearBound):
		t.Fatalf("%s: no answer within %s on 64 KiB: not linear", what, linearBound)
	}
}

// grown repeats s to 64 KiB.
func grown(s string) string {
	if s == "" {
		s = "a"
	}
	return strings.Repeat(s, (64<<10)/len(s)+1)
}

// The command parser, the terms and the cap answer on any input, and in
// time linear in it: the input grown to 64 KiB, behind a
// command phrase, costs what 64 KiB of words does.
func FuzzCommandParse(f *testing.F) {
	for _, s := range []string{"Remember that my bike is blue.", "forget that my code is 4417", "a", "ab", "日本語", "x y", "\u00a0", "Запомни, что", "..."} {
		f.Add(s)
	}
	tok, err := sharedTok()
	require.NoError(f, err)
	c := &memory.Commands{Phrases: func() string { return prompts.Default(prompts.MemoryCommands) }}
	f.Fuzz(func(t *testing.T, s string) {
		kind, statement := c.Parse(s)
		if kind == memory.NoCommand {
			assert.Empty(t, statement)
		} else {
			assert.Contains(t, s, statement)
		}
		big := "Remember that " + grown(s)
		within(t, "Parse", func() { c.Parse(big) })
		within(t, "Terms", func() { text.Terms(big) })
		within(t, "CapText", func() {
			text, n, _ := memory.CapText(tok, big, 512)
			assert.LessOrEqual(t, n, 512+8, "capped")
			if utf8.ValidString(big) {
				assert.True(t, utf8.ValidString(text))
			}
		})
		within(t, "Count", func() { tok.Count(big) })
	})
}

// "Remember that" and a megabyte with no space in it: the statement is
// kept within the cap as its head and tail, in time a megabyte of words
// takes. Before, counting it whole took minutes.
func TestRememberCapsTheStatement(t *testing.T) {
	ctx := context.Background()
	db, err := embedded.Open(ctx, t.TempDir())
	require.NoError(t, err)
	defer db.Close()
	tok, err := sharedTok()
	require.NoError(t, err)
	c := &memory.Commands{Store: db, Tokens: tok, MaxTokens: 256,
		Phrases: func() string { return prompts.Default(prompts.MemoryCommands) }}
	kind, statement := c.Parse("Remember that my notes are " + strings.Repeat("abcdefghijklmnopqrstuvwxyz", 1<<20/26))
	require.Equal(t, memory.Remember, kind)
	var id string
	within(t, "Remember", func() { id, err = c.Remember(ctx, "ns", statement, memory.Source{Via: memory.ViaCommand}) })
	require.NoError(t, err)
	m, err := db.Get(ctx, id)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(m.Text, "My notes are abcdef"), "the head is kept")
	assert.Contains(t, m.Text, "[…]")
	assert.LessOrEqual(t, m.Tokens, 256)
	assert.Equal(t, tok.Count(m.Text), m.Tokens)

	// Forgetting with a megabyte of distinct words names no fact.
	var b strings.Builder
	b.WriteString("Forget that ")
	for i := 0; b.Len() < 1<<20; i++ {
		b.WriteString(strings.Repeat(string(rune('a'+i%26)), 1+i%9))
		b.WriteString(string(rune('a' + i/26%26)))
		b.WriteString(" ")
	}
	kind, statement = c.Parse(b.String())
	require.Equal(t, memory.Forget, kind)
	within(t, "Forget", func() { _, err = c.Forget(ctx, "ns", statement) })
	assert.ErrorIs(t, err, memory.ErrTooBroad)
}

// Not UTF-8 at all, in long runs: every count returns.
func TestCountsOfLongInvalidRuns(t *testing.T) {
	tok, err := sharedTok()
	require.NoError(t, err)
	for _, bad := range []string{strings.Repeat("\x80", 5000), strings.Repeat("\xe6\x97", 4000), "a" + strings.Repeat("\xbf", 9000) + "b"} {
		within(t, "Count", func() { tok.Count(bad) })
		within(t, "CountAtMost", func() { tok.CountAtMost(bad, 10000) })
		within(t, "CapText", func() { memory.CapText(tok, bad, 64) })
	}
}
