package proxy

import (
	"bytes"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/dialect"
)

func FuzzAnswerTee(f *testing.F) {
	f.Add([]byte("{\"message\":{\"content\":\"He\"},\"done\":false}\n{\"message\":{\"content\":\"llo\",\"thinking\":\"x\"},\"done\":false}\n{\"done\":true}\n"), uint16(7), true)
	f.Add([]byte(`{"message":{"role":"assistant","content":"Hello"},"done":true}`), uint16(3), false)
	f.Add([]byte("{\"message\":{\"content\":\"a\"}}\n{\"error\":\"boom\"}\n"), uint16(30), true)
	f.Add([]byte("not json\n"), uint16(1), true)
	f.Add([]byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\n: keep-alive\n\ndata: [DONE]\n\n"), uint16(9), true)
	f.Add([]byte("data: {\"choices\":\r\ndata: []}\r\n\r\n"), uint16(4), true)
	f.Add([]byte(`{"choices":[{"index":0,"message":{"content":"Hi"}}]}`), uint16(2), false)
	f.Fuzz(func(t *testing.T, body []byte, split uint16, stream bool) {
		// Both formats share the flag: OpenAI's when the body looks like SSE
		// or a completion object.
		openai := bytes.Contains(body, []byte("data:")) || bytes.Contains(body, []byte("choices"))
		whole := &answerTee{stream: stream, d: dialectFor(openai)}
		whole.Write(body)
		whole.finish()

		cut := int(split) % (len(body) + 1)
		parts := &answerTee{stream: stream, d: dialectFor(openai)}
		parts.Write(body[:cut])
		parts.Write(body[cut:])
		parts.finish()

		// However the bytes arrive, the tee sees the same answer.
		a1, ok1 := whole.Captured()
		a2, ok2 := parts.Captured()
		assert.Equal(t, a1, a2)
		assert.Equal(t, ok1, ok2)
	})
}

func TestAnswerTee(t *testing.T) {
	tests := []struct {
		name   string
		stream bool
		body   string
		want   string
		ok     bool
		openai bool
	}{
		{"stream", true, "{\"message\":{\"content\":\"He\"},\"done\":false}\n{\"message\":{\"content\":\"llo\"},\"done\":false}\n{\"message\":{\"content\":\"\"},\"done\":true}\n", "Hello", true, false},
		{"thinking apart", true, "{\"message\":{\"thinking\":\"hmm\",\"content\":\"\"}}\n{\"message\":{\"content\":\"Yes\"}}\n{\"done\":true}\n", "Yes", true, false},
		{"tool calls: the loop goes on, not a turn", true, "{\"message\":{\"content\":\"Let me look.\",\"tool_calls\":[{\"function\":{\"name\":\"w\",\"arguments\":{}}}]}}\n{\"done\":true}\n", "Let me look.", false, false},
		{"last line without newline", true, "{\"message\":{\"content\":\"a\"}}\n{\"done\":true}", "a", true, false},
		{"no done", true, "{\"message\":{\"content\":\"a\"}}\n", "a", false, false},
		{"error record", true, "{\"message\":{\"content\":\"a\"}}\n{\"error\":\"runner died\"}\n", "a", false, false},
		{"garbage line", true, "{\"message\":{\"content\":\"a\"}}\nxx\n{\"done\":true}\n", "a", false, false},
		{"record after done", true, "{\"message\":{\"content\":\"a\"},\"done\":true}\n{\"message\":{\"content\":\"b\"}}\n", "a", false, false},
		{"empty answer", true, "{\"message\":{\"content\":\"  \"},\"done\":true}\n", "  ", false, false},
		{"single object", false, `{"message":{"role":"assistant","content":"Hi there"},"done":true}`, "Hi there", true, false},
		{"empty body", false, ``, "", false, false},

		// OpenAI's /v1/chat/completions.
		{"sse", true, "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"He\"}}]}\n\ndata: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"llo\"}}]}\n\ndata: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n", "Hello", true, true},
		{"sse crlf, comments, event fields, usage chunk", true, ": OPENROUTER PROCESSING\r\n\r\nevent: message\r\nid: 1\r\ndata:{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\r\n\r\ndata: {\"choices\":[],\"usage\":{\"total_tokens\":3}}\r\n\r\ndata: [DONE]", "Hi", true, true},
		{"sse data split over lines", true, "data: {\"choices\":[{\"index\":0,\ndata: \"delta\":{\"content\":\"Hi\"}}]}\n\ndata: [DONE]\n\n", "Hi", true, true},
		{"sse second choice ignored", true, "data: {\"choices\":[{\"index\":1,\"delta\":{\"content\":\"B\"}},{\"index\":0,\"delta\":{\"content\":\"A\"}}]}\n\ndata: [DONE]\n\n", "A", true, true},
		{"sse reasoning apart", true, "data: {\"choices\":[{\"index\":0,\"delta\":{\"reasoning\":\"hmm\",\"content\":\"\"}}]}\n\ndata: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Yes\"}}]}\n\ndata: [DONE]\n\n", "Yes", true, true},
		{"sse without done", true, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\n\n", "a", false, true},
		{"sse error event", true, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\n\ndata: {\"error\":{\"message\":\"boom\",\"type\":\"api_error\"}}\n\ndata: [DONE]\n\n", "a", false, true},
		{"sse garbage", true, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\n\ndata: nope\n\ndata: [DONE]\n\n", "a", false, true},
		{"sse event after done", true, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\n\ndata: [DONE]\n\ndata: {\"choices\":[]}\n\n", "a", false, true},
		{"openai object", false, `{"id":"x","choices":[{"index":0,"message":{"role":"assistant","content":"Hi there"},"finish_reason":"stop"}]}`, "Hi there", true, true},
		{"openai object with tool calls only", false, `{"choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{}]}}]}`, "", false, true},
		{"openai error object", false, `{"error":{"message":"boom"}}`, "", false, true},
		{"openai object null error", false, `{"error":null,"choices":[{"index":0,"message":{"content":"ok"}}]}`, "ok", true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tee := &answerTee{stream: tt.stream, d: dialectFor(tt.openai)}
			for i := 0; i < len(tt.body); i += 5 { // arrive in small pieces
				tee.Write([]byte(tt.body[i:min(i+5, len(tt.body))]))
			}
			tee.finish()
			got, ok := tee.Captured()
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.ok, ok)
		})
	}
}

// dialectFor is OpenAI's chat dialect with openai set, else Ollama's.
func dialectFor(openai bool) dialect.Dialect {
	if openai {
		return openAIChat
	}
	return ollamaChat
}

// teeAnswer feeds body to a tee of dialect d in small pieces.
func teeAnswer(d dialect.Dialect, stream bool, body string) (string, bool) {
	tee := &answerTee{d: d, stream: stream}
	for i := 0; i < len(body); i += 5 {
		tee.Write([]byte(body[i:min(i+5, len(body))]))
	}
	tee.finish()
	return tee.Captured()
}

// dropEvents removes the events whose type is one of types.
func dropEvents(stream string, types ...string) string {
	var b strings.Builder
	for _, e := range strings.SplitAfter(stream, "\n\n") {
		keep := true
		for _, typ := range types {
			if strings.HasPrefix(e, "event: "+typ+"\n") {
				keep = false
			}
		}
		if keep {
			b.WriteString(e)
		}
	}
	return b.String()
}

// insertBefore puts ev before the first event of type typ.
func insertBefore(stream, typ, ev string) string {
	i := strings.Index(stream, "event: "+typ+"\n")
	return stream[:i] + ev + stream[i:]
}

func TestResponsesTee(t *testing.T) {
	clean := responsesStream(false, "Hel", "lo")
	completed := sseEvent("response.completed", map[string]any{"response": map[string]any{"status": "completed"}})
	for _, tc := range []struct {
		name, body string
		stream     bool
		want       string
		ok         bool
	}{
		{"stream", clean, true, "Hello", true},
		{"reasoning and function call apart", responsesStream(true, "Hel", "lo"), true, "Hello", true},
		{"crlf", strings.ReplaceAll(clean, "\n", "\r\n"), true, "Hello", true},
		{"comments and no event lines", ": keep-alive\n\n" + strings.ReplaceAll(clean, "event: ", ": event "), true, "Hello", true},
		{"last event without its blank line", strings.TrimSuffix(clean, "\n\n"), true, "Hello", true},
		{"no response.completed", dropEvents(clean, "response.completed"), true, "Hello", false},
		{"cut in the final event", clean[:len(clean)-20], true, "Hello", false},
		{"cut mid-stream", clean[:strings.Index(clean, `"delta":"lo"`)], true, "Hel", false},
		{"completed only named in the text", dropEvents(responsesStream(false, `"response.completed"`), "response.completed"), true, `"response.completed"`, false},
		{"error event", insertBefore(clean, "response.completed", sseEvent("error", map[string]any{"code": "server_error", "message": "boom", "param": nil})), true, "Hello", false},
		{"response.failed", dropEvents(clean, "response.completed") +
			sseEvent("response.failed", map[string]any{"response": map[string]any{"status": "failed", "error": map[string]any{"code": "server_error", "message": "boom"}}}), true, "Hello", false},
		{"response.incomplete", dropEvents(clean, "response.completed") +
			sseEvent("response.incomplete", map[string]any{"response": map[string]any{"status": "incomplete", "incomplete_details": map[string]any{"reason": "max_output_tokens"}}}), true, "Hello", false},
		{"garbage", insertBefore(clean, "response.completed", "data: nope\n\n"), true, "Hello", false},
		{"event after completed", clean + sseEvent("response.output_text.delta", map[string]any{"delta": "!"}), true, "Hello", false},
		{"completed twice", clean + completed, true, "Hello", false},
		{"[DONE] after completed", clean + "data: [DONE]\n\n", true, "Hello", false},
		{"empty answer", responsesStream(false), true, "", false},
		{"blank answer", responsesStream(false, " \n"), true, " \n", false},

		{"object", responsesObject(false, "Hello there."), false, "Hello there.", true},
		{"object with reasoning and a call", responsesObject(true, "Hello there."), false, "Hello there.", true},
		{"object of two parts", `{"status":"completed","output":[{"type":"message","content":[{"type":"output_text","text":"a"},{"type":"refusal","refusal":"no"},{"type":"output_text","text":"b"}]}]}`, false, "ab", true},
		{"object failed", `{"status":"failed","error":{"code":"server_error","message":"boom"},"output":[]}`, false, "", false},
		{"object incomplete", `{"status":"incomplete","error":null,"output":[{"type":"message","content":[{"type":"output_text","text":"Hel"}]}]}`, false, "", false},
		{"object with only a call", `{"status":"completed","error":null,"output":[{"type":"function_call","call_id":"c","name":"f","arguments":"{}"}]}`, false, "", false},
		{"object error", `{"error":{"message":"boom","type":"api_error"}}`, false, "", false},
		{"object garbage", `{"status":"completed","output":[`, false, "", false},
		{"empty object", ``, false, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := teeAnswer(openAIResponses, tc.stream, tc.body)
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.ok, ok)
		})
	}
}

func TestMessagesTee(t *testing.T) {
	clean := messagesStream(false, "Hel", "lo")
	for _, tc := range []struct {
		name, body string
		stream     bool
		want       string
		ok         bool
	}{
		{"stream", clean, true, "Hello", true},
		{"thinking and tool_use apart", messagesStream(true, "Hel", "lo"), true, "Hello", true},
		{"crlf", strings.ReplaceAll(clean, "\n", "\r\n"), true, "Hello", true},
		{"last event without its blank line", strings.TrimSuffix(clean, "\n\n"), true, "Hello", true},
		{"two text blocks", insertBefore(clean, "message_delta",
			sseEvent("content_block_start", map[string]any{"index": 1, "content_block": map[string]any{"type": "text", "text": ""}})+
				sseEvent("content_block_delta", map[string]any{"index": 1, "delta": map[string]any{"type": "text_delta", "text": " again"}})+
				sseEvent("content_block_stop", map[string]any{"index": 1})), true, "Hello again", true},
		{"no message_stop", dropEvents(clean, "message_stop"), true, "Hello", false},
		{"cut in the final event", clean[:len(clean)-8], true, "Hello", false},
		{"cut mid-stream", clean[:strings.Index(clean, `"text":"lo"`)], true, "Hel", false},
		{"message_stop only named in the text", dropEvents(messagesStream(false, `"message_stop"`), "message_stop"), true, `"message_stop"`, false},
		{"error event", insertBefore(clean, "message_delta", sseEvent("error", map[string]any{"error": map[string]any{"type": "overloaded_error", "message": "Overloaded"}})), true, "Hello", false},
		{"garbage", insertBefore(clean, "message_stop", "data: {nope\n\n"), true, "Hello", false},
		{"event after message_stop", clean + sseEvent("ping", map[string]any{}), true, "Hello", false},
		{"thinking only", dropEvents(messagesStream(true), "content_block_start", "content_block_stop"), true, "", false},
		{"empty answer", messagesStream(false), true, "", false},

		{"object", messagesObject(false, "Hello there."), false, "Hello there.", true},
		{"object with thinking and tool_use", messagesObject(true, "Hello there."), false, "Hello there.", true},
		{"object of tool_use only", `{"type":"message","role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":{}}],"stop_reason":"tool_use"}`, false, "", false},
		{"object error", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, false, "", false},
		{"object garbage", `{"type":"message","content":[`, false, "", false},
		{"empty object", ``, false, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := teeAnswer(anthropicMessages, tc.stream, tc.body)
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.ok, ok)
		})
	}
}

// The content type decides whether the answer is read as a stream, and an
// error status is never captured.
func TestDialectTeeWrap(t *testing.T) {
	for _, tc := range []struct {
		d      dialect.Dialect
		stream string
		object string
	}{
		{openAIResponses, responsesStream(false, "Hi"), responsesObject(false, "Hi")},
		{anthropicMessages, messagesStream(false, "Hi"), messagesObject(false, "Hi")},
	} {
		t.Run(tc.d.String(), func(t *testing.T) {
			for _, c := range []struct {
				ctype, body string
				status      int
				ok          bool
			}{
				{"text/event-stream; charset=utf-8", tc.stream, 200, true},
				{"application/json", tc.object, 200, true},
				{"application/json", tc.stream, 200, false},
				{"text/event-stream", tc.stream, 500, false},
			} {
				tee := &answerTee{d: tc.d}
				res := &http.Response{StatusCode: c.status, Header: http.Header{"Content-Type": {c.ctype}}}
				b, err := io.ReadAll(tee.wrap(res, io.NopCloser(strings.NewReader(c.body))))
				require.NoError(t, err)
				assert.Equal(t, c.body, string(b), "the client gets every byte as it came")
				got, ok := tee.Captured()
				assert.Equal(t, c.ok, ok, "%s %d", c.ctype, c.status)
				if ok {
					assert.Equal(t, "Hi", got)
				}
			}
		})
	}
}

// An event's data may come in several data lines (the SSE spec joins
// them with a newline). A final event written so is still the answer's end:
// the answer it completes is committed, like any other.
func TestDialectTeeFinalEventOverSeveralDataLines(t *testing.T) {
	for _, tc := range []struct {
		d    dialect.Dialect
		body string
	}{
		{openAIChat, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\ndata:\ndata: [DONE]\n\n"},
		{openAIResponses, "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"Hi\"}\n\n" +
			"event: response.completed\ndata: {\"type\":\ndata: \"response.completed\",\"response\":{\"status\":\"completed\"}}\n\n"},
		{anthropicMessages, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n" +
			"event: message_stop\ndata:\ndata: {\"type\":\"message_stop\"}\n\n"},
	} {
		t.Run(tc.d.String(), func(t *testing.T) {
			var committed []string
			tee := &answerTee{d: tc.d, onEnd: onAnswer(func(a string) { committed = append(committed, a) })}
			res := &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}}}
			b, err := io.ReadAll(tee.wrap(res, io.NopCloser(strings.NewReader(tc.body))))
			require.NoError(t, err)
			assert.Equal(t, tc.body, string(b))
			answer, ok := tee.Captured()
			require.True(t, ok, "the tee takes the answer for complete")
			assert.Equal(t, "Hi", answer)
			assert.Equal(t, []string{"Hi"}, committed, "so its turn is committed before the end goes out")
		})
	}
}

// A non-streamed answer read a byte at a time: once its end has been
// given out, the tee must not take the upstream's second io.EOF for the
// end of another, empty object.
func TestDialectTeeObjectReadInSmallPieces(t *testing.T) {
	for _, tc := range []struct {
		d    dialect.Dialect
		body string
	}{
		{ollamaChat, `{"message":{"role":"assistant","content":"Hello"},"done":true}`},
		{openAIChat, `{"choices":[{"index":0,"message":{"role":"assistant","content":"Hello"}}]}`},
		{openAIResponses, responsesObject(false, "Hello")},
		{anthropicMessages, messagesObject(false, "Hello")},
	} {
		t.Run(tc.d.String(), func(t *testing.T) {
			ends := 0
			tee := &answerTee{d: tc.d, onEnd: onAnswer(func(string) { ends++ })}
			res := &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}}}
			b, err := io.ReadAll(iotest.OneByteReader(tee.wrap(res, io.NopCloser(strings.NewReader(tc.body)))))
			require.NoError(t, err)
			assert.Equal(t, tc.body, string(b))
			assert.Equal(t, 1, ends)
			answer, ok := tee.Captured()
			assert.Equal(t, "Hello", answer)
			assert.True(t, ok, "the answer read in small pieces is complete")
		})
	}
}

// sseDialects are the dialects whose streams are Server-Sent Events, with
// the text of their final record.
var sseDialects = []struct {
	d     dialect.Dialect
	final string
}{
	{openAIChat, "[DONE]"},
	{openAIResponses, "response.completed"},
	{anthropicMessages, "message_stop"},
}

func FuzzDialectTee(f *testing.F) {
	f.Add([]byte(responsesStream(true, "Hel", "lo")), uint16(7), uint8(1), true)
	f.Add([]byte(messagesStream(true, "Hel", "lo")), uint16(9), uint8(2), true)
	f.Add([]byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\ndata: [DONE]\n\n"), uint16(3), uint8(0), true)
	f.Add([]byte(responsesObject(true, "Hello")), uint16(11), uint8(1), false)
	f.Add([]byte(messagesObject(true, "Hello")), uint16(5), uint8(2), false)
	f.Add([]byte("event: response.output_text.delta\r\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"a\"}\r\n\r\nevent: error\r\ndata: {\"type\":\"error\"}\r\n\r\n"), uint16(2), uint8(1), true)
	f.Add([]byte("data: {\"type\":\"message_stop\"}\n\ndata: {\"type\":\"ping\"}\n\n"), uint16(1), uint8(2), true)
	f.Add([]byte("data: {\"type\":\ndata: \"message_stop\"}\n\n"), uint16(4), uint8(2), true)
	f.Fuzz(func(t *testing.T, body []byte, split uint16, which uint8, stream bool) {
		sd := sseDialects[int(which)%len(sseDialects)]

		whole := &answerTee{d: sd.d, stream: stream}
		whole.Write(body)
		whole.finish()
		cut := int(split) % (len(body) + 1)
		parts := &answerTee{d: sd.d, stream: stream}
		parts.Write(body[:cut])
		parts.Write(body[cut:])
		parts.finish()

		// However the bytes arrive, the tee sees the same answer.
		a1, ok1 := whole.Captured()
		a2, ok2 := parts.Captured()
		assert.Equal(t, a1, a2)
		assert.Equal(t, ok1, ok2)
		// A complete answer only once the final record came.
		if ok1 {
			assert.True(t, whole.Done)
			assert.NotEmpty(t, strings.TrimSpace(a1))
			if stream {
				assert.Contains(t, string(body), sd.final)
			}
		}

		// Through the held end, with random chunking: every byte once, in
		// order, and onEnd at most once, with a non-empty answer.
		ctype := "application/json"
		if stream {
			ctype = "text/event-stream"
		}
		rng := rand.New(rand.NewPCG(uint64(split), uint64(which)))
		ends := 0
		var ended string
		tee := &answerTee{d: sd.d, onEnd: onAnswer(func(a string) { ends++; ended = a })}
		res := &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {ctype}}}
		rd := tee.wrap(res, &chunky{data: bytes.Clone(body), rng: rng})
		var out bytes.Buffer
		for range 4*len(body) + 16 {
			p := make([]byte, 1+rng.IntN(8))
			n, err := rd.Read(p)
			out.Write(p[:n])
			if err == io.EOF {
				break
			}
			require.NoError(t, err)
		}
		require.Equal(t, string(body), out.String(), "every byte once, in order")
		assert.LessOrEqual(t, ends, 1)
		if ends == 1 {
			assert.NotEmpty(t, strings.TrimSpace(ended))
		}
		if ok1 {
			assert.Equal(t, 1, ends, "a complete answer is committed")
			assert.Equal(t, a1, ended)
		}
	})
}

// onAnswer is an answerEnd that hears the answer a turn would be stored
// with (turnAnswer): none for a tool call or an empty answer.
type onAnswer func(answer string)

func (f onAnswer) answered(a *dialect.Answer) {
	if text, ok := turnAnswer(a); ok {
		f(text)
	}
}
