package memory

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

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

// A memory that says what one of the client's own facts says is carried;
// one that tells more, or something else, is not.
func TestCarriedFacts(t *testing.T) {
	h := history(nil, nil).withCarried([]string{"Lives in Vienna", "Likes spicy food, lives in Berlin", "User prefers green tea."})
	for text, want := range map[string]bool{
		"The user lives in Vienna.":  true, // the same fact, in vera's words
		"user prefers green TEA.":    true, // the same text
		"User lives in Berlin":       true, // a part of a fact
		"Lives in Vienna since 2019": false,
		"The user's dog is Rex.":     false,
		"User: I moved to Vienna last spring\nAssistant: Vienna is lovely in spring!": false,
		"": false,
	} {
		assert.Equal(t, want, h.carries(text), text)
	}
	assert.False(t, history(nil, nil).carries("Lives in Vienna"), "no facts: nothing is carried")
}

// A request that claims very many facts has only the first compared.
func TestCarriedFactsAreBounded(t *testing.T) {
	facts := make([]string, 10000)
	for i := range facts {
		facts[i] = "Lives in Vienna"
	}
	facts = append(facts, "Owns a boat called Zephyr")
	h := history(nil, nil).withCarried(facts)
	assert.Len(t, h.carried, maxCarried)
	assert.True(t, h.carries("The user lives in Vienna."))
	assert.False(t, h.carries("The user owns a boat called Zephyr."), "past the bound")
}

// normalize is strings.ToLower(strings.Join(strings.Fields(s), " ")), in
// one pass: on white space of every kind, capitals of every script,
// invalid UTF-8.
func FuzzNormalize(f *testing.F) {
	for _, s := range []string{"", " ", "Hello  World", "\tA\nB\r\n", "ÀÉÎ  Ωmega\u00a0x\u0085y\u2003z", "bad \xff\xfe bytes", "İstanbul", "  lead and trail  ", "\u1680\u3000"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want := strings.ToLower(strings.Join(strings.Fields(s), " "))
		if got := normalize(s); got != want {
			t.Fatalf("normalize(%q) = %q, want %q", s, got, want)
		}
	})
}
