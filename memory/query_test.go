package memory

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// A question that names what it asks about is its own query; a short
// follow-up goes with the turns before it.
func TestSemanticQueryStandsAlone(t *testing.T) {
	prev := []Message{
		{Role: "user", Content: "Tell me about the printing press in Mainz, its workshops and inks."},
		{Role: "assistant", Content: "Gutenberg's workshop used oil-based inks."},
	}
	q, lex := semanticQuery(append(prev, Message{Role: "user", Content: "What is my locker code?"}))
	assert.Equal(t, "What is my locker code?", q)
	assert.Equal(t, q, lex)
	q, lex = semanticQuery(append(prev, Message{Role: "user", Content: "and what about her sister?"}))
	assert.Contains(t, q, "printing press", "a follow-up needs what came before")
	assert.Contains(t, q, "her sister")
	assert.Equal(t, 2, strings.Count(lex, "her sister"), "its own words weigh double")
}
