package proxy

import (
	"bytes"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/memory"
	"github.com/vera-proxy/vera/proxy/dialect"
)

var generateSeeds = []string{
	`{"model":"llama3.2","prompt":"hi"}`,
	generateFull,
	`{"model":"llama3.2","prompt":"hi","system":null,"context":null,"stream":null}`,
	`{"model":"llama3.2","prompt":"<|user|>hi","raw":true}`,
	`{"model":"codellama","prompt":"def f(","suffix":"  return x"}`,
	`{"model":"llama3.2","prompt":"and then?","context":[1,2,3]}`,
	`{"model":"llama3.2","prompt":"hi","context":[ ]}`,
	`{"model":"llama3.2","keep_alive":0}`,
	`{"model":"m","prompt":" "}`,
	`{"prompt":"\u00e9\ud83d\ude00","system":"<b>&</b>"}`,
	`{"model":1}`,
	`[]`,
	`null`,
	``,
}

var responsesSeeds = []string{
	`{"model":"llama3.2","input":"hi"}`,
	responsesFull,
	`{"model":"m","instructions":"x","input":[{"role":"user","content":[{"type":"input_text","text":"a"},{"type":"input_image","image_url":"u"}]}]}`,
	`{"model":"m","input":[{"type":"function_call_output","call_id":"c","output":"42"}]}`,
	`{"model":"m","input":[{"role":"system","content":"s"},{"role":"user","content":"u"}]}`,
	`{"model":"m","input":[]}`,
	`{"model":"m","input":null,"instructions":null,"stream":null}`,
	`{"model":"m","input":""}`,
	`{"model":"m","input":5}`,
	`{"model":"m","input":[{"role":"user","content":5}]}`,
	`{}`,
	``,
}

var messagesSeeds = []string{
	`{"model":"llama3.2","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`,
	messagesFull,
	`{"model":"m","system":"terse","messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image","source":{}}]}]}`,
	`{"model":"m","system":[{"type":"text","text":"a"},{"type":"text","text":"b","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":"q"}]}`,
	`{"model":"m","messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"x"}]}]}`,
	`{"model":"m","messages":[{"role":"user","content":"hi","extra":1}]}`,
	`{"model":"m","system":null,"messages":null,"stream":null}`,
	`{"model":"m","messages":[]}`,
	`{"model":"m","system":5,"messages":[]}`,
	`{}`,
	``,
}

// fuzzLayers is what a builder would inject into msgs: the caller's
// system kept first, a memory, and a recent pair.
func fuzzLayers(msgs []memory.Message) *memory.Context {
	mc := &memory.Context{
		System: "Memories:\nUser: my sister is Ann",
		Recent: []memory.Message{{Role: "user", Content: "earlier <q>"}, {Role: "assistant", Content: "yes & no"}},
	}
	if len(msgs) > 0 && msgs[0].Role == "system" {
		mc.SystemReplaces = 1
		if strings.TrimSpace(msgs[0].Content) != "" {
			mc.System = msgs[0].Content + "\n\n" + mc.System
		}
	}
	return mc
}

// checkParsed holds for every request a dialect parses: it re-encodes to
// JSON that parses again to the same conversation, every key of the body
// survives (bar the known ones a null or zero value may drop), a
// conversation has a user message last for memory to read, and the
// request rewritten with memory is still the same conversation.
func checkParsed(t *testing.T, d dialect.Dialect, body []byte, droppable func(key string, v json.RawMessage) bool) {
	req, err := d.Parse(body)
	if err != nil {
		for _, goism := range []string{"Go value", "Go struct", "proxy.", "json.RawMessage"} {
			assert.NotContains(t, err.Error(), goism)
		}
		return
	}
	out, err := json.Marshal(req)
	require.NoError(t, err)
	require.True(t, json.Valid(out), "%s", out)
	again, err := d.Parse(out)
	require.NoError(t, err, "the re-encoded request must parse: %s", out)
	out2, err := json.Marshal(again)
	require.NoError(t, err)
	assert.JSONEq(t, string(out), string(out2))
	assert.Equal(t, req.Conversation(), again.Conversation())
	assert.Equal(t, req.ModelName(), again.ModelName())

	var in, got map[string]json.RawMessage
	if json.Unmarshal(body, &in) == nil {
		require.NoError(t, json.Unmarshal(out, &got))
		for k, v := range in {
			if _, ok := got[k]; !ok && !droppable(k, v) {
				t.Errorf("key %q lost: %s", k, out)
			}
		}
	}

	if !req.Conversation() {
		return
	}
	msgs := req.MemoryMessages()
	assert.Equal(t, msgs, again.MemoryMessages())
	assert.Equal(t, req.LastUser(), again.LastUser())
	if len(msgs) == 0 {
		// Input items of roles memory does not read (Responses): decode
		// forwards the request untouched.
		return
	}
	for i, m := range msgs {
		if m.Role == "system" {
			assert.Zero(t, i, "only the leading message is the system layer")
		}
	}

	mc := fuzzLayers(msgs)
	rewritten := req.WithMemory(mc)
	require.NotNil(t, rewritten, "the recent pair changes the request")
	wb, err := json.Marshal(rewritten)
	require.NoError(t, err)
	require.True(t, json.Valid(wb))
	back, err := d.Parse(wb)
	require.NoError(t, err, "the rewritten request must parse: %s", wb)
	assert.True(t, back.Conversation())
	if slices.ContainsFunc(msgs, func(m memory.Message) bool { return m.Role == "user" && strings.TrimSpace(m.Content) != "" }) {
		// (Without a user text of its own, the recent pair's is last.)
		assert.Equal(t, req.LastUser(), back.LastUser())
	}
	assert.Equal(t, req.ModelName(), back.ModelName())
	assert.JSONEq(t, string(out), marshalOrFail(t, req), "withMemory leaves the parsed request as it was")
}

func marshalOrFail(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

// isNull reports whether v is JSON null.
func isNull(v json.RawMessage) bool { return string(bytes.TrimSpace(v)) == "null" }

func FuzzParseGenerateRequest(f *testing.F) {
	for _, s := range generateSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		checkParsed(t, ollamaGenerate, body, func(k string, v json.RawMessage) bool {
			switch k {
			case "stream", "context":
				return isNull(v)
			case "raw":
				return isNull(v) || string(bytes.TrimSpace(v)) == "false"
			case "suffix":
				return isNull(v) || string(bytes.TrimSpace(v)) == `""`
			}
			return false
		})
		req, err := dialect.ParseGenerateRequest(body)
		if err != nil || !req.Conversation() {
			return
		}
		assert.Equal(t, req.Prompt, req.LastUser())
		assert.NotEmpty(t, strings.TrimSpace(req.Prompt))
		assert.False(t, req.Raw)
		assert.Empty(t, req.Suffix)
	})
}

func FuzzParseResponsesRequest(f *testing.F) {
	for _, s := range responsesSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		checkParsed(t, openAIResponses, body, func(k string, v json.RawMessage) bool {
			return (k == "stream" || k == "input") && isNull(v)
		})
		req, err := dialect.ParseResponsesRequest(body)
		if err != nil || !req.Conversation() {
			return
		}
		// input goes out as it came, whatever memory adds.
		wb, err := json.Marshal(req.WithMemory(fuzzLayers(req.MemoryMessages())))
		require.NoError(t, err)
		var want, got bytes.Buffer
		require.NoError(t, json.Compact(&want, req.Input))
		require.NoError(t, json.Compact(&got, rawFieldOf(t, wb, "input")))
		assert.JSONEq(t, want.String(), got.String())
	})
}

func FuzzParseMessagesRequest(f *testing.F) {
	for _, s := range messagesSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		checkParsed(t, anthropicMessages, body, func(k string, v json.RawMessage) bool {
			return (k == "stream" || k == "system" || k == "messages") && isNull(v)
		})
		req, err := dialect.ParseMessagesRequest(body)
		if err != nil || !req.Conversation() {
			return
		}
		// The caller's messages follow the recent pair, each as it came.
		wb, err := json.Marshal(req.WithMemory(fuzzLayers(req.MemoryMessages())))
		require.NoError(t, err)
		var sent struct {
			Messages []json.RawMessage `json:"messages"`
		}
		require.NoError(t, json.Unmarshal(wb, &sent))
		var came struct {
			Messages []json.RawMessage `json:"messages"`
		}
		require.NoError(t, json.Unmarshal(body, &came))
		require.Len(t, sent.Messages, len(came.Messages)+2)
		for i, m := range came.Messages {
			assert.JSONEq(t, string(m), string(sent.Messages[2+i]), "the caller's message %d", i)
		}
	})
}

func rawFieldOf(t *testing.T, body []byte, key string) json.RawMessage {
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(body, &m))
	return m[key]
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
		tee := &answerTee{d: sd.d, onEnd: func(a string) { ends++; ended = a }}
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
