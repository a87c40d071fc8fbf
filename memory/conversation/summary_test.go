package conversation

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/memory"
)

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
			sum := summarizeFunc(func(ctx context.Context, req string) (string, error) {
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
			})
			log := func(name string) *slog.Logger {
				return slog.New(summaryLog{done: func(int) { written <- name }})
			}
			for i := range tc.hung {
				name := fmt.Sprint("m", i)
				cs.Compact(log(name), dueSummary(cs, "mallory", name), sum)
			}
			bob := dueSummary(cs, "bob", "b")
			cs.Compact(log("b"), bob, sum)
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
			cs.Compact(slog.New(summaryLog{
				failed: func(err error) { failed <- err },
				done:   func(int) { t.Error("a hung summary was taken") },
			}), tn, summarizeFunc(func(ctx context.Context, _ string) (string, error) {
				if ignoresCtx {
					<-release
					return "too late", nil
				}
				<-ctx.Done()
				return "", ctx.Err()
			}))
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
			cs.Compact(slog.New(summaryLog{done: func(int) { close(written) }}), tn,
				summarizeFunc(func(context.Context, string) (string, error) { return "a summary", nil }))
			select {
			case <-written:
			case <-time.After(10 * time.Second):
				t.Fatal("the slot was never given back")
			}
			assert.True(t, cs.takeReady(tn.conv))
		})
	}
}

// summarizeFunc is a Summarizer of a function.
type summarizeFunc func(ctx context.Context, prompt string) (string, error)

func (f summarizeFunc) Summarize(ctx context.Context, prompt string) (string, error) {
	return f(ctx, prompt)
}

// summaryLog is a log handler that tells how each summary went, from
// Compact's log lines: done hears the turns of one written, failed the
// error of one that failed.
type summaryLog struct {
	done   func(turns int)
	failed func(err error)
}

func (h summaryLog) Enabled(context.Context, slog.Level) bool { return true }

func (h summaryLog) Handle(_ context.Context, r slog.Record) error {
	r.Attrs(func(a slog.Attr) bool {
		switch {
		case r.Message == "a long conversation was summarised" && a.Key == "turns" && h.done != nil:
			h.done(int(a.Value.Int64()))
		case strings.HasPrefix(r.Message, "a long conversation's summary failed") && a.Key == "error" && h.failed != nil:
			err, _ := a.Value.Any().(error)
			h.failed(err)
		}
		return true
	})
	return nil
}

func (h summaryLog) WithAttrs([]slog.Attr) slog.Handler { return h }

func (h summaryLog) WithGroup(string) slog.Handler { return h }

// Turns too many for one summary request are summarised in pieces, one
// after the other, each request carrying the summary before it and
// fitting the window: none is left out.
func TestSummaryInPieces(t *testing.T) {
	cs := New(0)
	var msgs []memory.Message
	for i := range 12 {
		msgs = append(msgs, memory.Message{Role: "user", Content: fmt.Sprintf("turn %d %s", i, strings.Repeat("word ", 60))},
			memory.Message{Role: "assistant", Content: "ok"})
	}
	const w = 600
	pieces := cs.summaryPieces(msgs, 1, 11, w)
	require.Greater(t, len(pieces), 1, "ten turns of about 80 tokens do not fit one request on a 600 window")
	var all []string
	for _, p := range pieces {
		all = append(all, p...)
	}
	joined := strings.Join(all, "\n")
	for i := 1; i < 11; i++ {
		assert.Contains(t, joined, fmt.Sprintf("turn %d ", i), "turn %d is in a piece", i)
	}
	assert.NotContains(t, joined, "turn 0 ")
	assert.NotContains(t, joined, "turn 11 ")

	var asked []string
	s := summarizeFunc(func(_ context.Context, prompt string) (string, error) {
		asked = append(asked, prompt)
		return fmt.Sprintf("summary %d", len(asked)), nil
	})
	text, err := cs.write(context.Background(), s, &summaryJob{upTo: 11, window: w, prev: "summary 0", pieces: pieces})
	require.NoError(t, err)
	assert.Equal(t, fmt.Sprintf("summary %d", len(pieces)), text)
	require.Len(t, asked, len(pieces))
	for i, p := range asked {
		assert.Contains(t, p, fmt.Sprintf("Summary of what came before these messages:\nsummary %d", i), "each piece carries the summary before it")
		assert.LessOrEqual(t, cs.count(p, w), w-summaryAnswer(w), "and fits the window with room for its answer")
	}
}
