package memory

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

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
