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

// A later block leaves out a memory that mostly repeats an exchange the
// request forwards, and keeps one that says something new.
func TestRepeatsOfForwardedExchanges(t *testing.T) {
	h := history(nil, nil).withExchanges([]Message{
		{Role: "user", Content: "Turn 56: tell me about the printing press in city number 56, its workshops and inks."},
		{Role: "assistant", Content: "Hello from Ollama"},
		{Role: "user", Content: "What is my locker code at the gym?"},
	})
	assert.True(t, h.repeats("User: Turn 9: tell me about the printing press in city number 9, its workshops and inks.\nAssistant: Hello from Ollama"))
	assert.False(t, h.repeats("User: My locker code at the gym is 4417, please keep it in mind.\nAssistant: Hello from Ollama"),
		"the question's words alone do not make the answer to it a repeat")
	assert.False(t, history(nil, nil).repeats("User: anything\nAssistant: at all"), "nothing forwarded: nothing repeated")
}

// A memory is needed when it holds a word the question asks about that
// the prompt lacks; a long message's many missing words find only more of
// the same.
func TestNeededByTheQuestion(t *testing.T) {
	fwd := []Message{
		{Role: "user", Content: "I spent the morning walking along the river with my sister."},
		{Role: "assistant", Content: "That sounds lovely."},
		{Role: "user", Content: "What is my locker code?"},
	}
	h := history(nil, nil).withExchanges(fwd)
	assert.True(t, h.needs("User: My locker code is 4417.\nAssistant: Noted.", nil))
	assert.False(t, h.needs("User: My sister walks by the river.\nAssistant: Nice.", nil), "nothing the question asks about")
	assert.False(t, h.needs("User: My locker code is 4417.\nAssistant: Noted.", []string{"Memories: the locker code is 4417"}), "the prompt holds it already")
	long := history(nil, nil).withExchanges(append(fwd[:2], Message{Role: "user", Content: "Tomorrow I plan to fix the bicycle, clean the kitchen and call my parents about their trip."}))
	assert.False(t, long.needs("User: I fixed the bicycle and cleaned the kitchen.\nAssistant: Good.", nil), "a long message's words")
}
