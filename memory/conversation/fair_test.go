package conversation

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/memory"
)

// chatTurn places a turn of ns's chat in its conversation, as a chat
// without memory layers would: its first turn (later false) starts the
// conversation, a later one continues it.
func chatTurn(cs *Set, ns string, th Thread, later bool) *Turn {
	msgs := []memory.Message{{Role: "user", Content: th.FirstUser}}
	if later {
		msgs = append(msgs, memory.Message{Role: "assistant", Content: "Hello there."}, memory.Message{Role: "user", Content: "and then?"})
	}
	return cs.Follow(Request{NS: ns, Thread: th, Msgs: msgs})
}

// A client that opens more chats than the set holds, in one namespace,
// pushes out its own oldest conversations, never another namespace's:
// whether its chats have ids, are told apart by their first message, or
// are few and huge.
func TestOneNamespaceCannotEvictAnother(t *testing.T) {
	big := strings.Repeat("a long question ", 4000) // 64 KB kept by each
	cases := []struct {
		name     string
		max      int
		maxBytes int
		flood    func(cs *Set, i int)
	}{
		{"chat ids", 16, maxConversationBytes, func(cs *Set, i int) {
			chatTurn(cs, "mallory", Thread{ChatID: fmt.Sprint("flood-", i), FirstUser: "hi"}, false)
		}},
		{"first messages", 16, maxConversationBytes, func(cs *Set, i int) {
			chatTurn(cs, "mallory", Thread{FirstUser: fmt.Sprint("question ", i)}, false)
		}},
		{"huge conversations", 2048, 1 << 20, func(cs *Set, i int) {
			cs.Follow(Request{NS: "mallory", Thread: Thread{ChatID: fmt.Sprint("huge-", i), FirstUser: "hi"},
				Msgs: []memory.Message{{Role: "user", Content: "hi"}}, User: big, KeepUser: true})
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cs := New(tc.max)
			cs.maxBytes = tc.maxBytes
			var bobs []*Turn
			for i := range 3 {
				bobs = append(bobs, chatTurn(cs, "bob", Thread{ChatID: fmt.Sprint("bob-", i), FirstUser: "hi"}, false))
			}
			for i := range 2100 {
				tc.flood(cs, i)
			}
			for i, first := range bobs {
				next := chatTurn(cs, "bob", Thread{ChatID: fmt.Sprint("bob-", i), FirstUser: "hi"}, true)
				assert.Same(t, first.conv, next.conv, "bob's chat %d is still its conversation", i)
			}
			assert.LessOrEqual(t, len(cs.keys), tc.max, "the set stays bounded")
			assert.LessOrEqual(t, cs.bytes, cs.maxBytes)
		})
	}
}

// Among namespaces that hold alike, the set is least recently used first
// out; a namespace that holds more gives up its own oldest first.
func TestFairSharesAmongNamespacesAlike(t *testing.T) {
	cs := New(3)
	a := chatTurn(cs, "a", Thread{ChatID: "1", FirstUser: "hi"}, false)
	b := chatTurn(cs, "b", Thread{ChatID: "1", FirstUser: "hi"}, false)
	c := chatTurn(cs, "c", Thread{ChatID: "1", FirstUser: "hi"}, false)
	require.Same(t, a.conv, chatTurn(cs, "a", Thread{ChatID: "1", FirstUser: "hi"}, true).conv) // a is used again
	chatTurn(cs, "d", Thread{ChatID: "1", FirstUser: "hi"}, false)
	assert.NotSame(t, b.conv, chatTurn(cs, "b", Thread{ChatID: "1", FirstUser: "hi"}, true).conv, "b was the least recently used")
	// The set now holds a, d and b's new one; c went for it.
	assert.NotSame(t, c.conv, chatTurn(cs, "c", Thread{ChatID: "1", FirstUser: "hi"}, true).conv)
	assert.Equal(t, 3, cs.held)
	assert.Len(t, cs.spaces, 3)
	assert.Len(t, cs.shares.all, 3)

	cs = New(4)
	d1 := chatTurn(cs, "d", Thread{ChatID: "1", FirstUser: "hi"}, false)
	for i := range 3 {
		chatTurn(cs, "e", Thread{ChatID: fmt.Sprint(i), FirstUser: "hi"}, false)
	}
	e3 := chatTurn(cs, "e", Thread{ChatID: "3", FirstUser: "hi"}, false)
	assert.Same(t, d1.conv, chatTurn(cs, "d", Thread{ChatID: "1", FirstUser: "hi"}, true).conv, "e held the most: e gave up its oldest")
	assert.Same(t, e3.conv, chatTurn(cs, "e", Thread{ChatID: "3", FirstUser: "hi"}, true).conv)
}
