package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/dialect"
	"github.com/vera-proxy/vera/memory"
	"github.com/vera-proxy/vera/memory/conversation"
)

// countingMemory counts recalls. A first turn gets a system layer naming
// the recall; with blocks, a later turn gets a block naming it.
type countingMemory struct {
	blocks  bool
	mu      sync.Mutex
	recalls int
}

func (m *countingMemory) Recall(_ context.Context, req memory.Request) *memory.Context {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.recalls++
	n := 0
	for n < len(req.Messages) && req.Messages[n].Role == "system" {
		n++
	}
	sources := fmt.Sprint("system messages: ", n)
	if req.Later && m.blocks {
		return &memory.Context{Sources: sources, Block: fmt.Sprintf("<memories>B%d</memories>\n\n", m.recalls), Semantic: []memory.Hit{{Memory: memory.Memory{ID: fmt.Sprint(m.recalls)}}}}
	}
	return &memory.Context{System: fmt.Sprintf("Memories (recall %d).", m.recalls), SystemReplaces: n, Sources: sources}
}

// An agent's tool loop of three steps, in each dialect's tool-result
// shape: only the first step recalls, every step forwards the same
// layers, and the loop is stored once, with its question and the answer
// that came without tool calls.
func TestToolLoopRecallsOnceAndIsStoredOnce(t *testing.T) {
	final := map[dialect.Dialect]string{
		ollamaChat:        `{"message":{"role":"assistant","content":"It is 21C."},"done":true}`,
		openAIChat:        `{"choices":[{"index":0,"message":{"role":"assistant","content":"It is 21C."},"finish_reason":"stop"}]}`,
		openAIResponses:   `{"id":"resp_9","status":"completed","output":[{"type":"message","content":[{"type":"output_text","text":"It is 21C."}]}]}`,
		anthropicMessages: `{"type":"message","role":"assistant","content":[{"type":"text","text":"It is 21C."}],"stop_reason":"end_turn"}`,
	}
	call := map[dialect.Dialect]string{}
	for _, a := range toolCallAnswers {
		if a.ctype == "application/json" {
			call[a.d] = a.body
		}
	}
	step := func(d dialect.Dialect, results int) (path, body string) {
		var items []string
		switch d {
		case ollamaChat:
			items = append(items, `{"role":"user","content":"weather in Lisbon?"}`)
			for range results {
				items = append(items, `{"role":"assistant","content":"","tool_calls":[{"function":{"name":"weather","arguments":{}}}]}`, `{"role":"tool","content":"21C"}`)
			}
			return "/api/chat", `{"model":"m","stream":false,"messages":[` + strings.Join(items, ",") + `]}`
		case openAIChat:
			items = append(items, `{"role":"user","content":"weather in Lisbon?"}`)
			for i := range results {
				items = append(items, fmt.Sprintf(`{"role":"assistant","content":null,"tool_calls":[{"id":"c%d","type":"function","function":{"name":"weather","arguments":"{}"}}]}`, i),
					fmt.Sprintf(`{"role":"tool","tool_call_id":"c%d","content":"21C"}`, i))
			}
			return "/v1/chat/completions", `{"model":"m","messages":[` + strings.Join(items, ",") + `]}`
		case openAIResponses:
			items = append(items, `{"role":"user","content":"weather in Lisbon?"}`)
			for i := range results {
				items = append(items, fmt.Sprintf(`{"type":"function_call","call_id":"c%d","name":"weather","arguments":"{}"}`, i),
					fmt.Sprintf(`{"type":"function_call_output","call_id":"c%d","output":"21C"}`, i))
			}
			return "/v1/responses", `{"model":"m","input":[` + strings.Join(items, ",") + `]}`
		}
		items = append(items, `{"role":"user","content":"weather in Lisbon?"}`)
		for i := range results {
			items = append(items, fmt.Sprintf(`{"role":"assistant","content":[{"type":"tool_use","id":"t%d","name":"weather","input":{}}]}`, i),
				fmt.Sprintf(`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t%d","content":"21C"}]}`, i))
		}
		return "/v1/messages", `{"model":"m","max_tokens":100,"messages":[` + strings.Join(items, ",") + `]}`
	}
	for _, d := range []dialect.Dialect{ollamaChat, openAIChat, openAIResponses, anthropicMessages} {
		t.Run(d.String(), func(t *testing.T) {
			up := newFakeOllama(t)
			path, _ := step(d, 0)
			bodies := answerSteps(up, path, func(n int) string {
				if n < 3 {
					return call[d]
				}
				return final[d]
			})
			mem := &countingMemory{}
			rec := &recorder{}
			base := startVera(t, up.srv.URL, func(s *Server) { s.Memory, s.Recorder = mem, rec })
			for results := range 3 {
				path, body := step(d, results)
				res, _ := postChat(t, base, path, body, "X-OpenWebUI-User-Id", "alice")
				require.Equal(t, http.StatusOK, res.StatusCode)
			}
			assert.Equal(t, 1, mem.recalls, "only the loop's first step recalls")
			for _, b := range *bodies {
				assert.Contains(t, b, "Memories (recall 1).", "every step forwards the first step's layers")
			}
			turns := rec.all()
			require.Len(t, turns, 1, "one turn for the whole loop")
			assert.Equal(t, "weather in Lisbon?", turns[0].User)
			assert.Equal(t, "It is 21C.", turns[0].Assistant)
		})
	}
}

func TestTemporaryChatIDsAreNotConversations(t *testing.T) {
	req, err := dialect.ParseChatRequest([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
	require.NoError(t, err)
	assert.Empty(t, threadOf("local:Xy12socket", req).ChatID, "Open WebUI's temporary chats share one id per browser tab")
}

// A later turn whose user message has no text (an image) gets its block
// on that message, never on the message before (which the earlier turn
// forwarded without one); on Anthropic it is not stored in place of the
// turn before.
func TestImageOnlyTurn(t *testing.T) {
	up := newFakeOllama(t)
	rec := &recorder{}
	base := startVera(t, up.srv.URL, func(s *Server) { s.Memory, s.Recorder = &countingMemory{blocks: true}, rec })
	hdr := []string{"X-OpenWebUI-User-Id", "alice", "X-OpenWebUI-Chat-Id", "c1"}
	res, _ := postChat(t, base, "/api/chat", `{"model":"m","messages":[{"role":"user","content":"look at this"}]}`, hdr...)
	require.Equal(t, http.StatusOK, res.StatusCode)
	res, _ = postChat(t, base, "/api/chat", `{"model":"m","messages":[{"role":"user","content":"look at this"},{"role":"assistant","content":"Hello there."},{"role":"user","content":"","images":["aGk="]}]}`, hdr...)
	require.Equal(t, http.StatusOK, res.StatusCode)
	_, _, body := up.last()
	var got struct {
		Messages []struct{ Role, Content string } `json:"messages"`
	}
	require.NoError(t, json.Unmarshal(body, &got))
	require.Len(t, got.Messages, 4)
	assert.Equal(t, "look at this", got.Messages[1].Content, "the earlier message is as the first turn forwarded it")
	assert.True(t, strings.HasPrefix(got.Messages[3].Content, "<memories>B"), got.Messages[3].Content)

	orig := up.srv.Config.Handler
	up.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/messages" {
			orig.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"type":"message","role":"assistant","content":[{"type":"text","text":"A cat."}],"stop_reason":"end_turn"}`)
	})
	rec.mu.Lock()
	rec.turns = nil
	rec.mu.Unlock()
	hdr = []string{"X-OpenWebUI-User-Id", "alice", "X-OpenWebUI-Chat-Id", "c2"}
	res, _ = postChat(t, base, "/v1/messages", `{"model":"m","max_tokens":9,"messages":[{"role":"user","content":"hi"}]}`, hdr...)
	require.Equal(t, http.StatusOK, res.StatusCode)
	res, _ = postChat(t, base, "/v1/messages", `{"model":"m","max_tokens":9,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"A cat."},{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"aGk="}}]}]}`, hdr...)
	require.Equal(t, http.StatusOK, res.StatusCode)
	turns := rec.all()
	require.Len(t, turns, 1, "the image-only turn has no text to store")
	assert.Equal(t, "hi", turns[0].User)
	assert.Empty(t, turns[0].Replaces)
}

// A first turn with blank system messages and a later one without them:
// no message of the caller's is dropped, and nothing fails.
func TestSystemMessagesThatComeAndGo(t *testing.T) {
	up := newFakeOllama(t)
	base := startVera(t, up.srv.URL, func(s *Server) { s.Memory = &countingMemory{blocks: true} })
	hdr := []string{"X-OpenWebUI-Chat-Id", "c1"}
	res, _ := postChat(t, base, "/api/chat", `{"model":"m","messages":[{"role":"system","content":""},{"role":"system","content":" "},{"role":"system","content":""},{"role":"user","content":"FIRSTQ"}]}`, hdr...)
	require.Equal(t, http.StatusOK, res.StatusCode)
	res, _ = postChat(t, base, "/api/chat", `{"model":"m","messages":[{"role":"user","content":"FIRSTQ"},{"role":"assistant","content":"Hello there."},{"role":"user","content":"SECONDQ"}]}`, hdr...)
	require.Equal(t, http.StatusOK, res.StatusCode)
	_, _, body := up.last()
	assert.Contains(t, string(body), "FIRSTQ")
	assert.Contains(t, string(body), "SECONDQ")
	res, _ = postChat(t, base, "/api/chat", `{"model":"m","messages":[{"role":"user","content":"FIRSTQ"}]}`, hdr...)
	require.Equal(t, http.StatusOK, res.StatusCode)
}

// Open WebUI's "continue" and Anthropic's prefill send the start of the
// answer as the last message: the stored answer is all of it.
func TestContinuedAnswerIsStoredWhole(t *testing.T) {
	up := newFakeOllama(t)
	rec := &recorder{}
	base := startVera(t, up.srv.URL, func(s *Server) { s.Memory, s.Recorder = &countingMemory{blocks: true}, rec })
	res, _ := postChat(t, base, "/api/chat", `{"model":"m","messages":[{"role":"user","content":"greet me"},{"role":"assistant","content":"Well: "}]}`)
	require.Equal(t, http.StatusOK, res.StatusCode)
	turns := rec.all()
	require.Len(t, turns, 1)
	assert.Equal(t, "greet me", turns[0].User)
	assert.Equal(t, "Well: Hello there.", turns[0].Assistant)
}

// A Responses agent that chains each step by previous_response_id sends
// only the tool's output: the loop still recalls once, every step carries
// the first step's layers, and the turn is stored once with the question.
func TestResponsesToolLoopChainedByID(t *testing.T) {
	up := newFakeOllama(t)
	bodies := answerSteps(up, "/v1/responses", func(n int) string {
		if n < 3 {
			return fmt.Sprintf(`{"id":"resp_%d","status":"completed","output":[{"type":"function_call","call_id":"c%d","name":"weather","arguments":"{}"}]}`, n, n)
		}
		return `{"id":"resp_3","status":"completed","output":[{"type":"message","content":[{"type":"output_text","text":"It is 21C."}]}]}`
	})
	mem := &countingMemory{}
	rec := &recorder{}
	base := startVera(t, up.srv.URL, func(s *Server) { s.Memory, s.Recorder = mem, rec })
	hdr := []string{"X-OpenWebUI-User-Id", "alice"}
	for i, body := range []string{
		`{"model":"m","input":"weather in Lisbon?"}`,
		`{"model":"m","previous_response_id":"resp_1","input":[{"type":"function_call_output","call_id":"c1","output":"21C"}]}`,
		`{"model":"m","previous_response_id":"resp_2","input":[{"type":"function_call_output","call_id":"c2","output":"21C"}]}`,
	} {
		res, _ := postChat(t, base, "/v1/responses", body, hdr...)
		require.Equal(t, http.StatusOK, res.StatusCode, "step %d", i+1)
	}
	assert.Equal(t, 1, mem.recalls)
	for _, b := range *bodies {
		assert.Contains(t, b, "Memories (recall 1).")
	}
	turns := rec.all()
	require.Len(t, turns, 1)
	assert.Equal(t, "weather in Lisbon?", turns[0].User)
	assert.Equal(t, "It is 21C.", turns[0].Assistant)
}

// answerSteps makes up answer the chats on path with answer(n) for the
// n-th (from 1), as JSON, and returns the bodies it received.
func answerSteps(up *fakeOllama, path string, answer func(n int) string) *[]string {
	orig := up.srv.Config.Handler
	var bodies []string
	up.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != path {
			orig.ServeHTTP(w, r)
			return
		}
		b, _ := io.ReadAll(r.Body)
		bodies = append(bodies, string(b))
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, answer(len(bodies)))
	})
	return &bodies
}

// gatedMemory holds its first recall until released, and recalls the
// secret only until it is withdrawn (as the store would, once deleted).
type gatedMemory struct {
	started, release chan struct{}
	once             sync.Once
	gone             atomic.Bool
}

func (m *gatedMemory) Recall(_ context.Context, req memory.Request) *memory.Context {
	found := !req.Later && !m.gone.Load() // read, then the delete lands
	m.once.Do(func() {
		close(m.started)
		<-m.release
	})
	if !found {
		return &memory.Context{}
	}
	return &memory.Context{System: "SECRET-4417", Semantic: []memory.Hit{{Memory: memory.Memory{ID: "secret"}}}}
}

// A memory deleted while a recall that found it is under way never
// becomes part of the conversation's kept plan: the next turn rebuilds
// without it.
func TestWithdrawDuringARecall(t *testing.T) {
	up := newFakeOllama(t)
	bodies := answerSteps(up, "/api/chat", func(int) string {
		return `{"message":{"role":"assistant","content":"Noted."},"done":true}`
	})
	mem := &gatedMemory{started: make(chan struct{}), release: make(chan struct{})}
	convs := conversation.New(0)
	base := startVera(t, up.srv.URL, func(s *Server) { s.Memory, s.Conversations = mem, convs })
	hdr := []string{"X-OpenWebUI-User-Id", "alice", "X-OpenWebUI-Chat-Id", "chat-1"}
	done := make(chan int)
	go func() {
		res, _ := postChat(t, base, "/api/chat", `{"model":"m","stream":false,"messages":[{"role":"user","content":"my code?"}]}`, hdr...)
		done <- res.StatusCode
	}()
	<-mem.started
	mem.gone.Store(true)
	convs.Withdraw("", "secret") // the admin API deletes it now
	close(mem.release)
	require.Equal(t, http.StatusOK, <-done)
	require.Contains(t, (*bodies)[0], "SECRET-4417", "the turn under way had found it")

	res, _ := postChat(t, base, "/api/chat", `{"model":"m","stream":false,"messages":[{"role":"user","content":"my code?"},{"role":"assistant","content":"Noted."},{"role":"user","content":"again?"}]}`, hdr...)
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Len(t, *bodies, 2)
	assert.NotContains(t, (*bodies)[1], "SECRET-4417", "the stale plan is not replayed")
}
