package tests

import (
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ollama/ollama/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/ollama/ollamatest"
	"github.com/vera-proxy/vera/tests/veratest"
)

// A model whose tokenizer counts 4, 2 or 0.7 times what cl100k counts,
// behind a fake Ollama that cuts what overflows its window as Ollama does:
// after the model's first answer, nothing vera forwards over a 60-turn
// chat on a 2048 window is cut, summaries included; what vera learnt is
// kept across a restart.
func TestNothingIsCutAfterTheFirstAnswer(t *testing.T) {
	for _, scale := range []float64{4, 2, 0.7} {
		t.Run(fmt.Sprint(scale, "x"), func(t *testing.T) {
			up := ollamatest.New(t)
			up.Scale = scale
			up.ContextLength = 4096 // trained: a num_ctx above it is clamped
			var summaries atomic.Int64
			up.Whole = func(req api.ChatRequest) (string, int) {
				summaries.Add(1)
				return "The user asked about printing presses.", http.StatusOK
			}
			data := t.TempDir()
			p := veratest.Start(t, "VERA_OLLAMA_URL="+up.URL, "VERA_DATA_DIR="+data)
			lc := newLongChat(t, p, up, 2048)
			lc.say("Hello! My locker code is 4417.")
			time.Sleep(100 * time.Millisecond) // the first answer is learnt from
			before := len(up.Cuts())
			for i := 2; i <= 60; i++ {
				lc.say(filler(i))
				time.Sleep(60 * time.Millisecond)
			}
			cuts := up.Cuts()[before:]
			assert.Empty(t, cuts, "nothing cut after the first answer (%d summaries)", summaries.Load())

			// A restart keeps what was learnt: the first chat after it is
			// sized in the model's tokens already.
			p.Stop(t)
			p = veratest.Start(t, "VERA_OLLAMA_URL="+up.URL, "VERA_DATA_DIR="+data)
			before = len(up.Cuts())
			lc = newLongChat(t, p, up, 2048)
			long := strings.Repeat(filler(1)+" ", 5)
			lc.say("Here are my notes: " + long)
			assert.Empty(t, up.Cuts()[before:], "sized in the model's tokens from the first chat after a restart")
		})
	}
}

// A chat that asks for more than the model was trained for is sized for
// what Ollama runs it with.
func TestWindowIsClampedToTheTrainedLength(t *testing.T) {
	up := ollamatest.New(t)
	up.Scale = 1
	up.ContextLength = 1024
	p := veratest.Start(t, "VERA_OLLAMA_URL="+up.URL)
	lc := newLongChat(t, p, up, 8192)
	for i := 1; i <= 30; i++ {
		lc.say(filler(i))
		time.Sleep(30 * time.Millisecond)
	}
	require.NotEmpty(t, lc.sent)
	assert.Empty(t, up.Cuts(), "num_ctx 8192 on a model trained for 1024 runs at 1024")
}

// A memory-rich namespace on a small window (1024: trained so, which
// clamps Ollama's default too), in every dialect: each turn finds
// memories relevant now, and a later block must never eat the room the
// chat grows in, or every other turn rebuilds the prompt. Turns 2-10 have
// at most one rebuild between them.
func TestLaterBlocksDoNotThrash(t *testing.T) {
	for _, d := range conversationDialects {
		t.Run(d.name, func(t *testing.T) {
			up := ollamatest.NewDialects(t)
			numberedReplies(up)
			up.Fake.Scale = 1
			up.Fake.ContextLength = 1024
			p := veratest.Start(t, "VERA_OLLAMA_URL="+up.URL)
			topics := []string{"gardening", "sailing", "chess", "baking", "cycling", "painting", "climbing", "knitting", "fishing", "astronomy", "pottery", "surfing"}
			for i, topic := range topics {
				for k := range 8 {
					text := fmt.Sprintf("My friend %s number %d loves %s and talks about %s every weekend with great detail and enthusiasm, %s.", topic, k, topic, topic, strings.Repeat("really ", 10))
					require.Equal(t, http.StatusCreated, veratest.AdminCall(t, p, "", "POST", "/memories", `{"namespace":"alice","text":`+jsonString(text)+`}`, nil), i)
				}
			}
			var h []msg
			var log []turnLog
			for k := range 10 {
				log = append(log, converse(t, d, p, up, "alice", "c1", &h, fmt.Sprintf("Tell me about %s and %s.", topics[k], topics[k+1]))...)
			}
			rebuilds := 0
			for k := 2; k < 10; k++ { // turns 2-10
				if !keeps(log[k-1], log[k]) {
					rebuilds++
					t.Logf("turn %d rebuilt", k+1)
				}
			}
			assert.LessOrEqual(t, rebuilds, 1, "turns 2-10 rebuild at most once")

			blocks := 0
			for _, l := range log {
				blocks = max(blocks, strings.Count(l.prompt, "<memories>"))
			}
			assert.Positive(t, blocks, "later turns added blocks")
			assert.Empty(t, up.Fake.Cuts(), "and nothing is cut")
		})
	}
}

// An agent's chat, sent back to back so that no summary is ever written,
// on a 2048 window: the fact told at turn 2 is cut from what vera
// forwards long before turn 61 asks for it, and recall brings it back,
// since the model no longer sees it. Nothing is cut by the server.
func TestCutFactIsRecalledWhenAsked(t *testing.T) {
	for _, scale := range []float64{2, 1} {
		t.Run(fmt.Sprint(scale, "x"), func(t *testing.T) {
			up := ollamatest.New(t)
			up.Scale = scale
			up.Whole = func(api.ChatRequest) (string, int) { return "", http.StatusInternalServerError }
			p := veratest.Start(t, "VERA_OLLAMA_URL="+up.URL)
			lc := newLongChat(t, p, up, 2048)
			lc.say("Hello! I am setting up my gym bag today.")
			time.Sleep(100 * time.Millisecond) // the first answer is learnt from
			lc.say("My locker code at the gym is 4417, please keep it in mind.")
			for i := 3; i <= 60; i++ {
				lc.say(filler(i))
			}
			veratest.Settled(t, p)
			first := lc.sent[len(lc.sent)-1].Messages
			require.False(t, holds(first, "4417"), "turn 60 no longer forwards turn 2")
			lc.say("What is my locker code at the gym?")
			last := lc.sent[len(lc.sent)-1]
			if !holds(last.Messages, "4417") {
				for _, m := range last.Messages {
					t.Logf("%s: %.300q", m.Role, m.Content)
				}
			}
			assert.True(t, holds(last.Messages, "4417"), "turn 61 gets the turn-2 fact back")
			assert.Empty(t, up.Cuts(), "nothing is cut")
		})
	}
}

// holds reports whether any message holds s.
func holds(msgs []api.Message, s string) bool {
	for _, m := range msgs {
		if strings.Contains(m.Content, s) {
			return true
		}
	}
	return false
}

// The same in every dialect: a model whose tokenizer counts twice what
// cl100k counts, trained on 2048 (Ollama's default window, 4096, is
// clamped to it; its OpenAI, Responses and Anthropic routes take no
// num_ctx). After the first answer, nothing vera forwards over a 60-turn
// chat is cut, summaries included, and most turns keep the prompt before
// as their start.
func TestNothingIsCutInAnyDialect(t *testing.T) {
	for _, d := range conversationDialects {
		t.Run(d.name, func(t *testing.T) {
			up := ollamatest.NewDialects(t)
			numberedReplies(up)
			up.Fake.Scale = 2
			up.Fake.ContextLength = 2048
			var summaries atomic.Int64
			up.Fake.Whole = func(api.ChatRequest) (string, int) {
				summaries.Add(1)
				return "The user asked about printing presses.", http.StatusOK
			}
			p := conversationVera(t, up, t.TempDir(), t.TempDir())
			tellFacts(t, p, "alice")
			var h []msg
			log := converse(t, d, p, up, "alice", "c1", &h, "Hello! My locker code is 4417.")
			time.Sleep(100 * time.Millisecond) // the first answer is learnt from
			before := len(up.Fake.Cuts())
			for i := 2; i <= 60; i++ {
				q := filler(i)
				if i%5 == 0 {
					q = factQuestions[i/5%6] + " " + q
				}
				log = append(log, converse(t, d, p, up, "alice", "c1", &h, q)...)
				if i%10 == 0 {
					// As a person pauses: a summary is written.
					time.Sleep(400 * time.Millisecond)
				}
			}
			assert.Empty(t, up.Fake.Cuts()[before:], "nothing cut after the first answer (%d summaries)", summaries.Load())
			kept := 0
			for k := 1; k < len(log); k++ {
				if keeps(log[k-1], log[k]) {
					kept++
				}
			}
			t.Logf("%d of %d turns kept the prefix, %d summaries", kept, len(log)-1, summaries.Load())
			assert.Greater(t, kept, (len(log)-1)*2/3, "most turns keep the prompt before as their start")
		})
	}
}

// The same through every dialect's official client: turn 61 of a
// back-to-back chat on a 2048 window gets the turn-2 fact back.
func TestCutFactIsRecalledInEveryDialect(t *testing.T) {
	for _, d := range conversationDialects {
		t.Run(d.name, func(t *testing.T) {
			up := ollamatest.NewDialects(t)
			up.Fake.Scale = 2
			up.Fake.ContextLength = 2048
			up.Fake.Whole = func(api.ChatRequest) (string, int) { return "", http.StatusInternalServerError }
			p := veratest.Start(t, "VERA_OLLAMA_URL="+up.URL)
			var h []msg
			log := converse(t, d, p, up, "alice", "c1", &h, "Hello! I am setting up my gym bag today.")
			time.Sleep(100 * time.Millisecond) // the first answer is learnt from
			log = append(log, converse(t, d, p, up, "alice", "c1", &h, "My locker code at the gym is 4417, please keep it in mind.")...)
			for i := 3; i <= 60; i++ {
				log = append(log, converse(t, d, p, up, "alice", "c1", &h, filler(i))...)
			}
			veratest.Settled(t, p)
			require.NotContains(t, log[len(log)-1].prompt, "4417", "turn 60 no longer forwards turn 2")
			log = append(log, converse(t, d, p, up, "alice", "c1", &h, "What is my locker code at the gym?")...)
			assert.Contains(t, log[len(log)-1].prompt, "4417", "turn 61 gets the turn-2 fact back")
			assert.Empty(t, up.Fake.Cuts(), "nothing is cut")
		})
	}
}
