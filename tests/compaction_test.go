package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ollama/ollama/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/ollama/ollamatest"
	"github.com/vera-proxy/vera/tests/veratest"
	"github.com/vera-proxy/vera/text"
)

// longChat drives a conversation of turns user messages through the
// official Ollama client on a window of numCtx tokens, the way `ollama
// run` with /set parameter num_ctx does: the client keeps and sends its
// whole history. It returns what Ollama was sent at each turn.
type longChat struct {
	t       *testing.T
	c       *api.Client
	history []api.Message
	sent    []api.ChatRequest
	up      *ollamatest.Server
	numCtx  int
}

func newLongChat(t *testing.T, p *veratest.InProcess, up *ollamatest.Server, numCtx int) *longChat {
	return &longChat{t: t, c: veratest.OllamaClient(t, p, "alice"), up: up, numCtx: numCtx}
}

// say sends one user message (with more messages before it, when given,
// such as a tool call and its result) and keeps the answer.
func (lc *longChat) say(text string, before ...api.Message) string {
	lc.t.Helper()
	lc.history = append(lc.history, before...)
	lc.history = append(lc.history, api.Message{Role: "user", Content: text})
	var answer strings.Builder
	err := lc.c.Chat(context.Background(), &api.ChatRequest{Model: "llama3.2", Messages: lc.history,
		Options: map[string]any{"num_ctx": lc.numCtx}}, func(r api.ChatResponse) error {
		answer.WriteString(r.Message.Content)
		return nil
	})
	require.NoError(lc.t, err)
	lc.history = append(lc.history, api.Message{Role: "assistant", Content: answer.String()})
	lc.sent = append(lc.sent, lc.up.LastChat(lc.t))
	return answer.String()
}

// filler is a turn's user text of about 60 tokens.
func filler(i int) string {
	return fmt.Sprintf("Turn %d: tell me something about the history of the printing press in city number %d, "+
		"its workshops, the paper they used, the inks, the typefaces, and how many books they made each year.", i, i)
}

// tokensOf counts what a chat request forwards, as cl100k_base counts it.
func tokensOf(t *testing.T, tok *text.Tokenizer, r api.ChatRequest) int {
	t.Helper()
	n := 0
	for _, m := range r.Messages {
		n += tok.Count(m.Content) + 4
	}
	return n
}

const summaryMark = "Summary of the earlier part of this conversation"

// summarizer answers vera's summary requests (non-streamed chats): it
// keeps what the user said about their cat.
func summarizer(calls *atomic.Int64) func(api.ChatRequest) (string, int) {
	return func(req api.ChatRequest) (string, int) {
		calls.Add(1)
		prompt := req.Messages[len(req.Messages)-1].Content
		sum := "The user talked about printing presses."
		if strings.Contains(prompt, "Zanzibar") {
			sum += " The user's cat is called Zanzibar."
		}
		return sum, http.StatusOK
	}
}

// A 60-turn chat on a 2048-token window: from its compaction on, what
// Ollama gets fits the window, carries the summary the model wrote and
// the latest turns verbatim, and each later prompt starts with the one
// before plus its answer; a fact of turn 2 still reaches the model at
// turn 61; the client's history and the stored turns never hold the
// summary.
func TestLongConversationIsCompacted(t *testing.T) {
	up := ollamatest.New(t)
	up.Reply = func() string {
		return "Printing spread quickly there; workshops used rag paper, oil-based inks and gothic type, making a few hundred books a year."
	}
	var calls atomic.Int64
	up.Whole = summarizer(&calls)
	p := veratest.Start(t, "VERA_OLLAMA_URL="+up.URL)
	tok, err := text.NewTokenizer()
	require.NoError(t, err)

	lc := newLongChat(t, p, up, 2048)
	lc.say("Hello! I am Alice.")
	lc.say("My cat is called Zanzibar, remember that.")
	for i := 3; i <= 60; i++ {
		lc.say(filler(i))
		time.Sleep(300 * time.Millisecond) // a person types: the summary is written between turns
	}
	lc.say("What is my cat called?")

	first := -1
	for i, r := range lc.sent {
		if strings.Contains(veratest.SystemOf(r), summaryMark) {
			first = i
			break
		}
	}
	require.GreaterOrEqual(t, first, 0, "the conversation was compacted")
	assert.Positive(t, calls.Load())
	rebuilds := 0
	for i := first; i < len(lc.sent); i++ {
		r := lc.sent[i]
		assert.LessOrEqual(t, tokensOf(t, tok, r), 2048, "turn %d fits the window", i+1)
		assert.Contains(t, veratest.SystemOf(r), "The user talked about printing presses.", "the summary the model wrote")
		// The latest turns verbatim: the forwarded conversation ends with
		// the client's (a user message may open with a memory block).
		n := len(r.Messages)
		client := lc.history[:2*i+1]
		for k := 1; k <= 3; k++ {
			assert.True(t, strings.HasSuffix(r.Messages[n-k].Content, client[len(client)-k].Content), "turn %d: message -%d verbatim", i+1, k)
		}
		if i == first {
			continue
		}
		// The prompt before, its answer, then the new user message; or a
		// rebuild, when the conversation was compacted again.
		prev := lc.sent[i-1]
		if !startsWith(r.Messages, prev.Messages) {
			rebuilds++
			continue
		}
		assert.Equal(t, lc.history[2*i-1].Content, r.Messages[len(prev.Messages)].Content, "turn %d: then its answer", i+1)
	}
	assert.LessOrEqual(t, int64(rebuilds), calls.Load(), "at most one rebuild per summary written")
	assert.Less(t, rebuilds, 15, "most turns keep the prompt before as their start")
	assert.Contains(t, fmt.Sprint(lc.sent[len(lc.sent)-1].Messages), "Zanzibar", "turn 2's fact reaches turn 61")
	assert.Equal(t, 122, len(lc.history), "the client's history is its own")
	for i, m := range lc.history {
		assert.NotContains(t, m.Content, summaryMark, "message %d", i)
	}

	// The answer says how many turns the summary stands for.
	lc.history = append(lc.history, api.Message{Role: "user", Content: "Thanks!"})
	body, err := json.Marshal(api.ChatRequest{Model: "llama3.2", Messages: lc.history, Options: map[string]any{"num_ctx": 2048}})
	require.NoError(t, err)
	req, _ := http.NewRequest(http.MethodPost, "http://"+p.Addr+"/api/chat", bytes.NewReader(body))
	req.Header.Set("X-OpenWebUI-User-Id", "alice")
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	assert.Regexp(t, `; compacted=[1-9][0-9]*$`, res.Header.Get("X-Vera-Context"))

	veratest.Settled(t, p)
	var list struct{ Memories []veratest.AdminMemory }
	require.Equal(t, http.StatusOK, veratest.AdminCall(t, p, "", "GET", "/memories?namespace=alice&type=raw&limit=200", "", &list))
	assert.Len(t, list.Memories, 62, "every turn recorded")
	for _, m := range list.Memories {
		assert.NotContains(t, m.Text, summaryMark, "never the summary")
	}
}

// A summary that is slow or fails never delays nor fails a chat: none
// starts while a client sends turns back to back (the oldest turns are
// left out so that the prompt still fits), a slow one is stopped by the
// next turn, and either is asked for again later.
func TestCompactionNeverDelaysAChat(t *testing.T) {
	for _, mode := range []string{"slow", "failing"} {
		t.Run(mode, func(t *testing.T) {
			up := ollamatest.New(t)
			release := make(chan struct{})
			var calls atomic.Int64
			up.Whole = func(api.ChatRequest) (string, int) {
				calls.Add(1)
				if mode == "slow" {
					<-release
					return "late", http.StatusOK
				}
				return "model runner crashed", http.StatusInternalServerError
			}
			var once sync.Once
			t.Cleanup(func() { once.Do(func() { close(release) }) })
			p := veratest.Start(t, "VERA_OLLAMA_URL="+up.URL)
			tok, err := text.NewTokenizer()
			require.NoError(t, err)
			lc := newLongChat(t, p, up, 2048)
			for i := 1; i <= 40; i++ {
				lc.say(filler(i)) // back to back, as an agent: no summary starts
			}
			last := lc.sent[len(lc.sent)-1]
			assert.LessOrEqual(t, tokensOf(t, tok, last), 2048, "the oldest turns are left out")
			assert.NotContains(t, veratest.SystemOf(last), summaryMark)
			assert.Equal(t, filler(40), last.Messages[len(last.Messages)-1].Content)
			assert.LessOrEqual(t, calls.Load(), int64(3), "a summary waits for a pause in the conversation")
			// Paced as a person types: a summary starts after each answer;
			// a slow one is stopped by the next turn, a failed one dropped,
			// and either is asked for again after it (a slow one once the
			// conversation pauses longer: each one stopped cost the turn
			// that stopped it Ollama's prompt cache).
			for i := 41; i <= 43; i++ {
				lc.say(filler(i))
				time.Sleep(400 * time.Millisecond)
			}
			if mode == "slow" {
				time.Sleep(2500 * time.Millisecond)
			}
			assert.Greater(t, calls.Load(), int64(1), "asked again at later turns")
			last = lc.sent[len(lc.sent)-1]
			assert.LessOrEqual(t, tokensOf(t, tok, last), 2048)
			once.Do(func() { close(release) })
		})
	}
}

// A compaction never separates a tool call from its result: what is
// forwarded starts at a user message.
func TestCompactionKeepsToolCallsWithTheirResults(t *testing.T) {
	up := ollamatest.New(t)
	var calls atomic.Int64
	up.Whole = summarizer(&calls)
	p := veratest.Start(t, "VERA_OLLAMA_URL="+up.URL)
	lc := newLongChat(t, p, up, 2048)
	for i := 1; i <= 40; i++ {
		var before []api.Message
		if i%3 == 0 {
			before = []api.Message{
				{Role: "assistant", ToolCalls: []api.ToolCall{{Function: api.ToolCallFunction{Name: "weather", Arguments: api.ToolCallFunctionArguments{}}}}},
				{Role: "tool", Content: fmt.Sprintf("sunny, %d degrees", i)},
			}
		}
		lc.say(filler(i), before...)
		time.Sleep(300 * time.Millisecond) // as a person types
	}
	compacted := 0
	for i, r := range lc.sent {
		var own []api.Message
		for _, m := range r.Messages {
			if m.Role != "system" {
				own = append(own, m)
			}
		}
		require.NotEmpty(t, own)
		assert.Equal(t, "user", own[0].Role, "turn %d starts at a user message", i+1)
		for k, m := range own {
			if m.Role == "tool" {
				require.Positive(t, k)
				assert.NotEmpty(t, own[k-1].ToolCalls, "turn %d: a tool result follows its call", i+1)
			}
		}
		if strings.Contains(veratest.SystemOf(r), summaryMark) {
			compacted++
		}
	}
	assert.Positive(t, compacted)
}

// startsWith reports whether msgs starts with prefix, message for message.
func startsWith(msgs, prefix []api.Message) bool {
	if len(msgs) <= len(prefix) {
		return false
	}
	for k, m := range prefix {
		if m.Role != msgs[k].Role || m.Content != msgs[k].Content {
			return false
		}
	}
	return true
}

// A compaction stands only for the history it summarised: an edit of an
// earlier message (or another branch of the chat) undoes it, and the
// prompt still fits; a long system prompt alone does not have every turn
// summarised again.
func TestCompactionFollowsTheHistory(t *testing.T) {
	up := ollamatest.New(t)
	var calls atomic.Int64
	up.Whole = summarizer(&calls)
	p := veratest.Start(t, "VERA_OLLAMA_URL="+up.URL)
	tok, err := text.NewTokenizer()
	require.NoError(t, err)
	lc := newLongChat(t, p, up, 2048)
	for i := 1; i <= 24; i++ {
		lc.say(filler(i))
		time.Sleep(300 * time.Millisecond)
	}
	require.Contains(t, veratest.SystemOf(lc.sent[len(lc.sent)-1]), summaryMark, "compacted")

	// Edit the second message: the summary no longer stands.
	lc.history[2].Content = "Turn 2, edited: my cat is called Zanzibar."
	lc.history = lc.history[:len(lc.history)-2] // the last turn asked again
	lc.say(filler(24))
	last := lc.sent[len(lc.sent)-1]
	assert.NotContains(t, veratest.SystemOf(last), summaryMark, "a summary of turns that are not there")
	assert.LessOrEqual(t, tokensOf(t, tok, last), 2048)

	// A system prompt that alone passes compact_at: a summary only now
	// and then, not at every turn.
	up2 := ollamatest.New(t)
	var calls2 atomic.Int64
	up2.Whole = summarizer(&calls2)
	p2 := veratest.Start(t, "VERA_OLLAMA_URL="+up2.URL)
	lc2 := newLongChat(t, p2, up2, 2048)
	lc2.history = []api.Message{{Role: "system", Content: strings.Repeat("Follow the house style guide for every answer, rule by rule. ", 90)}}
	for i := 1; i <= 14; i++ {
		lc2.say(filler(i))
		time.Sleep(300 * time.Millisecond)
	}
	assert.LessOrEqual(t, calls2.Load(), int64(5), "summaries only as the turns grow")
	assert.LessOrEqual(t, tokensOf(t, tok, lc2.sent[len(lc2.sent)-1]), 2048)
}
