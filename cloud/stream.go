package cloud

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// The answer side of the translation: the cloud's chat completions answer
// (an SSE stream of deltas, or one object) becomes Ollama's NDJSON records
// (or one object), as Ollama itself would have sent them.

// maxLine bounds one SSE line.
const maxLine = 16 << 20

// chunk is one chat completions stream chunk, or a whole completion.
type chunk struct {
	Choices []struct {
		Delta        delta  `json:"delta"`
		Message      delta  `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
	Error *providerError `json:"error"`
}

type delta struct {
	Content          string          `json:"content"`
	Reasoning        string          `json:"reasoning"`
	ReasoningContent string          `json:"reasoning_content"`
	ToolCalls        []toolCallDelta `json:"tool_calls"`
}

type toolCallDelta struct {
	Index    int    `json:"index"`
	ID       string `json:"id"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type providerError struct {
	Message string `json:"message"`
	Code    any    `json:"code"`
}

// answer holds what the records say so far.
type answer struct {
	model    string
	generate bool
	start    time.Time
	first    time.Time // first token
	now      func() time.Time

	calls  []*toolCallDelta       // assembled, in order
	at     map[int]*toolCallDelta // the call each index adds to now
	bad    string                 // why the answer cannot be read
	finish string
	prompt int
	eval   int
}

// record is one Ollama record for text or thinking.
func (a *answer) record(content, thinking string) map[string]any {
	r := map[string]any{"model": a.model, "created_at": a.now().UTC().Format(time.RFC3339Nano), "done": false}
	if a.generate {
		r["response"] = content
		if thinking != "" {
			r["thinking"] = thinking
		}
		return r
	}
	m := map[string]any{"role": "assistant", "content": content}
	if thinking != "" {
		m["thinking"] = thinking
	}
	r["message"] = m
	return r
}

// take applies one chunk and returns the records it makes.
func (a *answer) take(c chunk, whole bool) []map[string]any {
	var out []map[string]any
	if c.Usage != nil {
		a.prompt, a.eval = c.Usage.PromptTokens, c.Usage.CompletionTokens
	}
	if len(c.Choices) == 0 {
		return nil
	}
	ch := c.Choices[0]
	d := ch.Delta
	if whole {
		d = ch.Message
	}
	thinking := d.Reasoning
	if thinking == "" {
		thinking = d.ReasoningContent
	}
	if d.Content != "" || thinking != "" {
		if a.first.IsZero() {
			a.first = a.now()
		}
		out = append(out, a.record(d.Content, thinking))
	}
	for _, tc := range d.ToolCalls {
		a.addCall(tc, whole)
	}
	if ch.FinishReason != "" {
		a.finish = ch.FinishReason
	}
	return out
}

// maxToolCalls bounds the tool calls of one answer.
const maxToolCalls = 128

// addCall assembles a tool call from its pieces: the first piece of an
// index names it, the others add to its arguments. A piece with another id
// at an index already taken starts a new call (some providers send
// parallel calls all at index 0).
func (a *answer) addCall(tc toolCallDelta, whole bool) {
	if whole {
		tc.Index = len(a.calls)
	}
	if tc.Index < 0 || tc.Index >= maxToolCalls {
		a.bad = fmt.Sprintf("a tool call's index is %d", tc.Index)
		return
	}
	if a.at == nil {
		a.at = map[int]*toolCallDelta{}
	}
	c := a.at[tc.Index]
	if c == nil || (tc.ID != "" && c.ID != "" && tc.ID != c.ID) {
		if len(a.calls) >= maxToolCalls {
			a.bad = "too many tool calls"
			return
		}
		c = &toolCallDelta{Index: len(a.calls)}
		a.calls = append(a.calls, c)
		a.at[tc.Index] = c
	}
	if tc.ID != "" {
		c.ID = tc.ID
	}
	if tc.Function.Name != "" {
		c.Function.Name = tc.Function.Name
	}
	c.Function.Arguments += tc.Function.Arguments
}

// toolCalls renders the assembled calls as Ollama's, arguments as objects.
func (a *answer) toolCalls() []map[string]any {
	var out []map[string]any
	for _, c := range a.calls {
		if c.Function.Name == "" {
			continue
		}
		args := json.RawMessage(strings.TrimSpace(c.Function.Arguments))
		var obj map[string]any
		if len(args) == 0 || json.Unmarshal(args, &obj) != nil || obj == nil {
			args = json.RawMessage("{}")
		}
		call := map[string]any{"function": map[string]any{"index": c.Index, "name": c.Function.Name, "arguments": args}}
		if c.ID != "" {
			call["id"] = c.ID
		}
		out = append(out, call)
	}
	return out
}

// final is the last record: tool calls (if any), then done with the
// reason, the counts and the durations.
func (a *answer) final() []map[string]any {
	var out []map[string]any
	if calls := a.toolCalls(); len(calls) > 0 && !a.generate {
		r := a.record("", "")
		r["message"].(map[string]any)["tool_calls"] = calls
		out = append(out, r)
	}
	end := a.now()
	first := a.first
	if first.IsZero() {
		first = end
	}
	r := a.record("", "")
	reason := "stop"
	if a.finish == "length" {
		reason = "length"
	}
	r["done"], r["done_reason"] = true, reason
	r["total_duration"] = end.Sub(a.start).Nanoseconds()
	r["load_duration"] = 0
	r["prompt_eval_count"], r["prompt_eval_duration"] = a.prompt, first.Sub(a.start).Nanoseconds()
	r["eval_count"], r["eval_duration"] = a.eval, end.Sub(first).Nanoseconds()
	return append(out, r)
}

// errorRecord ends a stream that failed, as Ollama ends one.
func errorRecord(msg string) map[string]any { return map[string]any{"error": msg} }

// ndjson reads a chat completions SSE stream and gives Ollama NDJSON.
type ndjson struct {
	src      *bufio.Reader
	body     io.Closer
	a        *answer
	provider string
	redact   func(string) string

	data []string // the data lines of the event being read
	out  bytes.Buffer
	done bool
	err  error
}

func newNDJSON(body io.ReadCloser, a *answer, provider string, redact func(string) string) *ndjson {
	if redact == nil {
		redact = func(s string) string { return s }
	}
	return &ndjson{src: bufio.NewReaderSize(body, 32<<10), body: body, a: a, provider: provider, redact: redact}
}

func (n *ndjson) Close() error { return n.body.Close() }

func (n *ndjson) Read(p []byte) (int, error) {
	for n.out.Len() == 0 {
		switch {
		case n.done:
			return 0, io.EOF
		case n.err != nil:
			return 0, n.err
		}
		n.step()
	}
	return n.out.Read(p)
}

// step reads one line of the stream.
func (n *ndjson) step() {
	line, err := readLine(n.src)
	if err != nil {
		if len(n.data) > 0 {
			n.event()
		}
		if n.done || n.err != nil {
			return
		}
		if errors.Is(err, io.EOF) && n.a.finish != "" {
			n.emit(n.a.final()...) // a provider that sends no [DONE]
			n.done = true
			return
		}
		n.fail(fmt.Sprintf("the stream from cloud provider %s ended before the answer did", n.provider))
		return
	}
	switch {
	case len(line) == 0:
		n.event()
	case line[0] == ':':
		// A comment (OpenRouter's ": OPENROUTER PROCESSING").
	case bytes.HasPrefix(line, []byte("data:")):
		n.data = append(n.data, strings.TrimPrefix(string(line[5:]), " "))
	}
}

// event handles the event whose data lines were read.
func (n *ndjson) event() {
	if len(n.data) == 0 {
		return
	}
	data := strings.Join(n.data, "\n")
	n.data = n.data[:0]
	if strings.TrimSpace(data) == "[DONE]" {
		n.emit(n.a.final()...)
		n.done = true
		return
	}
	var c chunk
	if err := json.Unmarshal([]byte(data), &c); err != nil {
		n.fail(fmt.Sprintf("cloud provider %s sent an event that is not JSON", n.provider))
		return
	}
	if c.Error != nil {
		n.fail(fmt.Sprintf("cloud provider %s: %s", n.provider, c.Error.Message))
		return
	}
	n.emit(n.a.take(c, false)...)
	if n.a.bad != "" {
		n.fail(fmt.Sprintf("cloud provider %s sent an answer vera cannot read: %s", n.provider, n.a.bad))
	}
}

func (n *ndjson) emit(recs ...map[string]any) {
	for _, r := range recs {
		b, _ := json.Marshal(r)
		n.out.Write(b)
		n.out.WriteByte('\n')
	}
}

// fail ends the stream with an error record, then an error: the client
// sees why, and the connection is aborted so that no client takes the
// answer for complete.
func (n *ndjson) fail(msg string) {
	msg = n.redact(msg)
	n.emit(errorRecord(msg))
	n.err = reportedError(msg)
}

// reportedError is a stream's failure that its last record already told
// the client: nothing needs adding to the stream.
type reportedError string

func (e reportedError) Error() string  { return string(e) }
func (e reportedError) Reported() bool { return true }

// readLine reads one line without its end (LF or CRLF).
func readLine(r *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		frag, err := r.ReadSlice('\n')
		line = append(line, frag...)
		if len(line) > maxLine {
			return nil, errors.New("an SSE line is too long")
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			if len(line) > 0 && err == io.EOF {
				return bytes.TrimRight(line, "\r\n"), nil
			}
			return nil, err
		}
		return bytes.TrimRight(line, "\r\n"), nil
	}
}

// wholeAnswer translates a non-streamed completion into one Ollama object.
func wholeAnswer(body []byte, a *answer) ([]byte, error) {
	var c chunk
	if err := json.Unmarshal(body, &c); err != nil {
		return nil, errors.New("the cloud's answer is not JSON")
	}
	if c.Error != nil {
		return nil, errors.New(c.Error.Message)
	}
	recs := a.take(c, true)
	if a.bad != "" {
		return nil, errors.New(a.bad)
	}
	out := a.final()
	last := out[len(out)-1]
	content, thinking := "", ""
	for _, r := range recs {
		if a.generate {
			content += r["response"].(string)
			if t, ok := r["thinking"].(string); ok {
				thinking += t
			}
			continue
		}
		m := r["message"].(map[string]any)
		content += m["content"].(string)
		if t, ok := m["thinking"].(string); ok {
			thinking += t
		}
	}
	if a.generate {
		last["response"] = content
		if thinking != "" {
			last["thinking"] = thinking
		}
	} else {
		m := map[string]any{"role": "assistant", "content": content}
		if thinking != "" {
			m["thinking"] = thinking
		}
		if calls := a.toolCalls(); len(calls) > 0 {
			m["tool_calls"] = calls
		}
		last["message"] = m
	}
	return json.Marshal(last)
}
