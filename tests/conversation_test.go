package tests

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ollama/ollama/api"
	"github.com/openai/openai-go/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/memory"
	"github.com/vera-proxy/vera/memory/qdrant/qdranttest"
	"github.com/vera-proxy/vera/ollama/ollamatest"
	"github.com/vera-proxy/vera/tests/veratest"
)

func withAnswer(prompt, answer string) string { return prompt + "<|assistant|>" + answer + "<|end|>" }

// reuse is the share of prev that the next prompt starts with.
func reuse(prev, next string) float64 {
	n := 0
	for n < len(prev) && n < len(next) && prev[n] == next[n] {
		n++
	}
	return float64(n) / float64(len(prev))
}

// conversationVera starts vera with small layers, so that a conversation's
// first turn cannot hold every memory and later turns need their blocks.
func conversationVera(t *testing.T, up *ollamatest.Dialects, data, prompts string, env ...string) *veratest.InProcess {
	t.Helper()
	return conversationVeraWith(t, up, data, prompts, "", env...)
}

// conversationVeraWith is conversationVera with more config (TOML, after
// its [layers]).
func conversationVeraWith(t *testing.T, up *ollamatest.Dialects, data, prompts, more string, env ...string) *veratest.InProcess {
	t.Helper()
	conf := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(conf, "config.toml"),
		[]byte("[layers]\nsemantic_token_budget = 240\ncontext_token_budget = 200\nrecent_turns = 1\n"+more), 0o644))
	return veratest.Start(t, append([]string{"VERA_OLLAMA_URL=" + up.URL, "VERA_DATA_DIR=" + data, "VERA_CONFIG_DIR=" + conf, "VERA_PROMPTS_DIR=" + prompts}, env...)...)
}

// numberedReplies makes the fake answer each chat differently.
func numberedReplies(up *ollamatest.Dialects) {
	var n atomic.Int64
	up.Fake.Reply = func() string { return fmt.Sprintf("Noted, this is answer %d.", n.Add(1)) }
}

var (
	factQuestions = []string{
		"What is my dog called?", "Which city do I work in as a welder?", "What dish do I like best?",
		"What car do I drive?", "Where does my sister Ana live?", "Which instrument do I play on Sundays?",
	}
	facts = []string{
		"My dog is called Biscuitzz.", "I work as a welder in the city of Portozz.", "The dish I like best is Moquecazz.",
		"The car I drive is a Volvozz.", "My sister Ana lives in Oslozz.", "On Sundays I play the Cellozz instrument.",
	}
	factWords = []string{"Biscuitzz", "Portozz", "Moquecazz", "Volvozz", "Oslozz", "Cellozz"}
)

// tellFacts tells each fact in a chat of its own and waits until all are
// in the store.
func tellFacts(t *testing.T, p *veratest.InProcess, ns string) {
	t.Helper()
	for i, f := range facts {
		sendOllama(t, p, ns, fmt.Sprintf("fact-%s-%d", ns, i), []msg{{"user", f}}, "")
	}
	veratest.Settled(t, p)
}

// The 6-turn chat of the issue, on every dialect: each turn's prompt
// starts with the previous prompt plus its answer, and still carries the
// fact its question asks about; facts the first turn did not hold arrive in
// a block on the user message that needed them, and stay there.
func TestConversationKeepsItsPromptPrefix(t *testing.T) {
	for _, d := range conversationDialects {
		for _, chatID := range []string{"", "chat-1"} {
			name := d.name + " without chat id"
			if chatID != "" {
				name = d.name + " with chat id"
			}
			t.Run(name, func(t *testing.T) {
				up := ollamatest.NewDialects(t)
				numberedReplies(up)
				p := conversationVera(t, up, t.TempDir(), t.TempDir())
				tellFacts(t, p, "alice")
				sixTurns(t, d, p, up, chatID)
			})
		}
	}
}

// turns runs a conversation through d: each question in turn, the history
// growing with each answer. It returns each turn's forwarded prompt and
// answer.
type turnLog struct{ prompt, answer string }

func converse(t *testing.T, d convo, p *veratest.InProcess, up *ollamatest.Dialects, ns, chatID string, history *[]msg, questions ...string) []turnLog {
	t.Helper()
	var out []turnLog
	for _, q := range questions {
		*history = append(*history, msg{"user", q})
		answer, _ := d.send(t, p, ns, chatID, *history, "")
		bodies := up.Bodies(d.path)
		out = append(out, turnLog{render(t, d.path, bodies[len(bodies)-1]), answer})
		*history = append(*history, msg{"assistant", answer})
	}
	return out
}

// keeps reports whether next starts with prev's prompt and answer.
func keeps(prev, next turnLog) bool {
	return strings.HasPrefix(next.prompt, withAnswer(prev.prompt, prev.answer))
}

// sixTurns is the chat: six turns, each asking about one fact.
// Each turn's prompt must start with the previous prompt plus its answer
// and carry the fact its question asks about, and some facts must have
// come in later turns' blocks.
func sixTurns(t *testing.T, d convo, p *veratest.InProcess, up *ollamatest.Dialects, chatID string) {
	t.Helper()
	var history []msg
	var prompts []string
	blocks := 0
	for k, q := range factQuestions {
		history = append(history, msg{"user", fmt.Sprintf("%s (turn %d)", q, k+1)})
		answer, _ := d.send(t, p, "alice", chatID, history, "")
		bodies := up.Bodies(d.path)
		prompt := render(t, d.path, bodies[len(bodies)-1])
		assert.True(t, strings.Contains(prompt, factWords[k]), "turn %d carries the fact it asks about", k+1)
		if k > 0 {
			prev := withAnswer(prompts[k-1], history[len(history)-2].text)
			t.Logf("turn %d: prefix reuse %.3f", k+1, reuse(prev, prompt))
			assert.True(t, strings.HasPrefix(prompt, prev), "turn %d starts with turn %d's prompt and answer", k+1, k)
		}
		blocks = strings.Count(prompt, "<memories>")
		prompts = append(prompts, prompt)
		history = append(history, msg{"assistant", answer})
	}
	assert.Positive(t, blocks, "some facts came in later turns' blocks")
}

// The same on Qdrant: conversations do not depend on the store.
func TestConversationOnQdrant(t *testing.T) {
	url := qdranttest.URL(t, os.Getenv("VERA_TEST_QDRANT_URL"))
	up := ollamatest.NewDialects(t)
	numberedReplies(up)
	p := conversationVera(t, up, t.TempDir(), t.TempDir(), "VERA_QDRANT_URL="+url, fmt.Sprintf("VERA_QDRANT_COLLECTION=conversations_%d", time.Now().UnixNano()))
	tellFacts(t, p, "alice")
	sixTurns(t, conversationDialects[0], p, up, "")
}

// A conversation that outgrows its window is compacted in every dialect
// with a history: its prompt then carries the summary the model wrote,
// ends with the client's latest turn, and the turn after keeps it as its
// start.
func TestCompactionInEveryDialect(t *testing.T) {
	for _, d := range conversationDialects {
		if d.chained {
			continue // a chain by id carries no history to compact
		}
		t.Run(d.name, func(t *testing.T) {
			up := ollamatest.NewDialects(t)
			numberedReplies(up)
			up.Fake.ContextLength = 2000
			up.Fake.Whole = func(api.ChatRequest) (string, int) {
				return "They talked about the facts of the user's life.", http.StatusOK
			}
			p := conversationVera(t, up, t.TempDir(), t.TempDir())
			tellFacts(t, p, "alice")
			var h []msg
			pad := strings.Repeat("Some words to fill the window up. ", 6)
			var log []turnLog
			for k := range 16 {
				log = append(log, converse(t, d, p, up, "alice", "c1", &h, fmt.Sprintf("%s %s (turn %d)", factQuestions[k%6], pad, k+1))...)
				time.Sleep(300 * time.Millisecond) // as a person types: the summary is written between turns
			}
			first := -1
			for k, l := range log {
				if strings.Contains(l.prompt, "They talked about the facts") {
					first = k
					break
				}
			}
			require.Positive(t, first, "compacted")
			require.Less(t, first+1, len(log))
			assert.Contains(t, log[first].prompt, "(turn "+strconv.Itoa(first+1)+")", "it ends with the latest turn")
			assert.NotContains(t, log[first].prompt, "(turn 1)", "the oldest turns are in the summary")
			kept := 0
			for k := first + 1; k < len(log); k++ {
				if keeps(log[k-1], log[k]) {
					kept++
				}
			}
			assert.Greater(t, kept, (len(log)-first-1)/2, "most turns after it keep the prompt before as their start")
		})
	}
}

// The plan is rebuilt, costing one full turn, only when it must: the
// conversation outgrew the window or systemprompt.md changed (a restart
// does not: the plan is kept in the store). Each rebuild is followed by stable turns again. Two
// conversations that begin alike, and one chat id in two namespaces, are
// never mixed up.
func TestConversationPlanRebuilds(t *testing.T) {
	for _, d := range conversationDialects {
		t.Run(d.name, func(t *testing.T) {
			t.Run("window", func(t *testing.T) {
				up := ollamatest.NewDialects(t)
				numberedReplies(up)
				up.Fake.ContextLength = 2000
				// Without compaction (see TestCompactionInEveryDialect).
				p := conversationVeraWith(t, up, t.TempDir(), t.TempDir(), "[memory]\ncompact_at = 0\n")
				tellFacts(t, p, "alice")
				var h []msg
				pad := strings.Repeat("Some words to fill the window up. ", 6)
				var qs []string
				for k := range 18 {
					qs = append(qs, fmt.Sprintf("%s %s (turn %d)", factQuestions[k%6], pad, k+1))
				}
				log := converse(t, d, p, up, "alice", "c1", &h, qs...)
				for k := 1; k < len(log); k++ {
					t.Logf("turn %d: %d bytes, prefix kept %v, fact %v", k+1, len(log[k].prompt), keeps(log[k-1], log[k]), strings.Contains(log[k].prompt, factWords[k%6]))
				}
				rebuilt := -1
				for k := 1; k < len(log); k++ {
					if !keeps(log[k-1], log[k]) {
						rebuilt = k
						break
					}
				}
				require.Positive(t, rebuilt, "the conversation outgrew its window and the plan was rebuilt")
				assert.Greater(t, rebuilt, 1, "turns are stable until the window fills")
				require.Less(t, rebuilt+1, len(log))
				assert.True(t, keeps(log[rebuilt], log[rebuilt+1]), "the turn after a rebuild keeps its prefix")
				assert.Less(t, len(log[rebuilt].prompt), len(log[rebuilt-1].prompt), "the rebuilt plan fits what is left of the window")
				for k, l := range log[:rebuilt] {
					assert.True(t, strings.Contains(l.prompt, factWords[k%6]), "turn %d gets its fact", k+1)
				}
			})
			t.Run("systemprompt.md", func(t *testing.T) {
				up := ollamatest.NewDialects(t)
				numberedReplies(up)
				prompts := t.TempDir()
				sp := filepath.Join(prompts, "systemprompt.md")
				require.NoError(t, os.WriteFile(sp, []byte("You are a helpful assistant."), 0o644))
				p := conversationVera(t, up, t.TempDir(), prompts)
				tellFacts(t, p, "alice")
				var h []msg
				log := converse(t, d, p, up, "alice", "", &h, factQuestions[0], factQuestions[1])
				require.True(t, keeps(log[0], log[1]))
				require.NoError(t, os.WriteFile(sp, []byte("You are a helpful and brief assistant."), 0o644))
				require.NoError(t, os.Chtimes(sp, time.Now().Add(time.Minute), time.Now().Add(time.Minute)))
				log = append(log, converse(t, d, p, up, "alice", "", &h, factQuestions[2], factQuestions[3])...)
				assert.False(t, keeps(log[1], log[2]), "a changed system prompt rebuilds the plan")
				assert.True(t, strings.Contains(log[2].prompt, "helpful and brief"))
				assert.True(t, keeps(log[2], log[3]), "and the turn after keeps its prefix")
				assert.True(t, strings.Contains(log[3].prompt, factWords[3]))
			})
			t.Run("restart", func(t *testing.T) {
				up := ollamatest.NewDialects(t)
				numberedReplies(up)
				data := t.TempDir()
				p := conversationVera(t, up, data, t.TempDir())
				tellFacts(t, p, "alice")
				var h []msg
				log := converse(t, d, p, up, "alice", "", &h, factQuestions[0], factQuestions[1])
				require.True(t, keeps(log[0], log[1]))
				p.Stop(t)
				p = conversationVera(t, up, data, t.TempDir())
				log = append(log, converse(t, d, p, up, "alice", "", &h, factQuestions[2], factQuestions[3])...)
				assert.True(t, keeps(log[1], log[2]), "a restart costs the next turn only its new messages")
				assert.True(t, strings.Contains(log[2].prompt, factWords[2]), "and it gets the memory it needs")
				assert.True(t, keeps(log[2], log[3]), "and the turn after keeps its prefix")
				assert.True(t, strings.Contains(log[3].prompt, factWords[3]))
			})
			t.Run("same first message", func(t *testing.T) {
				up := ollamatest.NewDialects(t)
				numberedReplies(up)
				p := conversationVera(t, up, t.TempDir(), t.TempDir())
				tellFacts(t, p, "alice")
				var a, b []msg
				a1 := converse(t, d, p, up, "alice", "", &a, "hi")
				b1 := converse(t, d, p, up, "alice", "", &b, "hi")
				a2 := converse(t, d, p, up, "alice", "", &a, factQuestions[1])
				b2 := converse(t, d, p, up, "alice", "", &b, factQuestions[2])
				a3 := converse(t, d, p, up, "alice", "", &a, factQuestions[3])
				assert.True(t, keeps(a1[0], a2[0]), "conversation a")
				assert.True(t, keeps(b1[0], b2[0]), "conversation b")
				assert.True(t, keeps(a2[0], a3[0]), "conversation a, again")
				assert.True(t, strings.Contains(a2[0].prompt, factWords[1]))
				assert.True(t, strings.Contains(b2[0].prompt, factWords[2]))
			})
			t.Run("two namespaces", func(t *testing.T) {
				up := ollamatest.NewDialects(t)
				numberedReplies(up)
				p := conversationVera(t, up, t.TempDir(), t.TempDir())
				tellFacts(t, p, "alice")
				var a, b []msg
				a1 := converse(t, d, p, up, "alice", "shared", &a, factQuestions[0])
				b1 := converse(t, d, p, up, "bob", "shared", &b, factQuestions[0])
				a2 := converse(t, d, p, up, "alice", "shared", &a, factQuestions[1])
				b2 := converse(t, d, p, up, "bob", "shared", &b, factQuestions[1])
				assert.True(t, keeps(a1[0], a2[0]))
				assert.True(t, keeps(b1[0], b2[0]))
				assert.True(t, strings.Contains(a2[0].prompt, factWords[1]))
				for _, l := range append(b1, b2...) {
					for _, w := range factWords {
						assert.False(t, strings.Contains(l.prompt, w), "bob never sees alice's memory")
					}
				}
			})
		})
	}
}

// A Responses conversation chained by previous_response_id sends only its
// new message (Ollama keeps no state): its instructions stay the same from
// turn to turn, later facts come in blocks on the new message, and each
// turn is stored once with the user's own text.
func TestResponsesChainedByPreviousResponseID(t *testing.T) {
	up := ollamatest.NewDialects(t)
	numberedReplies(up)
	data := t.TempDir()
	p := conversationVera(t, up, data, t.TempDir())
	tellFacts(t, p, "alice")
	prev := ""
	var instructions []string
	for k, q := range factQuestions[:4] {
		_, id := sendResponses(t, p, "alice", "", []msg{{"user", q}}, prev)
		require.NotEmpty(t, id)
		prev = id
		body := up.Last(t, "/v1/responses")
		instructions = append(instructions, body["instructions"].(string))
		assert.Contains(t, render(t, "/v1/responses", []byte(up.LastRaw("/v1/responses"))), factWords[k])
	}
	for k := 1; k < len(instructions); k++ {
		assert.Equal(t, instructions[0], instructions[k], "turn %d's instructions are the first turn's", k+1)
	}
	p.Stop(t)
	page, _, err := veratest.OpenStore(t, data).Scroll(context.Background(), memory.Filter{Namespace: "alice"}, "", 100)
	require.NoError(t, err)
	n := 0
	for _, m := range page {
		for _, q := range factQuestions[:4] {
			if strings.HasPrefix(m.Text, "User: "+q+"\n") {
				n++
			}
		}
	}
	assert.Equal(t, 4, n, "each turn stored once, with the user's own text")
}

// A regenerate and an edit of the last message replace the turn they redo,
// and an agent's tool loop of three steps recalls nothing new and is stored
// once, with the question that started it and the answer that ended it:
// through the official Ollama and OpenAI clients, with and without a chat
// id. What is stored is read back after vera stops.
func TestRegenerateEditAndToolLoopAreStoredOnce(t *testing.T) {
	type step struct {
		answer string
		call   bool
	}
	// agent is one request of a dialect's agent: history then, when the
	// last answer called a tool, that call and its result.
	type agent func(t *testing.T, p *veratest.InProcess, chatID string, history []msg, calls int) step
	ollamaAgent := func(t *testing.T, p *veratest.InProcess, chatID string, history []msg, calls int) step {
		var msgs []api.Message
		for _, m := range history {
			msgs = append(msgs, api.Message{Role: m.role, Content: m.text})
		}
		args := api.NewToolCallFunctionArguments()
		args.Set("city", "Lisbon")
		for range calls {
			msgs = append(msgs, api.Message{Role: "assistant", ToolCalls: []api.ToolCall{{Function: api.ToolCallFunction{Name: "weather", Arguments: args}}}},
				api.Message{Role: "tool", Content: "21C and sunny", ToolName: "weather"})
		}
		c := veratest.OllamaClientWith(t, p, veratest.HeadersFor("alice", chatID))
		var out step
		require.NoError(t, c.Chat(context.Background(), &api.ChatRequest{Model: "llama3.2", Messages: msgs}, func(r api.ChatResponse) error {
			out.answer += r.Message.Content
			out.call = out.call || len(r.Message.ToolCalls) > 0
			return nil
		}))
		return out
	}
	openAIAgent := func(t *testing.T, p *veratest.InProcess, chatID string, history []msg, calls int) step {
		msgs := openAIMessages(history)
		for i := range calls {
			id := fmt.Sprintf("call_%d", i+1)
			msgs = append(msgs, openai.ChatCompletionMessageParamUnion{OfAssistant: &openai.ChatCompletionAssistantMessageParam{
				ToolCalls: []openai.ChatCompletionMessageToolCallUnionParam{{OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
					ID: id, Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: "weather", Arguments: `{"city":"Lisbon"}`},
				}}},
			}}, openai.ToolMessage("21C and sunny", id))
		}
		c := openai.NewClient(veratest.OpenAIOptions(p, "alice", chatID)...)
		res, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "llama3.2", Messages: msgs})
		require.NoError(t, err)
		return step{answer: res.Choices[0].Message.Content, call: len(res.Choices[0].Message.ToolCalls) > 0}
	}
	for _, d := range []struct {
		name  string
		path  string
		agent agent
	}{{"ollama chat", "/api/chat", ollamaAgent}, {"openai chat", "/v1/chat/completions", openAIAgent}} {
		for _, chatID := range []string{"", "chat-7"} {
			t.Run(fmt.Sprintf("%s chat id %q", d.name, chatID), func(t *testing.T) {
				// Each check runs the conversation from the start, up to a
				// point, then reads the store vera leaves behind.
				type result struct {
					again, edited, last step
					stored              []string
				}
				run := func(upto int) result {
					up := ollamatest.NewDialects(t)
					numberedReplies(up)
					var toolCalls atomic.Int64
					up.Fake.CallTool = func() string {
						if toolCalls.Load() > 0 {
							toolCalls.Add(-1)
							return "weather"
						}
						return ""
					}
					data := t.TempDir()
					p := conversationVera(t, up, data, t.TempDir())
					tellFacts(t, p, "alice")
					var r result
					h := []msg{{"user", "What is my dog called?"}}
					// lastPrompt is the prompt Ollama got last, as text.
					lastPrompt := func() string {
						bodies := up.Bodies(d.path)
						return render(t, d.path, bodies[len(bodies)-1])
					}
					first := d.agent(t, p, chatID, h, 0)
					veratest.Settled(t, p) // the turn is in the store, where recall could find it
					r.again = d.agent(t, p, chatID, h, 0)
					require.NotEqual(t, first.answer, r.again.answer)
					assert.NotContains(t, lastPrompt(), first.answer, "a regenerate is not primed with the answer it replaces")
					if upto >= 2 {
						h = append(h, msg{"assistant", r.again.answer}, msg{"user", "What car do I drive?"})
						replaced := d.agent(t, p, chatID, h, 0)
						veratest.Settled(t, p)
						h[2].text = "What city do I work in?"
						r.edited = d.agent(t, p, chatID, h, 0)
						prompt := lastPrompt()
						assert.NotContains(t, prompt, "What car do I drive?", "an edit is not primed with the words taken back")
						assert.NotContains(t, prompt, replaced.answer)
					}
					if upto >= 3 {
						h = append(h, msg{"assistant", r.edited.answer}, msg{"user", "What is the weather in my sister's town?"})
						toolCalls.Store(2)
						// Recall embeds its query; the writer embeds stored
						// turns, which begin with "User: ".
						queries := func() (n int) {
							for _, e := range up.Fake.Embedded() {
								if !strings.HasPrefix(e, "User: ") {
									n++
								}
							}
							return n
						}
						before := queries()
						var prompts []string
						for calls := range 3 {
							r.last = d.agent(t, p, chatID, h, calls)
							bodies := up.Bodies(d.path)
							prompts = append(prompts, render(t, d.path, bodies[len(bodies)-1]))
							assert.Equal(t, calls < 2, r.last.call, "step %d", calls+1)
						}
						assert.Equal(t, before+1, queries(), "the loop's first step recalls, its other steps do not")
						for k := 1; k < 3; k++ {
							assert.True(t, strings.HasPrefix(prompts[k], prompts[0]), "step %d starts with the loop's first prompt", k+1)
						}
					}
					p.Stop(t)
					page, _, err := veratest.OpenStore(t, data).Scroll(context.Background(), memory.Filter{Namespace: "alice", Types: []memory.Type{memory.Raw}}, "", 100)
					require.NoError(t, err)
					for _, m := range page {
						if !strings.Contains(m.Text, "zz") { // not the facts told first
							r.stored = append(r.stored, m.Text)
						}
					}
					return r
				}

				r := run(1)
				assert.Equal(t, []string{"User: What is my dog called?\nAssistant: " + r.again.answer}, r.stored, "a regenerate replaces the turn")
				r = run(2)
				assert.ElementsMatch(t, []string{
					"User: What is my dog called?\nAssistant: " + r.again.answer,
					"User: What city do I work in?\nAssistant: " + r.edited.answer,
				}, r.stored, "an edit of the last message replaces its turn")
				r = run(3)
				assert.ElementsMatch(t, []string{
					"User: What is my dog called?\nAssistant: " + r.again.answer,
					"User: What city do I work in?\nAssistant: " + r.edited.answer,
					"User: What is the weather in my sister's town?\nAssistant: " + r.last.answer,
				}, r.stored, "the tool loop is one turn, with its question and its final answer")
			})
		}
	}
}

// memory.stable_prefix = false: every turn's layers are chosen afresh, so
// the prompt's top changes from turn to turn, and each turn still gets the
// fact it asks about.
func TestStablePrefixOff(t *testing.T) {
	up := ollamatest.NewDialects(t)
	numberedReplies(up)
	conf := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(conf, "config.toml"),
		[]byte("[layers]\nsemantic_token_budget = 240\ncontext_token_budget = 200\nrecent_turns = 1\n[memory]\nstable_prefix = false\n"), 0o644))
	p := veratest.Start(t, "VERA_OLLAMA_URL="+up.URL, "VERA_CONFIG_DIR="+conf, "VERA_PROMPTS_DIR="+t.TempDir())
	tellFacts(t, p, "alice")
	var h []msg
	log := converse(t, conversationDialects[0], p, up, "alice", "", &h, factQuestions...)
	kept := 0
	for k, l := range log {
		assert.True(t, strings.Contains(l.prompt, factWords[k]), "turn %d gets its fact", k+1)
		assert.NotContains(t, l.prompt, "<memories>", "no blocks: the layers are chosen afresh")
		if k > 0 && keeps(log[k-1], l) {
			kept++
		}
	}
	assert.Less(t, kept, 5, "the prompt's top changes as the memories asked about do")
}
