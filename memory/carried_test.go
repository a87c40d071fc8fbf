package memory

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// A memory that says what one of the client's own facts says is carried;
// one that tells more, or something else, is not.
func TestCarriedFacts(t *testing.T) {
	h := history(nil).withCarried([]string{"Lives in Vienna", "Likes spicy food, lives in Berlin", "User prefers green tea."})
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
	assert.False(t, history(nil).carries("Lives in Vienna"), "no facts: nothing is carried")
}
