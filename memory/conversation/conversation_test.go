package conversation

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/memory"
)

func TestConversationsForgetTheLeastRecentlyUsed(t *testing.T) {
	cs := New(2)
	a := cs.start("alice", "a", false)
	cs.alias(a, "a2")
	b := cs.start("alice", "b", false)
	require.Same(t, a, cs.get("a")) // a is now the most recent
	c := cs.start("alice", "c", false)
	assert.Nil(t, cs.get("b"), "b was the least recently used")
	assert.Same(t, a, cs.get("a2"), "a is known by both its keys")
	assert.Same(t, c, cs.get("c"))
	_ = b
	cs.start("alice", "d", false)
	assert.Nil(t, cs.get("a"))
	assert.Nil(t, cs.get("a2"), "an evicted conversation's every key goes with it")
	assert.Equal(t, 2, cs.held)
	assert.Len(t, cs.keys, 2)
}

func TestConversationsStayBounded(t *testing.T) {
	cs := New(100)
	for i := range 10000 {
		cv := cs.start("alice", fmt.Sprint("first", i), false)
		cs.alias(cv, fmt.Sprint("answer", i))
		cs.alias(cv, fmt.Sprint("response", i))
	}
	assert.Equal(t, 100, cs.held)
	assert.Len(t, cs.keys, 300)
}

// A first turn asked again starts a new conversation, which keeps the
// turns recorded under its key: a regenerate of a first turn replaces it.
func TestStartKeepsTheTurnsRecordedUnderTheKey(t *testing.T) {
	cs := New(0)
	now := time.Now()
	old := cs.start("alice", "k", false)
	old.replace("p0", "turn-1", now, false)
	cv := cs.start("alice", "k", false)
	require.NotSame(t, old, cv)
	assert.Equal(t, "turn-1", cv.replace("p0", "turn-2", now.Add(time.Minute), false))
}

// Without a chat id, a turn is taken for a regenerate or an edit only
// within 10 minutes of the one it would replace; with an id, at any time.
func TestReplaceWindow(t *testing.T) {
	now := time.Now()
	cv := &conversation{}
	assert.Empty(t, cv.replace("p", "t1", now, false), "nothing recorded there yet")
	assert.Equal(t, "t1", cv.replace("p", "t2", now.Add(9*time.Minute), false))
	assert.Empty(t, cv.replace("p", "t3", now.Add(20*time.Minute), false), "11 minutes later: a new question")
	assert.Empty(t, cv.replace("q", "t4", now, false), "another point")
	assert.Equal(t, "t3", cv.replace("p", "t5", now.Add(48*time.Hour), true), "a chat id: any time")
	for i := range 200 {
		cv.replace(fmt.Sprint("point", i), "x", now, true)
	}
	assert.Len(t, cv.turns, maxTurnsKept)
}

func TestPlaceOf(t *testing.T) {
	msgs := func(ms ...string) []memory.Message {
		var out []memory.Message
		for i := 0; i+1 < len(ms); i += 2 {
			out = append(out, memory.Message{Role: ms[i], Content: ms[i+1]})
		}
		return out
	}
	first := placeOf("alice", Thread{FirstUser: "hi"}, msgs("user", "hi"))
	assert.True(t, first.First)
	require.NotNil(t, first.AnswerKey)
	second := placeOf("alice", Thread{FirstUser: "hi"}, msgs("user", "hi", "assistant", "Hello!", "user", "how are you?"))
	assert.False(t, second.First)
	assert.Equal(t, first.AnswerKey("Hello!"), second.Key, "known by its first message and the answer vera gave")
	assert.Equal(t, second.Key, first.AnswerKey("  Hello!\n"), "whitespace a client trims does not matter")
	other := placeOf("alice", Thread{FirstUser: "hi"}, msgs("user", "hi", "assistant", "Hi there.", "user", "how are you?"))
	assert.NotEqual(t, second.Key, other.Key, "two chats that begin alike are told apart by their answers")
	bob := placeOf("bob", Thread{FirstUser: "hi"}, msgs("user", "hi", "assistant", "Hello!", "user", "how are you?"))
	assert.NotEqual(t, second.Key, bob.Key, "never across namespaces")
	assert.Equal(t, 1, second.User)

	regen := placeOf("alice", Thread{FirstUser: "hi"}, msgs("user", "hi", "assistant", "Hello!", "user", "how are you?"))
	edit := placeOf("alice", Thread{FirstUser: "hi"}, msgs("user", "hi", "assistant", "Hello!", "user", "how old are you?"))
	assert.Equal(t, second.Point, regen.Point)
	assert.Equal(t, second.Point, edit.Point, "an edit stands at the same point")
	assert.NotEqual(t, second.UserDigest, edit.UserDigest)

	loop := placeOf("alice", Thread{FirstUser: "hi", ToolLoop: true}, append(msgs("user", "hi", "assistant", "Hello!", "user", "weather?"),
		memory.Message{Role: "assistant"}, memory.Message{Role: "tool", Content: "21C"}))
	start := placeOf("alice", Thread{FirstUser: "hi"}, msgs("user", "hi", "assistant", "Hello!", "user", "weather?"))
	assert.Equal(t, start.Point, loop.Point, "a tool loop's steps stand where its question does")
	// A user message without text (an image) is a turn of its own.
	image := placeOf("alice", Thread{FirstUser: "hi"}, append(msgs("user", "hi", "assistant", "Hello!", "user", "weather?", "assistant", "Sunny."),
		memory.Message{Role: "user"}))
	assert.Equal(t, 2, image.User)
	assert.NotEqual(t, start.Point, image.Point)

	chat := placeOf("alice", Thread{ChatID: "c1", FirstUser: "hi"}, msgs("user", "hi"))
	assert.True(t, chat.Strong)
	assert.NotEqual(t, chat.Key, placeOf("bob", Thread{ChatID: "c1", FirstUser: "hi"}, msgs("user", "hi")).Key)
	resp := placeOf("alice", Thread{PreviousResponseID: "resp_1"}, msgs("user", "and then?"))
	assert.True(t, resp.Strong)
	assert.False(t, resp.First, "a request chained to an answer is a later turn")
	assert.Equal(t, responseKey("alice", "resp_1"), resp.Key)
}

func TestConversationKeysAndBytesStayBounded(t *testing.T) {
	cs := New(0)
	cv := cs.start("alice", "first", false)
	for i := range 1000 {
		cs.alias(cv, fmt.Sprint("response", i))
	}
	assert.Len(t, cv.keys, maxKeys, "a long Responses session keeps its latest keys only")
	assert.Len(t, cs.keys, maxKeys)
	assert.Same(t, cv, cs.get("first"), "the first key stays")
	assert.Same(t, cv, cs.get("response999"))

	cs = New(0)
	cs.maxBytes = 1 << 20
	big := strings.Repeat("a long system prompt ", 5000) // ~100 KB
	for i := range 50 {
		c := cs.start("alice", fmt.Sprint("chat", i), true)
		cs.update(c, func() { c.Plan = &memory.Context{System: big} })
	}
	assert.LessOrEqual(t, cs.bytes, cs.maxBytes)
	assert.Less(t, cs.held, 50, "the oldest went to stay within the bytes")
	assert.NotNil(t, cs.get("chat49"))
}

// A first message asked again after its conversation went on is a new
// chat: it does not take over the old one's turns (without an id).
func TestStartAfterTheChatWentOn(t *testing.T) {
	cs := New(0)
	now := time.Now()
	old := cs.start("alice", "k", false)
	old.replace("p0", "turn-1", now, false)
	old.Advanced = true
	assert.Empty(t, cs.start("alice", "k", false).replace("p0", "turn-2", now, false))
	old = cs.start("alice", "chat", true)
	old.replace("p0", "turn-1", now, true)
	old.Advanced = true
	assert.Equal(t, "turn-1", cs.start("alice", "chat", true).replace("p0", "turn-2", now, true), "with a chat id it is the same chat")
}

// A conversation that told a turn, even one older than the turns it can
// regenerate, is forgotten whole when that turn is erased: its summary
// may quote it. Another conversation, which only recalled other
// memories, stays.
func TestWithdrawingATurnForgetsTheConversationThatToldIt(t *testing.T) {
	cs := New(0)
	now := time.Now()
	cv := cs.start("alice", "long", true)
	for i := range maxTurnsKept + 10 {
		cv.replace(fmt.Sprint("point", i), fmt.Sprint("turn-", i), now, true)
	}
	require.Len(t, cv.turns, maxTurnsKept)
	other := cs.start("alice", "other", true)
	other.replace("p", "turn-x", now, true)
	cs.Withdraw("", "turn-3")
	assert.True(t, cs.filed(cv), "an edit, a hide or a restore of the turn leaves the conversation")
	assert.Equal(t, 1, cs.Erase("", "turn-3"), "an older turn, past those it can regenerate")
	assert.False(t, cs.filed(cv), "forgotten: nothing of it is saved again")
	assert.True(t, cs.filed(other))
}
