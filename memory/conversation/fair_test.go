package conversation

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

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

// dueSummary gives the conversation of ns's chat a summary to write, and
// returns its turn.
func dueSummary(cs *Set, ns, chat string) *Turn {
	t := chatTurn(cs, ns, Thread{ChatID: chat, FirstUser: "hi"}, false)
	cs.locked(func() {
		t.conv.Compaction.job = &summaryJob{upTo: 1, window: 2048, pieces: [][]string{{ns + "/" + chat}}}
	})
	return t
}

// Summaries that never come back, all of one namespace's conversations,
// hold at most one slot: another namespace's conversation still gets its
// summary at once.
func TestHungSummariesLeaveOtherNamespacesASlot(t *testing.T) {
	cases := []struct {
		name string
		hung int // mallory's conversations whose summaries hang
		// ignoresCtx: mallory's Summarize does not even return when
		// asked to stop.
		ignoresCtx bool
	}{
		{"two conversations", 2, false},
		{"five conversations", 5, false},
		{"a summarizer that ignores its context", 3, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cs := New(0)
			t.Cleanup(cs.Close)
			release := make(chan struct{})
			t.Cleanup(func() { close(release) }) // before Close
			asked := make(chan string, 16)
			written := make(chan string, 16)
			sum := func(name string) Summarizer {
				return Summarizer{
					Summarize: func(ctx context.Context, req string) (string, error) {
						// The piece's one line: ns/chat.
						_, prompt, _ := strings.Cut(req, "The conversation:\n")
						prompt, _, _ = strings.Cut(prompt, "\n")
						asked <- prompt
						if !strings.HasPrefix(prompt, "mallory/") {
							return "what " + prompt + " said", nil
						}
						if tc.ignoresCtx {
							<-release
						} else {
							<-ctx.Done()
						}
						return "", ctx.Err()
					},
					Done: func(int) { written <- name },
				}
			}
			for i := range tc.hung {
				name := fmt.Sprint("m", i)
				cs.Compact(dueSummary(cs, "mallory", name), sum(name))
			}
			bob := dueSummary(cs, "bob", "b")
			cs.Compact(bob, sum("b"))
			select {
			case name := <-written:
				assert.Equal(t, "b", name)
			case <-time.After(10 * time.Second):
				t.Fatal("bob's summary was never written: mallory's hung summaries hold every slot")
			}
			cs.locked(func() {
				require.NotNil(t, bob.conv.Compaction.ready)
				assert.Equal(t, "what bob/b said", bob.conv.Compaction.ready.text)
				assert.Equal(t, 1, cs.writingNS["mallory"], "mallory holds one slot")
			})
			var prompts []string
			for len(prompts) < 2 {
				select {
				case p := <-asked:
					prompts = append(prompts, p)
				case <-time.After(10 * time.Second):
					t.Fatalf("asked only for %q", prompts)
				}
			}
			assert.ElementsMatch(t, []string{"mallory/m0", "bob/b"}, prompts)
			assert.Empty(t, asked, "mallory's other summaries wait for their next turn")
		})
	}
}

// A summary not written within SummaryTimeout is abandoned: the failure
// is told, the conversation is as if it were not ready (no summary, none
// running), its slot is free again, and it is asked for again later.
func TestHungSummaryIsAbandonedAfterItsTimeout(t *testing.T) {
	for _, ignoresCtx := range []bool{false, true} {
		t.Run(fmt.Sprint("ignores its context: ", ignoresCtx), func(t *testing.T) {
			cs := New(0)
			cs.SummaryTimeout = 50 * time.Millisecond
			t.Cleanup(cs.Close)
			release := make(chan struct{})
			t.Cleanup(func() { close(release) }) // before Close
			failed := make(chan error, 1)
			tn := dueSummary(cs, "alice", "c1")
			cs.Compact(tn, Summarizer{
				Summarize: func(ctx context.Context, _ string) (string, error) {
					if ignoresCtx {
						<-release
						return "too late", nil
					}
					<-ctx.Done()
					return "", ctx.Err()
				},
				Failed: func(err error) { failed <- err },
				Done:   func(int) { t.Error("a hung summary was taken") },
			})
			select {
			case err := <-failed:
				require.ErrorIs(t, err, context.DeadlineExceeded)
				assert.Contains(t, err.Error(), "abandoned")
			case <-time.After(10 * time.Second):
				t.Fatal("the hung summary was never abandoned")
			}
			cs.work.Wait() // the slot is given back as summarize returns
			cs.locked(func() {
				c := tn.conv.Compaction
				assert.Nil(t, c.ready, "nothing to take into the plan")
				assert.Empty(t, c.Summary)
				assert.False(t, c.running)
				assert.Nil(t, c.job, "asked for again at the next turn")
				assert.Zero(t, cs.writing, "its slot is free")
			})
			assert.False(t, cs.takeReady(tn.conv), "the next turn goes on as if no summary were ready")

			// Its next turn asks again, and this time the model answers.
			written := make(chan struct{})
			cs.locked(func() { tn.conv.Compaction.job = &summaryJob{upTo: 1, window: 2048, pieces: [][]string{{"again"}}} })
			cs.Compact(tn, Summarizer{
				Summarize: func(context.Context, string) (string, error) { return "a summary", nil },
				Done:      func(int) { close(written) },
			})
			select {
			case <-written:
			case <-time.After(10 * time.Second):
				t.Fatal("the slot was never given back")
			}
			assert.True(t, cs.takeReady(tn.conv))
		})
	}
}
