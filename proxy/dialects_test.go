package proxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/memory"
)

// Chats of Ollama's /api/generate, OpenAI's /v1/responses and
// Anthropic's /v1/messages through the server, against an upstream that
// speaks them.

// memoryLayers is what fixedMemory injects in these tests: a system layer
// that keeps the caller's "be brief" and a recent pair.
func memoryLayers(callerSystem bool) memory.Context {
	mc := memory.Context{
		System:    "Memories:\n[2026-11-20]\nUser: my sister is Ann\nAssistant: noted",
		Recent:    []memory.Message{{Role: "user", Content: "earlier"}, {Role: "assistant", Content: "yes"}},
		RecentIDs: []string{"r1"},
		Semantic:  []memory.Hit{{Memory: memory.Memory{ID: "s1"}}},
	}
	if callerSystem {
		mc.System = "be brief\n\n" + mc.System
		mc.SystemReplaces = 1
	}
	return mc
}

// recentAsText is how memoryLayers' recent pair reads as text.
const recentAsText = recentIntro + "\n\nUser: earlier\nAssistant: yes"

// rawField returns one top-level field of a JSON object, as it is there.
func rawField(t *testing.T, body []byte, key string) json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(body, &m), "%s", body)
	return m[key]
}

func marshalled(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

// untouchedCalls are calls of each dialect that carry no conversation
// (the dialect's Conversation is false for each): vera leaves them alone.
var untouchedCalls = []struct{ path, name, body string }{
	{"/api/generate", "load", `{"model":"llama3.2"}`},
	{"/api/generate", "unload", `{"model":"llama3.2","keep_alive":0}`},
	{"/api/generate", "empty prompt", `{"model":"llama3.2","prompt":"","keep_alive":"5m"}`},
	{"/api/generate", "whitespace prompt", `{"model":"llama3.2","prompt":" \n\t "}`},
	{"/api/generate", "raw", `{"model":"llama3.2","prompt":"<|user|>hi<|assistant|>","raw":true}`},
	{"/api/generate", "suffix", `{"model":"codellama","prompt":"def add(a, b):","suffix":"\n    return c"}`},
	{"/api/generate", "context", `{"model":"llama3.2","prompt":"and then?","context":[1,2,3]}`},
	{"/api/generate", "context with spaces", `{"model":"llama3.2","prompt":"and then?","context": [ 7 ] }`},
	{"/v1/responses", "no input", `{"model":"llama3.2"}`},
	{"/v1/responses", "null input", `{"model":"llama3.2","input":null}`},
	{"/v1/responses", "empty list", `{"model":"llama3.2","input":[],"instructions":"x"}`},
	{"/v1/responses", "empty list with spaces", `{"model":"llama3.2", "input": [ ] }`},
	{"/v1/responses", "tool outputs only", `{"model":"llama3.2","input":[{"type":"function_call_output","call_id":"c1","output":"42"}]}`},
	{"/v1/responses", "item reference only", `{"model":"llama3.2","instructions":"x","input":[{"type":"item_reference","id":"msg_0"}]}`},
	{"/v1/messages", "no messages", `{"model":"llama3.2","max_tokens":1}`},
	{"/v1/messages", "null messages", `{"model":"llama3.2","messages":null}`},
	{"/v1/messages", "empty list", `{"model":"llama3.2","system":"x","messages":[]}`},
}

// dialectUpstream answers the two SSE dialects as Ollama's middleware does
// (https://platform.openai.com/docs/api-reference/responses-streaming,
// https://docs.anthropic.com/en/api/messages-streaming) and hands every
// other route to fakeOllama. It keeps the body of the last chat request.
type dialectUpstream struct {
	ollama *fakeOllama
	srv    *httptest.Server
	// extras adds reasoning and a tool call to every answer.
	extras bool
	// cut aborts a stream before its final event.
	cut bool

	mu       sync.Mutex
	lastPath string
	lastBody []byte
}

func newDialectUpstream(t *testing.T) *dialectUpstream {
	u := &dialectUpstream{ollama: newFakeOllama(t)}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/responses", u.responses)
	mux.HandleFunc("POST /v1/messages", u.messages)
	mux.Handle("/", u.ollama.srv.Config.Handler)
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/chat", "/api/generate", "/v1/chat/completions", "/v1/responses", "/v1/messages":
			body, _ := io.ReadAll(r.Body)
			u.mu.Lock()
			u.lastPath, u.lastBody = r.URL.Path, body
			u.mu.Unlock()
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(u.srv.Close)
	return u
}

func (u *dialectUpstream) last() (string, []byte) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.lastPath, u.lastBody
}

func (u *dialectUpstream) streamed(w http.ResponseWriter, r *http.Request) bool {
	var req streamReq
	body, _ := io.ReadAll(r.Body)
	_ = json.Unmarshal(body, &req)
	return req.Stream != nil && *req.Stream
}

// writeEvents writes an SSE stream, flushing each event, and aborts it
// before the final one when cut is set.
func (u *dialectUpstream) writeEvents(w http.ResponseWriter, stream string) {
	w.Header().Set("Content-Type", "text/event-stream")
	events := strings.SplitAfter(stream, "\n\n")
	for i, e := range events {
		if u.cut && i == len(events)-2 {
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler)
		}
		io.WriteString(w, e)
		w.(http.Flusher).Flush()
	}
}

func (u *dialectUpstream) responses(w http.ResponseWriter, r *http.Request) {
	if u.streamed(w, r) {
		u.writeEvents(w, responsesStream(u.extras, u.ollama.tokens...))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, responsesObject(u.extras, strings.Join(u.ollama.tokens, "")))
}

func (u *dialectUpstream) messages(w http.ResponseWriter, r *http.Request) {
	if u.streamed(w, r) {
		u.writeEvents(w, messagesStream(u.extras, u.ollama.tokens...))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, messagesObject(u.extras, strings.Join(u.ollama.tokens, "")))
}

// sseEvent renders one event as Ollama writes it: an event line, a data
// line, a blank line.
func sseEvent(typ string, data map[string]any) string {
	data["type"] = typ
	b, _ := json.Marshal(data)
	return "event: " + typ + "\ndata: " + string(b) + "\n\n"
}

// responsesStream is a Responses API event stream answering text; with
// extras, reasoning comes first. (An answer that calls a function is not a
// turn: see toolCallAnswers.)
func responsesStream(extras bool, text ...string) string {
	var b strings.Builder
	seq := 0
	ev := func(typ string, data map[string]any) {
		data["sequence_number"] = seq
		seq++
		b.WriteString(sseEvent(typ, data))
	}
	resp := func(status string, output []any) map[string]any {
		return map[string]any{"id": "resp_1", "object": "response", "created_at": 1764000000, "model": "llama3.2", "status": status, "output": output}
	}
	ev("response.created", map[string]any{"response": resp("in_progress", []any{})})
	ev("response.in_progress", map[string]any{"response": resp("in_progress", []any{})})
	var output []any
	idx := 0
	if extras {
		ev("response.output_item.added", map[string]any{"output_index": idx, "item": map[string]any{"id": "rs_1", "type": "reasoning", "summary": []any{}}})
		ev("response.reasoning_summary_text.delta", map[string]any{"item_id": "rs_1", "output_index": idx, "summary_index": 0, "delta": "the user wants"})
		ev("response.reasoning_summary_text.done", map[string]any{"item_id": "rs_1", "output_index": idx, "summary_index": 0, "text": "the user wants"})
		ev("response.output_item.done", map[string]any{"output_index": idx, "item": map[string]any{"id": "rs_1", "type": "reasoning"}})
		output = append(output, map[string]any{"id": "rs_1", "type": "reasoning", "summary": []any{}})
		idx++
	}
	msg := map[string]any{"id": "msg_1", "type": "message", "status": "in_progress", "role": "assistant", "content": []any{}}
	ev("response.output_item.added", map[string]any{"output_index": idx, "item": msg})
	ev("response.content_part.added", map[string]any{"item_id": "msg_1", "output_index": idx, "content_index": 0, "part": map[string]any{"type": "output_text", "text": "", "annotations": []any{}}})
	for _, s := range text {
		ev("response.output_text.delta", map[string]any{"item_id": "msg_1", "output_index": idx, "content_index": 0, "delta": s, "logprobs": []any{}})
	}
	all := strings.Join(text, "")
	part := map[string]any{"type": "output_text", "text": all, "annotations": []any{}}
	ev("response.output_text.done", map[string]any{"item_id": "msg_1", "output_index": idx, "content_index": 0, "text": all})
	ev("response.content_part.done", map[string]any{"item_id": "msg_1", "output_index": idx, "content_index": 0, "part": part})
	done := map[string]any{"id": "msg_1", "type": "message", "status": "completed", "role": "assistant", "content": []any{part}}
	ev("response.output_item.done", map[string]any{"output_index": idx, "item": done})
	ev("response.completed", map[string]any{"response": resp("completed", append(output, done))})
	return b.String()
}

// responsesObject is a non-streamed Responses answer.
func responsesObject(extras bool, text string) string {
	var output []any
	if extras {
		output = append(output,
			map[string]any{"id": "rs_1", "type": "reasoning", "summary": []any{map[string]any{"type": "summary_text", "text": "the user wants"}}})
	}
	output = append(output, map[string]any{"id": "msg_1", "type": "message", "status": "completed", "role": "assistant",
		"content": []any{map[string]any{"type": "output_text", "text": text, "annotations": []any{}}}})
	b, _ := json.Marshal(map[string]any{"id": "resp_1", "object": "response", "created_at": 1764000000, "status": "completed",
		"error": nil, "incomplete_details": nil, "model": "llama3.2", "output": output, "usage": map[string]any{"input_tokens": 5, "output_tokens": 4, "total_tokens": 9}})
	return string(b)
}

// messagesStream is an Anthropic Messages event stream answering text;
// with extras, a thinking block comes first. (An answer that uses a tool
// is not a turn: see toolCallAnswers.)
func messagesStream(extras bool, text ...string) string {
	var b strings.Builder
	ev := func(typ string, data map[string]any) { b.WriteString(sseEvent(typ, data)) }
	ev("message_start", map[string]any{"message": map[string]any{"id": "msg_1", "type": "message", "role": "assistant", "model": "llama3.2",
		"content": []any{}, "stop_reason": nil, "stop_sequence": nil, "usage": map[string]any{"input_tokens": 5, "output_tokens": 1}}})
	idx := 0
	if extras {
		ev("content_block_start", map[string]any{"index": idx, "content_block": map[string]any{"type": "thinking", "thinking": ""}})
		ev("content_block_delta", map[string]any{"index": idx, "delta": map[string]any{"type": "thinking_delta", "thinking": "the user wants"}})
		ev("content_block_delta", map[string]any{"index": idx, "delta": map[string]any{"type": "signature_delta", "signature": "c2ln"}})
		ev("content_block_stop", map[string]any{"index": idx})
		idx++
	}
	ev("content_block_start", map[string]any{"index": idx, "content_block": map[string]any{"type": "text", "text": ""}})
	ev("ping", map[string]any{})
	for _, s := range text {
		ev("content_block_delta", map[string]any{"index": idx, "delta": map[string]any{"type": "text_delta", "text": s}})
	}
	ev("content_block_stop", map[string]any{"index": idx})
	ev("message_delta", map[string]any{"delta": map[string]any{"stop_reason": "end_turn", "stop_sequence": nil}, "usage": map[string]any{"output_tokens": 15}})
	ev("message_stop", map[string]any{})
	return b.String()
}

// messagesObject is a non-streamed Messages answer.
func messagesObject(extras bool, text string) string {
	var content []any
	if extras {
		content = append(content, map[string]any{"type": "thinking", "thinking": "the user wants", "signature": "c2ln"})
	}
	content = append(content, map[string]any{"type": "text", "text": text})
	b, _ := json.Marshal(map[string]any{"id": "msg_1", "type": "message", "role": "assistant", "model": "llama3.2", "content": content,
		"stop_reason": "end_turn", "stop_sequence": nil, "usage": map[string]any{"input_tokens": 5, "output_tokens": 4}})
	return string(b)
}

// Calls that carry no conversation go out as they came, on every dialect:
// nothing injected, nothing stored.
func TestDialectsForwardNonConversationsByteForByte(t *testing.T) {
	up := newDialectUpstream(t)
	mem := &fixedMemory{got: make(chan memory.Request, 1), mc: memoryLayers(false)}
	rec := &recorder{}
	base := startVera(t, up.srv.URL, func(s *Server) { s.Memory, s.Recorder = mem, rec })
	for _, c := range untouchedCalls {
		t.Run(c.path+" "+c.name, func(t *testing.T) {
			res, _ := postChat(t, base, c.path, c.body)
			require.Equal(t, http.StatusOK, res.StatusCode)
			path, got := up.last()
			assert.Equal(t, c.path, path)
			assert.Equal(t, c.body, string(got), "byte for byte")
			assert.Empty(t, res.Header.Get("X-Vera-Context"))
		})
	}
	select {
	case <-mem.got:
		t.Fatal("memory was asked about a call without a conversation")
	default:
	}
	assert.Empty(t, rec.all())
}

// A conversation on each new dialect gets the layers in its own shape, and
// its finished turn (the user's text, the answer's text alone) is stored,
// streamed or not.
func TestDialectsWithMemoryThroughTheServer(t *testing.T) {
	mc := memoryLayers(true)
	for _, tc := range []struct {
		name, path, body string
		// check looks at what the upstream got.
		check func(t *testing.T, fwd []byte)
		user  string
	}{
		{"generate stream", "/api/generate", `{"model":"llama3.2","prompt":"who is my sister?","system":"be brief","options":{"seed":1}}`,
			func(t *testing.T, fwd []byte) {
				assert.JSONEq(t, `{"model":"llama3.2","prompt":"who is my sister?","options":{"seed":1},"system":`+marshalled(t, mc.System+"\n\n"+recentAsText)+`}`, string(fwd))
			}, "who is my sister?"},
		{"generate object", "/api/generate", `{"model":"llama3.2","prompt":"who is my sister?","system":"be brief","stream":false}`,
			func(t *testing.T, fwd []byte) {
				assert.Equal(t, mc.System+"\n\n"+recentAsText, jsonString(t, rawField(t, fwd, "system")))
			}, "who is my sister?"},
		{"responses stream", "/v1/responses", `{"model":"llama3.2","stream":true,"instructions":"be brief","input":[{"role":"user","content":[{"type":"input_text","text":"who is my sister?"}]}]}`,
			func(t *testing.T, fwd []byte) {
				assert.Equal(t, mc.System+"\n\n"+recentAsText, jsonString(t, rawField(t, fwd, "instructions")))
				assert.Equal(t, `[{"role":"user","content":[{"type":"input_text","text":"who is my sister?"}]}]`, string(rawField(t, fwd, "input")))
			}, "who is my sister?"},
		{"responses object", "/v1/responses", `{"model":"llama3.2","instructions":"be brief","input":"who is my sister?"}`,
			func(t *testing.T, fwd []byte) {
				assert.Equal(t, `"who is my sister?"`, string(rawField(t, fwd, "input")))
			}, "who is my sister?"},
		{"messages stream", "/v1/messages", `{"model":"llama3.2","max_tokens":100,"stream":true,"system":"be brief","messages":[{"role":"user","content":"who is my sister?"}]}`,
			func(t *testing.T, fwd []byte) {
				assert.Equal(t, mc.System, jsonString(t, rawField(t, fwd, "system")))
				assert.JSONEq(t, `[{"role":"user","content":"earlier"},{"role":"assistant","content":"yes"},{"role":"user","content":"who is my sister?"}]`, string(rawField(t, fwd, "messages")))
			}, "who is my sister?"},
		{"messages object", "/v1/messages", `{"model":"llama3.2","max_tokens":100,"system":[{"type":"text","text":"be brief"}],"messages":[{"role":"user","content":[{"type":"text","text":"who is my sister?"}]}]}`,
			func(t *testing.T, fwd []byte) {
				assert.JSONEq(t, `[{"type":"text","text":"be brief"},{"type":"text","text":`+marshalled(t, strings.TrimPrefix(mc.System, "be brief\n\n"))+`}]`, string(rawField(t, fwd, "system")))
			}, "who is my sister?"},
	} {
		for _, extras := range []bool{false, true} {
			if extras && tc.path == "/api/generate" {
				continue
			}
			t.Run(fmt.Sprintf("%s extras=%v", tc.name, extras), func(t *testing.T) {
				up := newDialectUpstream(t)
				up.extras = extras
				mem := &fixedMemory{got: make(chan memory.Request, 1), mc: mc}
				rec := &recorder{}
				base, served := startServedVera(t, up.srv.URL, func(s *Server) { s.Memory, s.Recorder = mem, rec })
				res, body := postChat(t, base, tc.path, tc.body, "X-OpenWebUI-User-Id", "alice")
				require.Equal(t, http.StatusOK, res.StatusCode, body)
				waitFor(t, served, "the handler to return")
				assert.Equal(t, "semantic=1; recent=1; rules=0; tokens=0", res.Header.Get("X-Vera-Context"))
				got := waitFor(t, mem.got, "the memory request")
				assert.Equal(t, "alice", got.Namespace)
				assert.Equal(t, memory.Message{Role: "system", Content: "be brief"}, got.Messages[0])
				assert.Equal(t, memory.Message{Role: "user", Content: tc.user}, got.Messages[len(got.Messages)-1])
				_, fwd := up.last()
				tc.check(t, fwd)
				turns := rec.all()
				require.Len(t, turns, 1, "the finished turn is stored: %s", body)
				assert.Equal(t, memory.Turn{Namespace: "alice", Model: "llama3.2", User: tc.user, Assistant: "Hello there.", Time: turns[0].Time, ID: turns[0].ID, Source: turns[0].Source}, turns[0],
					"no thinking, no tool call in the stored answer")
				src := turns[0].Source
				assert.Equal(t, memory.ViaChat, src.Via)
				assert.NotEmpty(t, src.Dialect)
				assert.Equal(t, "llama3.2", src.Model)
				assert.Equal(t, "Go-http-client/1.1", src.Client)
				assert.NotEmpty(t, src.RequestID)
			})
		}
	}
}

func jsonString(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var s string
	require.NoError(t, json.Unmarshal(raw, &s), "%s", raw)
	return s
}

// A stream cut before its final event stores nothing, and the client sees
// the cut.
func TestDialectsCutStreamStoresNothing(t *testing.T) {
	for _, tc := range []struct{ path, body string }{
		{"/v1/responses", `{"model":"llama3.2","stream":true,"input":"hi"}`},
		{"/v1/messages", `{"model":"llama3.2","stream":true,"max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`},
	} {
		t.Run(tc.path, func(t *testing.T) {
			up := newDialectUpstream(t)
			up.cut = true
			rec := &recorder{}
			base, served := startServedVera(t, up.srv.URL, func(s *Server) { s.Recorder = rec })
			res, err := http.Post(base+tc.path, "application/json", strings.NewReader(tc.body))
			require.NoError(t, err)
			b, err := io.ReadAll(res.Body)
			res.Body.Close()
			assert.Error(t, err, "the cut reaches the client: %s", b)
			waitFor(t, served, "the handler to return")
			assert.NotContains(t, string(b), "response.completed")
			assert.NotContains(t, string(b), "message_stop")
			assert.Empty(t, rec.all())
		})
	}
}

// The end of every dialect's answer (done:true, data: [DONE],
// response.completed, message_stop, a sized body's last byte) reaches the
// client only once the turn is committed.
func TestAnswerEndWaitsForTheCommit(t *testing.T) {
	for _, tc := range []struct{ name, path, body, end string }{
		{"chat ndjson", "/api/chat", hiChat, `"done":true`},
		{"chat object", "/api/chat", `{"model":"llama3.2","stream":false,"messages":[{"role":"user","content":"hi"}]}`, "}"},
		{"openai sse", "/v1/chat/completions", `{"model":"llama3.2","stream":true,"messages":[{"role":"user","content":"hi"}]}`, "data: [DONE]"},
		{"openai object", "/v1/chat/completions", `{"model":"llama3.2","messages":[{"role":"user","content":"hi"}]}`, "}"},
		{"generate", "/api/generate", `{"model":"llama3.2","prompt":"hi"}`, `"done":true`},
		{"responses stream", "/v1/responses", `{"model":"llama3.2","stream":true,"input":"hi"}`, `"type":"response.completed"`},
		{"responses object", "/v1/responses", `{"model":"llama3.2","input":"hi"}`, `"status":"completed"`},
		{"messages stream", "/v1/messages", `{"model":"llama3.2","stream":true,"max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`, `"type":"message_stop"`},
		{"messages object", "/v1/messages", `{"model":"llama3.2","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`, `"stop_reason":"end_turn"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := newDialectUpstream(t)
			rec := &recorder{gate: make(chan struct{})}
			base := startVera(t, up.srv.URL, func(s *Server) { s.Recorder = rec })
			res, err := http.Post(base+tc.path, "application/json", strings.NewReader(tc.body))
			require.NoError(t, err)
			defer res.Body.Close()
			got := make(chan string, 1)
			go func() {
				b, _ := io.ReadAll(res.Body)
				got <- string(b)
			}()
			select {
			case b := <-got:
				t.Fatalf("the answer ended before its turn was committed: %q", b)
			case <-time.After(300 * time.Millisecond):
			}
			assert.Empty(t, rec.all(), "not committed yet")
			close(rec.gate)
			body := waitFor(t, got, "the answer's end")
			assert.Contains(t, body, tc.end)
			require.Len(t, rec.all(), 1)
			assert.Equal(t, "hi", rec.all()[0].User)
			assert.Equal(t, "Hello there.", rec.all()[0].Assistant)
		})
	}
}

// An agent's tool loop on the Responses API sends only the outputs of the
// calls (OpenAI's own clients do so with previous_response_id). It is a
// request to answer, not a crash.
func TestResponsesToolOutputOnlyInput(t *testing.T) {
	for _, recordTasks := range []bool{false, true} {
		t.Run(fmt.Sprintf("RecordTasks=%v", recordTasks), func(t *testing.T) {
			up := newDialectUpstream(t)
			mem := &fixedMemory{got: make(chan memory.Request, 1), mc: memoryLayers(false)}
			rec := &recorder{}
			base := startVera(t, up.srv.URL, func(s *Server) { s.Memory, s.Recorder, s.RecordTasks = mem, rec, recordTasks })
			for _, body := range []string{
				`{"model":"llama3.2","previous_response_id":"resp_0","input":[{"type":"function_call_output","call_id":"c1","output":"42"}]}`,
				`{"model":"llama3.2","previous_response_id":"resp_0","input":[{"type":"item_reference","id":"msg_0"}]}`,
			} {
				res, got := postChat(t, base, "/v1/responses", body)
				assert.Equal(t, http.StatusOK, res.StatusCode, "%s: %s", body, got)
				_, fwd := up.last()
				assert.Equal(t, body, string(fwd), "forwarded as it came")
			}
			assert.Empty(t, rec.all(), "a tool output alone has no user text to store")
		})
	}
}

// A malformed body gets a 400 in the route's own shape, speaking of the
// request.
func TestDialectsMalformedBodyShapes(t *testing.T) {
	up := newDialectUpstream(t)
	rec := &recorder{}
	base := startVera(t, up.srv.URL, func(s *Server) { s.Recorder = rec })
	for _, tc := range []struct {
		path, body, want string
	}{
		{"/api/generate", `{"model":"m","prompt":5}`, `field "prompt": want a string, got number`},
		{"/api/generate", `{"model":"m","raw":"yes","prompt":"hi"}`, `field "raw"`},
		{"/api/generate", `{"model":"m",`, "JSON"},
		{"/api/generate", `[]`, "want an object, got array"},
		{"/api/generate", ``, "missing request body"},
		{"/v1/responses", `{"model":"m","input":5}`, `input`},
		{"/v1/responses", `{"model":"m","input":[5]}`, `input`},
		{"/v1/responses", `{"model":"m","input":[{"role":"user","content":5}]}`, `input[0].content`},
		{"/v1/responses", `{"model":"m","instructions":["x"]}`, `field "instructions"`},
		{"/v1/responses", `{"model":`, "JSON"},
		{"/v1/messages", `{"model":"m","messages":"hi"}`, `field "messages": want an array, got string`},
		{"/v1/messages", `{"model":"m","system":5,"messages":[]}`, `system`},
		{"/v1/messages", `{"model":"m","messages":[{"role":"user","content":5}]}`, `messages[0].content`},
		{"/v1/messages", `{"model":"m","messages":[{"role":"user","content":[5]}]}`, `messages[0].content`},
		{"/v1/messages", `{`, "JSON"},
	} {
		t.Run(tc.path+" "+tc.body, func(t *testing.T) {
			res, body := postChat(t, base, tc.path, tc.body)
			require.Equal(t, http.StatusBadRequest, res.StatusCode, body)
			assert.Contains(t, res.Header.Get("Content-Type"), "application/json")
			msg := errorMessage(t, tc.path, body)
			assert.Contains(t, msg, tc.want)
			for _, goism := range []string{"Go value", "Go struct", "proxy.", "json.RawMessage", "map[", "[]", "unmarshal"} {
				assert.NotContains(t, msg, goism)
			}
		})
	}
	assert.Empty(t, rec.all())

	// A bad header too.
	for _, path := range []string{"/api/generate", "/v1/responses", "/v1/messages"} {
		res, body := postChat(t, base, path, `{"model":"m"}`, "X-Vera-Memory", "perhaps")
		require.Equal(t, http.StatusBadRequest, res.StatusCode)
		assert.Contains(t, errorMessage(t, path, body), "X-Vera-Memory")
	}
}

// errorMessage checks an error body has the shape of path's dialect and
// returns its message.
func errorMessage(t *testing.T, path, body string) string {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(body), &m), body)
	switch path {
	case "/v1/messages":
		assert.Equal(t, "error", m["type"], body)
		e, ok := m["error"].(map[string]any)
		require.True(t, ok, body)
		assert.Equal(t, "invalid_request_error", e["type"], body)
		assert.Len(t, m, 2, body)
		msg, ok := e["message"].(string)
		require.True(t, ok, body)
		return msg
	case "/v1/responses":
		e, ok := m["error"].(map[string]any)
		require.True(t, ok, body)
		assert.Equal(t, "invalid_request_error", e["type"], body)
		assert.Len(t, m, 1, body)
		msg, ok := e["message"].(string)
		require.True(t, ok, body)
		return msg
	}
	assert.Len(t, m, 1, body)
	msg, ok := m["error"].(string)
	require.True(t, ok, body)
	return msg
}
