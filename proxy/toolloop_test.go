package proxy

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/dialect"
)

// toolCallAnswers are answers that call tools, in every dialect and shape:
// an agent's loop goes on after them, so none of them is a turn (the turn
// is stored once, with the answer that comes without tool calls).
var toolCallAnswers = []struct {
	name, ctype string
	d           dialect.Dialect
	body        string
}{
	{"ollama stream", "application/x-ndjson", ollamaChat,
		`{"message":{"role":"assistant","content":"Let me look."},"done":false}` + "\n" +
			`{"message":{"role":"assistant","content":"","tool_calls":[{"function":{"name":"weather","arguments":{"city":"Lisbon"}}}]},"done":false}` + "\n" +
			`{"message":{"role":"assistant","content":""},"done":true,"done_reason":"stop"}` + "\n"},
	{"ollama object", "application/json", ollamaChat,
		`{"message":{"role":"assistant","content":"Let me look.","tool_calls":[{"function":{"name":"weather","arguments":{}}}]},"done":true}`},
	{"openai stream", "text/event-stream", openAIChat,
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Let me look.\"}}]}\n\n" +
			"data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":\"weather\",\"arguments\":\"{}\"}}]}}]}\n\n" +
			"data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n"},
	{"openai object", "application/json", openAIChat,
		`{"choices":[{"index":0,"message":{"role":"assistant","content":"Let me look.","tool_calls":[{"id":"c1","type":"function","function":{"name":"weather","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}`},
	{"responses stream", "text/event-stream", openAIResponses,
		"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"output_index\":0,\"delta\":\"Let me look.\"}\n\n" +
			"event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"output_index\":1,\"item\":{\"type\":\"function_call\",\"call_id\":\"c1\",\"name\":\"weather\",\"arguments\":\"\"}}\n\n" +
			"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"status\":\"completed\"}}\n\n"},
	{"responses object", "application/json", openAIResponses,
		`{"status":"completed","output":[{"type":"message","content":[{"type":"output_text","text":"Let me look."}]},{"type":"function_call","call_id":"c1","name":"weather","arguments":"{}"}]}`},
	{"messages stream", "text/event-stream", anthropicMessages,
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Let me look.\"}}\n\n" +
			"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t1\",\"name\":\"weather\",\"input\":{}}}\n\n" +
			"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"}}\n\n" +
			"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"},
	{"messages object", "application/json", anthropicMessages,
		`{"type":"message","role":"assistant","content":[{"type":"text","text":"Let me look."},{"type":"tool_use","id":"t1","name":"weather","input":{}}],"stop_reason":"tool_use"}`},
}

func TestToolCallAnswersAreNotTurns(t *testing.T) {
	for _, tc := range toolCallAnswers {
		t.Run(tc.name, func(t *testing.T) {
			ends := 0
			tee := &answerTee{d: tc.d, onEnd: onAnswer(func(string) { ends++ })}
			res := &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {tc.ctype}}}
			b, err := io.ReadAll(tee.wrap(res, io.NopCloser(strings.NewReader(tc.body))))
			require.NoError(t, err)
			assert.Equal(t, tc.body, string(b), "the answer reaches the client whole")
			assert.Zero(t, ends, "an answer that calls tools is not stored")
			_, ok := tee.Captured()
			assert.False(t, ok)
		})
	}
}

// Through a tool loop on /api/chat: the step that calls a tool stores
// nothing, and the answer that ends the loop is stored once, with the
// question that started it.
func TestToolLoopStoredOnceWithTheFinalAnswer(t *testing.T) {
	up := newFakeOllama(t)
	rec := &recorder{}
	base := startVera(t, up.srv.URL, func(s *Server) { s.Recorder = rec })
	orig := up.srv.Config.Handler
	step := 0
	up.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/chat" {
			orig.ServeHTTP(w, r)
			return
		}
		_, _ = io.ReadAll(r.Body)
		step++
		w.Header().Set("Content-Type", "application/x-ndjson")
		if step == 1 {
			io.WriteString(w, toolCallAnswers[0].body)
			return
		}
		io.WriteString(w, `{"message":{"role":"assistant","content":"It is 21C in Lisbon."},"done":false}`+"\n"+`{"message":{"role":"assistant","content":""},"done":true}`+"\n")
	})
	res, _ := postChat(t, base, "/api/chat", `{"model":"llama3.2","messages":[{"role":"user","content":"weather in Lisbon?"}]}`)
	require.Equal(t, http.StatusOK, res.StatusCode)
	assert.Empty(t, rec.all(), "the tool call is not a turn")
	res, _ = postChat(t, base, "/api/chat", `{"model":"llama3.2","messages":[{"role":"user","content":"weather in Lisbon?"},`+
		`{"role":"assistant","content":"Let me look.","tool_calls":[{"function":{"name":"weather","arguments":{"city":"Lisbon"}}}]},`+
		`{"role":"tool","content":"21C"}]}`)
	require.Equal(t, http.StatusOK, res.StatusCode)
	turns := rec.all()
	require.Len(t, turns, 1, "one turn for the whole loop")
	assert.Equal(t, "weather in Lisbon?", turns[0].User)
	assert.Equal(t, "It is 21C in Lisbon.", turns[0].Assistant)
}
