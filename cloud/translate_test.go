package cloud

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTranslateChatRequest(t *testing.T) {
	body := `{"model":"big","stream":false,"think":"high","format":{"type":"object"},
		"options":{"temperature":0.2,"top_p":0.9,"num_predict":100,"stop":["\n\n"],"seed":7,"top_k":40,"num_ctx":8192},
		"tools":[{"type":"function","function":{"name":"weather","parameters":{"type":"object"}}}],
		"messages":[
			{"role":"system","content":"be brief"},
			{"role":"user","content":"what is this?","images":["iVBORw0KGgo="]},
			{"role":"assistant","content":"","tool_calls":[{"function":{"name":"weather","arguments":{"city":"Lisbon"}}}]},
			{"role":"tool","content":"21C","tool_name":"weather"}]}`
	req, err := translateChat([]byte(body), "provider/big-model", false, false)
	require.NoError(t, err)
	assert.False(t, req.stream)
	var got map[string]any
	require.NoError(t, json.Unmarshal(req.body, &got))
	assert.Equal(t, "provider/big-model", got["model"])
	assert.Equal(t, 0.2, got["temperature"])
	assert.Equal(t, 0.9, got["top_p"])
	assert.Equal(t, 100.0, got["max_tokens"])
	assert.Equal(t, []any{"\n\n"}, got["stop"])
	assert.Equal(t, 7.0, got["seed"])
	assert.Equal(t, "high", got["reasoning_effort"])
	assert.NotContains(t, got, "top_k", "no equivalent: left out")
	assert.Equal(t, "json_schema", got["response_format"].(map[string]any)["type"])
	assert.Len(t, got["tools"], 1)
	msgs := got["messages"].([]any)
	require.Len(t, msgs, 4)
	parts := msgs[1].(map[string]any)["content"].([]any)
	assert.Equal(t, "what is this?", parts[0].(map[string]any)["text"])
	assert.Equal(t, "data:image/png;base64,iVBORw0KGgo=", parts[1].(map[string]any)["image_url"].(map[string]any)["url"])
	call := msgs[2].(map[string]any)["tool_calls"].([]any)[0].(map[string]any)
	assert.Equal(t, `{"city":"Lisbon"}`, call["function"].(map[string]any)["arguments"], "arguments go as JSON text")
	assert.Nil(t, msgs[2].(map[string]any)["content"])
	assert.Equal(t, call["id"], msgs[3].(map[string]any)["tool_call_id"], "the result answers the call")

	gen, err := translateChat([]byte(`{"model":"big","prompt":"hi","system":"be brief","format":"json","think":true}`), "m", true, false)
	require.NoError(t, err)
	assert.True(t, gen.stream, "Ollama streams unless told not to")
	require.NoError(t, json.Unmarshal(gen.body, &got))
	assert.Equal(t, []any{map[string]any{"role": "system", "content": "be brief"}, map[string]any{"role": "user", "content": "hi"}}, got["messages"])
	assert.Equal(t, map[string]any{"type": "json_object"}, got["response_format"])
	assert.Equal(t, "medium", got["reasoning_effort"])
	assert.Equal(t, map[string]any{"include_usage": true}, got["stream_options"])

	for _, bad := range []string{`{"model":"m","messages":[{"role":"wizard","content":"x"}]}`, `{"model":"m","format":42,"messages":[]}`, `not json`} {
		_, err := translateChat([]byte(bad), "m", false, false)
		assert.Error(t, err, bad)
	}
}

// What real providers refuse: a tool without parameters as Ollama's Go
// client writes it, a tool result that answers no call, max_tokens on
// OpenAI's reasoning models. Roles are read as Ollama reads them.
func TestTranslateWhatProvidersRefuse(t *testing.T) {
	body := `{"model":"big","options":{"num_predict":50},
		"tools":[{"type":"function","function":{"name":"now","parameters":{"type":"object","properties":null}}},{"type":"function","function":{"name":"bare"}}],
		"messages":[
			{"role":"User","content":"time?"},
			{"role":"assistant","content":"","tool_calls":[{"id":"a1","function":{"name":"now","arguments":{}}},{"id":"a2","function":{"name":"now","arguments":{}}}]},
			{"role":"tool","content":"second","tool_call_id":"a2"},
			{"role":"tool","content":"first","tool_name":"now"},
			{"role":"tool","content":"stray","tool_name":"now"}]}`
	req, err := translateChat([]byte(body), "o3", false, true)
	require.NoError(t, err)
	var got map[string]any
	require.NoError(t, json.Unmarshal(req.body, &got))
	assert.Equal(t, 50.0, got["max_completion_tokens"])
	assert.NotContains(t, got, "max_tokens")
	tools := got["tools"].([]any)
	assert.Equal(t, map[string]any{}, tools[0].(map[string]any)["function"].(map[string]any)["parameters"].(map[string]any)["properties"])
	assert.Equal(t, map[string]any{"type": "object", "properties": map[string]any{}}, tools[1].(map[string]any)["function"].(map[string]any)["parameters"])
	msgs := got["messages"].([]any)
	assert.Equal(t, "user", msgs[0].(map[string]any)["role"])
	assert.Equal(t, "a2", msgs[2].(map[string]any)["tool_call_id"], "an explicit id answers its call")
	assert.Equal(t, "a1", msgs[3].(map[string]any)["tool_call_id"], "then the first call left")
	assert.Equal(t, map[string]any{"role": "user", "content": "Tool result (now): stray"}, msgs[4], "a result that answers no call")
}

// sseAnswer is a provider's stream: a comment, thinking, text split
// mid-word and mid-rune (the rune in its own two writes), a tool call in
// pieces, usage in the last chunk, then [DONE].
var sseAnswer = []string{
	": OPENROUTER PROCESSING\n\n",
	`data: {"choices":[{"index":0,"delta":{"role":"assistant","reasoning":"Let me th"}}]}` + "\n\n",
	`data: {"choices":[{"index":0,"delta":{"reasoning_content":"ink."}}]}` + "\n\n",
	`data: {"choices":[{"index":0,"delta":{"content":"Bom d"}}]}` + "\n\n",
	`data: {"choices":[{"index":0,"delta":{"content":"ia, caf` + "\xc3", "\xa9" + `!"}}]}` + "\r\n\r\n",
	`data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_9","type":"function","function":{"name":"weather","arguments":"{\"ci"}}]}}]}` + "\n\n",
	`data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"ty\": \"Lisbon\"}"}}]}}]}` + "\n\n",
	`data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":12,"completion_tokens":7}}` + "\n\n",
	"data: [DONE]\n\n",
}

// chunked reads its pieces one per Read, as a network delivers them.
type chunked struct{ pieces []string }

func (c *chunked) Read(p []byte) (int, error) {
	if len(c.pieces) == 0 {
		return 0, io.EOF
	}
	n := copy(p, c.pieces[0])
	c.pieces[0] = c.pieces[0][n:]
	if c.pieces[0] == "" {
		c.pieces = c.pieces[1:]
	}
	return n, nil
}

func (c *chunked) Close() error { return nil }

func testAnswer(generate bool) *answer {
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	n := 0
	return &answer{model: "big", generate: generate, start: t0, now: func() time.Time { n++; return t0.Add(time.Duration(n) * time.Millisecond) }}
}

type ollamaRecord struct {
	Message struct {
		Content   string `json:"content"`
		Thinking  string `json:"thinking"`
		ToolCalls []struct {
			ID       string `json:"id"`
			Function struct {
				Name      string         `json:"name"`
				Arguments map[string]any `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
	} `json:"message"`
	Done            bool   `json:"done"`
	DoneReason      string `json:"done_reason"`
	PromptEvalCount int    `json:"prompt_eval_count"`
	EvalCount       int    `json:"eval_count"`
	Error           string `json:"error"`
	Model           string `json:"model"`
}

func readRecords(t *testing.T, r io.Reader) ([]ollamaRecord, error) {
	t.Helper()
	var out []ollamaRecord
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		var rec ollamaRecord
		require.NoError(t, json.Unmarshal(sc.Bytes(), &rec), sc.Text())
		out = append(out, rec)
	}
	return out, sc.Err()
}

func TestStreamBecomesNDJSON(t *testing.T) {
	recs, err := readRecords(t, newNDJSON(&chunked{pieces: append([]string(nil), sseAnswer...)}, testAnswer(false), "prov.example", nil))
	require.NoError(t, err)
	var text, thinking strings.Builder
	for _, r := range recs {
		text.WriteString(r.Message.Content)
		thinking.WriteString(r.Message.Thinking)
		assert.Equal(t, "big", r.Model, "the name the client asked for")
	}
	assert.Equal(t, "Bom dia, café!", text.String())
	assert.Equal(t, "Let me think.", thinking.String())
	last := recs[len(recs)-1]
	assert.True(t, last.Done)
	assert.Equal(t, "stop", last.DoneReason)
	assert.Equal(t, 12, last.PromptEvalCount)
	assert.Equal(t, 7, last.EvalCount)
	calls := recs[len(recs)-2].Message.ToolCalls
	require.Len(t, calls, 1)
	assert.Equal(t, "weather", calls[0].Function.Name)
	assert.Equal(t, map[string]any{"city": "Lisbon"}, calls[0].Function.Arguments, "assembled from its pieces")
	assert.Equal(t, "call_9", calls[0].ID)
}

func TestStreamFailures(t *testing.T) {
	for name, pieces := range map[string][]string{
		"negative tool index": {`data: {"choices":[{"delta":{"tool_calls":[{"index":-1,"function":{"name":"x"}}]}}]}` + "\n\n"},
		"huge tool index":     {`data: {"choices":[{"delta":{"tool_calls":[{"index":50000000,"function":{"name":"x"}}]}}]}` + "\n\n"},
		"cut short":           append([]string(nil), sseAnswer[:4]...),
		"error event":         {sseAnswer[3], `data: {"error":{"message":"upstream overloaded","code":502}}` + "\n\n"},
		"garbage data":        {sseAnswer[3], "data: {not json\n\n"},
	} {
		t.Run(name, func(t *testing.T) {
			recs, err := readRecords(t, newNDJSON(&chunked{pieces: pieces}, testAnswer(false), "prov.example", nil))
			require.Error(t, err, "the stream ends in an error, so the connection is aborted")
			require.NotEmpty(t, recs)
			last := recs[len(recs)-1]
			assert.Contains(t, last.Error, "prov.example")
			assert.False(t, last.Done)
		})
	}
	// Some providers end with finish_reason and no [DONE].
	recs, err := readRecords(t, newNDJSON(&chunked{pieces: append([]string(nil), sseAnswer[3:9]...)}, testAnswer(false), "p", nil))
	require.NoError(t, err)
	assert.True(t, recs[len(recs)-1].Done)
}

func TestWholeAnswer(t *testing.T) {
	b, err := wholeAnswer([]byte(`{"choices":[{"message":{"role":"assistant","content":"Hi.","reasoning":"short","tool_calls":[{"id":"c1","type":"function","function":{"name":"w","arguments":"{\"a\":1}"}}]},"finish_reason":"length"}],"usage":{"prompt_tokens":3,"completion_tokens":2}}`), testAnswer(false))
	require.NoError(t, err)
	var rec ollamaRecord
	require.NoError(t, json.Unmarshal(b, &rec))
	assert.Equal(t, "Hi.", rec.Message.Content)
	assert.Equal(t, "short", rec.Message.Thinking)
	assert.True(t, rec.Done)
	assert.Equal(t, "length", rec.DoneReason)
	require.Len(t, rec.Message.ToolCalls, 1)
	assert.Equal(t, map[string]any{"a": 1.0}, rec.Message.ToolCalls[0].Function.Arguments)

	b, err = wholeAnswer([]byte(`{"choices":[{"message":{"content":"Hi."}}]}`), testAnswer(true))
	require.NoError(t, err)
	assert.Contains(t, string(b), `"response":"Hi."`)
	_, err = wholeAnswer([]byte(`<html>`), testAnswer(false))
	assert.Error(t, err)
}

// FuzzSSEToNDJSON: whatever the provider sends, in whatever pieces, the
// translation never panics, every line it gives is a JSON object, and a
// stream it calls clean ends with done:true.
func FuzzSSEToNDJSON(f *testing.F) {
	f.Add(strings.Join(sseAnswer, ""), 3)
	f.Add("data: [DONE]\n\n", 1)
	f.Add(": comment\r\ndata: {\"choices\":[]}\r\n\r\n", 2)
	f.Add("data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":5,\"function\":{\"name\":\"x\",\"arguments\":\"{\"}}]}}]}\n\ndata: [DONE]\n", 7)
	f.Fuzz(func(t *testing.T, stream string, cut int) {
		if cut <= 0 {
			cut = 1
		}
		var pieces []string
		for s := stream; s != ""; {
			n := min(cut, len(s))
			pieces = append(pieces, s[:n])
			s = s[n:]
		}
		out, err := io.ReadAll(newNDJSON(&chunked{pieces: pieces}, testAnswer(false), "p", nil))
		lines := bytes.Split(bytes.TrimSuffix(out, []byte("\n")), []byte("\n"))
		for _, l := range lines {
			if len(l) == 0 {
				continue
			}
			var m map[string]any
			if json.Unmarshal(l, &m) != nil {
				t.Fatalf("not a JSON object: %q", l)
			}
		}
		if err == nil && len(out) > 0 {
			var last map[string]any
			require.NoError(t, json.Unmarshal(lines[len(lines)-1], &last))
			if last["done"] != true {
				t.Fatalf("a clean stream must end with done:true: %q", out)
			}
		}
	})
}

// Parallel calls that all come at index 0, each with its own id (as some
// providers send them), stay apart.
func TestParallelToolCallsAtOneIndex(t *testing.T) {
	pieces := []string{
		`data: {"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c1","function":{"name":"a","arguments":"{\"x\":1}"}}]}}]}` + "\n\n",
		`data: {"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c2","function":{"name":"b","arguments":"{\"y\":"}}]}}]}` + "\n\n",
		`data: {"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"2}"}}]},"finish_reason":"tool_calls"}]}` + "\n\n",
		"data: [DONE]\n\n",
	}
	recs, err := readRecords(t, newNDJSON(&chunked{pieces: pieces}, testAnswer(false), "p", nil))
	require.NoError(t, err)
	calls := recs[len(recs)-2].Message.ToolCalls
	require.Len(t, calls, 2)
	assert.Equal(t, "a", calls[0].Function.Name)
	assert.Equal(t, map[string]any{"x": 1.0}, calls[0].Function.Arguments)
	assert.Equal(t, "b", calls[1].Function.Name)
	assert.Equal(t, map[string]any{"y": 2.0}, calls[1].Function.Arguments)
}

// A provider that echoes the key in its error does not get it shown.
func TestProviderErrorsAreRedacted(t *testing.T) {
	p := testProvider(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
		io.WriteString(w, `{"error":{"message":"Invalid API key: `+r.Header.Get("Authorization")[len("Bearer "):]+`"}}`)
	})
	p.cfg.Key = "sk-secret-123"
	res, err := p.RoundTrip(chatRequest(context.Background(), t, p))
	require.NoError(t, err)
	b, _ := io.ReadAll(res.Body)
	assert.Contains(t, string(b), "Invalid API key: [redacted]")
	assert.NotContains(t, string(b), "sk-secret-123")
	recs, _ := readRecords(t, newNDJSON(&chunked{pieces: []string{`data: {"error":{"message":"bad key sk-secret-123"}}` + "\n\n"}}, testAnswer(false), "p", p.redact))
	assert.Equal(t, "cloud provider p: bad key [redacted]", recs[0].Error)
}
