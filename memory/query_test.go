package memory

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// A question that names what it asks about is embedded alone; a short
// follow-up with the turns before it. The lexical query always has them.
func TestSemanticQueryStandsAlone(t *testing.T) {
	prev := []Message{
		{Role: "user", Content: "Tell me about the printing press in Mainz, its workshops and inks."},
		{Role: "assistant", Content: "Gutenberg's workshop used oil-based inks."},
	}
	q, lex := semanticQuery(append(prev, Message{Role: "user", Content: "What is my locker code at the gym?"}))
	assert.Equal(t, "What is my locker code at the gym?", q)
	assert.Contains(t, lex, "printing press")
	q, _ = semanticQuery(append(prev, Message{Role: "user", Content: "and what about her sister?"}))
	assert.Contains(t, q, "printing press", "a follow-up needs what came before")
	assert.Contains(t, q, "her sister")
}

// A later block leaves out a memory that mostly repeats an exchange the
// request forwards, and keeps one that says something new.
func TestRepeatsOfForwardedExchanges(t *testing.T) {
	h := history(nil).withExchanges([]Message{
		{Role: "user", Content: "Turn 56: tell me about the printing press in city number 56, its workshops and inks."},
		{Role: "assistant", Content: "Hello from Ollama"},
		{Role: "user", Content: "What is my locker code at the gym?"},
	})
	assert.True(t, h.repeats("User: Turn 9: tell me about the printing press in city number 9, its workshops and inks.\nAssistant: Hello from Ollama"))
	assert.False(t, h.repeats("User: My locker code at the gym is 4417, please keep it in mind.\nAssistant: Hello from Ollama"),
		"the question's words alone do not make the answer to it a repeat")
	assert.False(t, history(nil).repeats("User: anything\nAssistant: at all"), "nothing forwarded: nothing repeated")
}
