package conversation

import (
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
