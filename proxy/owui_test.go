package proxy

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/vera-proxy/vera/memory"
)

// owuiAppend is Open WebUI's add_or_update_system_message(block,
// messages, append=True) on a system message's text ("" : none).
func owuiAppend(system, block string) string {
	if system == "" {
		return block
	}
	return system + "\n" + block
}

// owuiContext is chat_memory_handler's block: f"User Context:\n{ctx}\n",
// ctx one f"{i}. [{date}] {doc}\n" per memory.
func owuiContext(lines ...string) string {
	s := ""
	for _, l := range lines {
		s += l + "\n"
	}
	return "User Context:\n" + s + "\n"
}

func TestFindOpenWebUIMemoryBlock(t *testing.T) {
	block := owuiContext("1. [2025-03-14] Lives in Vienna", "2. [Unknown Date] Has a dog named Rex")
	for _, tc := range []struct {
		name, text, rest string
		facts            []string
		found            bool
	}{
		{"appended to the user's system prompt", owuiAppend("You are kind.", block), "You are kind.",
			[]string{"Lives in Vienna", "Has a dog named Rex"}, true},
		{"a system message of its own", owuiAppend("", block), "", []string{"Lives in Vienna", "Has a dog named Rex"}, true},
		{"no memory found: the heading alone", owuiAppend("You are kind.", owuiContext()), "You are kind.", nil, true},
		{"RAG context appended after it", owuiAppend(owuiAppend("You are kind.", block), "### Task:\nRespond using <context>doc</context>"),
			"You are kind.\n### Task:\nRespond using <context>doc</context>", []string{"Lives in Vienna", "Has a dog named Rex"}, true},
		{"a memory of several lines", owuiAppend("S.", owuiContext("1. [2025-03-14] Groceries:\nmilk, eggs", "2. [2025-03-15] Likes tea")), "S.",
			[]string{"Groceries:\nmilk, eggs", "Likes tea"}, true},
		{"a memory of two paragraphs", owuiAppend("S.", owuiContext("1. [2025-03-14] Kids:\n\nAna and Bo", "2. [2025-03-15] Owns a boat")), "S.",
			[]string{"Kids:\n\nAna and Bo", "Owns a boat"}, true},
		{"a blank line before a list that is not numbered on", owuiAppend("S.", owuiContext("1. [2025-03-14] Likes tea")) + "\n1. [2025-01-01] my own list", "S.\n1. [2025-01-01] my own list",
			[]string{"Likes tea"}, true},
		{"one block for each text part", owuiAppend("Part one.", owuiContext("1. [2025-03-14] Likes tea")) + "\n" + owuiAppend("Part two.", owuiContext("1. [2025-03-14] Likes tea")),
			"Part one.\nPart two.", []string{"Likes tea", "Likes tea"}, true},
		{"dates with a time, and bullets", owuiAppend("S.", owuiContext("- [2026-01-02 10:22] Works at night", "* [2026-01-03T08:00] Runs")), "S.",
			[]string{"Works at night", "Runs"}, true},
		{"the words inside a sentence", "Read the User Context: below.\n1. [2025-03-14] x\n", "Read the User Context: below.\n1. [2025-03-14] x\n", nil, false},
		{"a heading the user wrote, without facts", "User Context:\nI am a nurse.\n\nBe brief.", "User Context:\nI am a nurse.\n\nBe brief.", nil, false},
		{"no block", "You are kind.", "You are kind.", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msgs := []memory.Message{{Role: "system", Content: tc.text}, {Role: "user", Content: "hi"}}
			b, rest := findOWUI(msgs)
			assert.Equal(t, tc.found, b != nil)
			assert.Equal(t, tc.rest, rest[0].Content)
			assert.Equal(t, "hi", rest[1].Content)
			assert.Equal(t, tc.text, msgs[0].Content, "the request's own messages are left as they are")
			if b != nil {
				assert.Equal(t, tc.facts, b.facts)
			}
		})
	}
}

// Only system messages carry it: a user who pastes one is not Open WebUI.
func TestOpenWebUIMemoryBlockOnlyInSystemMessages(t *testing.T) {
	block := owuiContext("1. [2025-03-14] Lives in Vienna")
	b, _ := findOWUI([]memory.Message{{Role: "user", Content: block}})
	assert.Nil(t, b)
	b, _ = findOWUI([]memory.Message{{Role: "system", Content: "A."}, {Role: "user", Content: "q"}, {Role: "system", Content: block}})
	assert.Nil(t, b, "a system message after the conversation began is not Open WebUI's")
}

func FuzzFindOpenWebUIMemoryBlock(f *testing.F) {
	f.Add(owuiAppend("You are kind.", owuiContext("1. [2025-03-14] Lives in Vienna", "2. [Unknown Date] x")))
	f.Add("User Context:\n\n")
	f.Add("User Context:\n1. [2025-03-1")
	f.Fuzz(func(t *testing.T, text string) {
		b, rest := findOWUI([]memory.Message{{Role: "system", Content: text}})
		if b == nil {
			assert.Equal(t, text, rest[0].Content)
			return
		}
		assert.LessOrEqual(t, len(rest[0].Content), len(text))
		again, twice := findOWUI(rest)
		if again == nil {
			assert.Equal(t, rest[0].Content, twice[0].Content, "nothing left to cut")
		}
	})
}
