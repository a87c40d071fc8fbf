package proxy

import (
	"bytes"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"strings"
)

// maxRecord bounds how much of one response record the tee buffers. A record
// larger than that is still forwarded, but the answer is not captured.
const maxRecord = 16 << 20

// answerTee reads a copy of a chat response as it streams past and keeps
// the assistant's answer. It never alters a byte: the client receives
// exactly what Ollama sent. It reads each dialect's answer: Ollama's NDJSON
// records, the Server-Sent Events of OpenAI's chat completions (ending in
// [DONE]), of its Responses API (ending in response.completed) and of
// Anthropic's Messages API (ending in message_stop), or one JSON object
// when the answer is not streamed.
type answerTee struct {
	d       dialect
	stream  bool // a stream of records (NDJSON or SSE), else one object
	buf     []byte
	event   []byte // SSE: the data lines of the event being read
	inEvent bool   // SSE: an event has begun
	content strings.Builder
	done    bool
	failed  bool
	// toolCalls is set when the answer calls tools: an agent's tool loop
	// goes on, and its turn is stored with the answer that ends the loop,
	// never with this one.
	toolCalls bool
	// final is set once the answer's last record has been read (done:true,
	// the data: [DONE] line, or the end of a non-streamed body), before
	// the event it ends is complete.
	final bool

	// onEnd, when set, is called once with the answer when its final
	// record has been read, before that record reaches the client: the
	// client learns that its answer is complete only after onEnd returns
	// (the turn is committed first). It is not called for an
	// answer that failed or came back empty.
	onEnd func(answer string)
	// onStep, when set, is called once when any answer ends cleanly, one
	// that calls tools included, before onEnd: a conversation learns the
	// answer (and its response id) before the client can send the next
	// request.
	onStep func(t *answerTee)
	// responseID is the Responses API's id of the answer.
	responseID string
	ended      bool
	finished   bool
}

// Answer returns the captured answer and whether the response finished
// cleanly: done:true from Ollama, [DONE] or a non-streamed choice from
// OpenAI. An aborted, failed or empty answer is not complete.
func (t *answerTee) Answer() (string, bool) {
	ok := t.done && !t.failed && !t.toolCalls && strings.TrimSpace(t.content.String()) != ""
	return t.content.String(), ok
}

// wrap starts teeing res's body. Error statuses are forwarded untouched and
// never captured.
func (t *answerTee) wrap(res *http.Response, body io.ReadCloser) io.ReadCloser {
	if res.StatusCode != http.StatusOK {
		t.failed = true
		return body
	}
	mt, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type"))
	if t.d.sse() {
		t.stream = mt == "text/event-stream"
	} else {
		t.stream = mt == "application/x-ndjson"
	}
	return &teeBody{ReadCloser: body, tee: t}
}

// teeBody passes the upstream body through the tee. When the tee has an
// onEnd, the answer's final record is held back until onEnd has run:
// everything before it flows as it comes, so only the very end waits. Until
// then the last byte of each read is kept back too, unless it ends a line:
// a client that decodes JSON objects as bytes arrive (rather than lines)
// cannot see a record whole before its newline has been checked.
type teeBody struct {
	io.ReadCloser
	tee *answerTee

	held    []byte // the final record, given out after onEnd
	heldErr error  // the upstream's error (io.EOF) to give after held
	last    []byte // the one byte kept back
}

func (b *teeBody) Read(p []byte) (int, error) {
	if b.held != nil || b.heldErr != nil {
		b.tee.end()
		n := copy(p, b.held)
		b.held = b.held[n:]
		if len(b.held) > 0 {
			return n, nil
		}
		b.held = nil
		err := b.heldErr
		b.heldErr = nil
		return n, err
	}
	if !b.tee.hooked() || b.tee.ended {
		n := copy(p, b.last) // a byte kept back before the end ran
		b.last = b.last[n:]
		if n > 0 {
			return n, nil
		}
		n, err := b.ReadCloser.Read(p)
		b.tee.scan(p[:n])
		switch {
		case err == io.EOF:
			b.tee.finish()
		case err != nil:
			b.tee.failed = true
		}
		return n, err
	}
	return b.readHolding(p)
}

// readHolding reads while the answer's end is still to be committed.
func (b *teeBody) readHolding(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	buf := p
	if len(p) <= len(b.last) {
		// No room to read behind the byte kept back (ReverseProxy reads
		// 32 KiB at a time; this is for other readers).
		buf = make([]byte, 512)
	}
	off := copy(buf, b.last)
	b.last = b.last[:0]
	n, err := b.ReadCloser.Read(buf[off:])
	cut := b.tee.scan(buf[off : off+n])
	switch {
	case err == io.EOF:
		b.tee.finish()
	case err != nil:
		b.tee.failed = true
	}
	total := off + n
	switch {
	case b.tee.final && cut < 0:
		// The answer ended with the body (a non-streamed object, or a
		// last line without its newline): commit, then give it all.
		b.tee.end()
		return b.give(p, buf, total, err)
	case b.tee.final:
		if cut > 0 {
			cut += off
		}
		// The final record, from its first byte (cut 0: it began in
		// bytes kept back or already given), waits until onEnd has run.
		b.held = append([]byte(nil), buf[cut:total]...)
		b.heldErr = err
		if cut == 0 {
			return b.Read(p)
		}
		return b.give(p, buf, cut, nil)
	case err != nil:
		return b.give(p, buf, total, err)
	case total > 0 && (!b.tee.stream || buf[total-1] != '\n'):
		b.last = append(b.last, buf[total-1])
		total--
	}
	return b.give(p, buf, total, nil)
}

// give returns buf[:n] through p. When buf is a scratch buffer larger
// than p, what does not fit is kept back for the next reads.
func (b *teeBody) give(p, buf []byte, n int, err error) (int, error) {
	if &buf[0] == &p[0] {
		return n, err
	}
	m := copy(p, buf[:n])
	if m < n {
		// Keep the rest in front of anything kept back.
		rest := append([]byte(nil), buf[m:n]...)
		if b.held != nil || b.heldErr != nil {
			b.held = append(rest, b.held...)
		} else {
			b.last = append(rest, b.last...)
		}
		return m, nil
	}
	return m, err
}

// hooked reports whether the end of the answer waits for a hook.
func (t *answerTee) hooked() bool { return t.onEnd != nil || t.onStep != nil }

// end runs the hooks once, when the answer is complete.
func (t *answerTee) end() {
	if t.ended || !t.hooked() {
		return
	}
	t.ended = true
	if !t.final || t.failed {
		return
	}
	if t.onStep != nil {
		t.onStep(t)
	}
	if t.onEnd != nil && !t.toolCalls && strings.TrimSpace(t.content.String()) != "" {
		t.onEnd(t.content.String())
	}
}

// Write feeds the next bytes of the response; it never fails.
func (t *answerTee) Write(p []byte) (int, error) {
	t.scan(p)
	return len(p), nil
}

// scan feeds the next bytes of the response and returns the offset in p at
// which the answer's final record starts, when that record ends in p (0
// when it started in earlier bytes), else -1.
func (t *answerTee) scan(p []byte) int {
	if t.failed {
		return -1
	}
	if !t.stream {
		t.append(p)
		return -1
	}
	cut, off := -1, 0
	for off < len(p) {
		rest := p[off:]
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			t.append(rest)
			break
		}
		start := off
		wasFinal := t.final
		if len(t.buf) == 0 {
			t.line(rest[:i]) // the whole line is in p: no copy
		} else {
			start = 0
			t.append(rest[:i])
			t.line(t.buf)
			t.buf = t.buf[:0]
		}
		if t.final && !wasFinal {
			cut = start
		}
		off += i + 1
	}
	return cut
}

func (t *answerTee) append(p []byte) {
	if len(t.buf)+len(p) > maxRecord {
		t.failed = true
		t.buf = nil
		return
	}
	t.buf = append(t.buf, p...)
}

// finish handles the end of the body: the single object of a non-streamed
// answer, or a last line without its newline (and, for SSE, the event it
// ends).
func (t *answerTee) finish() {
	if t.finished {
		return // a reader may see io.EOF more than once
	}
	t.finished = true
	switch {
	case t.failed:
	case !t.stream:
		t.object(t.buf)
	default:
		if len(t.buf) > 0 {
			t.line(t.buf)
		}
		if t.d.sse() {
			t.line(nil)
		}
	}
	t.buf = nil
}

// line takes one line of a stream (without its newline).
func (t *answerTee) line(l []byte) {
	if t.failed {
		return
	}
	if !t.d.sse() {
		t.record(l)
		return
	}
	// Server-Sent Events (https://html.spec.whatwg.org/multipage/server-sent-events.html):
	// data lines accumulate until a blank line ends the event; comments and
	// the event, id and retry fields carry nothing vera needs.
	l = bytes.TrimSuffix(l, []byte{'\r'})
	if len(l) == 0 {
		if t.inEvent {
			t.sseEvent(t.event)
			t.event, t.inEvent = t.event[:0], false // the buffer is used again
		}
		return
	}
	data, ok := bytes.CutPrefix(l, []byte("data:"))
	if !ok {
		return
	}
	data = bytes.TrimPrefix(data, []byte{' '})
	if len(t.event)+len(data) > maxRecord {
		t.failed = true
		return
	}
	first := !t.inEvent
	if !first {
		t.event = append(t.event, '\n')
	}
	t.event, t.inEvent = append(t.event, data...), true
	// Clients end the stream on the final event: its last data line is
	// the final record (an event's data may span several lines).
	if !t.final && (first && t.d.sseFinal(data) || !first && t.d.sseFinal(t.event)) {
		t.final = true
	}
}

// record takes one Ollama NDJSON record, chat or generate: the answer's
// text is message.content (chat) or response (generate); thinking is
// never part of it. It reads the record in place (jsonscan.go): no
// allocation per record.
func (t *answerTee) record(line []byte) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 || t.failed {
		return
	}
	if t.done || !json.Valid(line) {
		// Anything after done, or garbage: not a clean answer.
		t.failed = true
		return
	}
	bad, done := false, false
	ok := members(line, func(key, val []byte) {
		switch string(key) {
		case "message":
			if jsonNull(val) {
				return
			}
			bad = bad || !t.message(val)
		case "response":
			bad = bad || !appendJSONString(&t.content, val)
		case "done":
			switch string(val) {
			case "true":
				done = true
			case "false", "null":
			default:
				bad = true
			}
		case "error":
			// An error record ends the answer in failure.
			bad = bad || !jsonNull(val) && string(val) != `""`
		}
	})
	if !ok || bad {
		t.failed = true
		return
	}
	t.done = done
	t.final = t.final || done
}

// message takes a message object (Ollama's message, OpenAI's delta): its
// content is the answer's, its tool calls go on a tool loop. It reports
// false when msg is not such an object.
func (t *answerTee) message(msg []byte) bool {
	ok := true
	return members(msg, func(key, val []byte) {
		switch string(key) {
		case "content":
			ok = ok && appendJSONString(&t.content, val)
		case "tool_calls":
			t.toolCalls = t.toolCalls || present(val)
		}
	}) && ok
}

// object takes the whole body of a non-streamed answer.
func (t *answerTee) object(body []byte) {
	switch t.d {
	case ollamaChat, ollamaGenerate:
		if len(bytes.TrimSpace(body)) > 0 {
			t.record(body)
		}
		return
	case openAIResponses:
		t.responsesObject(body)
		return
	case anthropicMessages:
		t.messagesObject(body)
		return
	}
	var res openAIRecord
	if json.Unmarshal(body, &res) != nil || res.Error != nil || len(res.Choices) == 0 || res.Choices[0].Message == nil {
		t.failed = true
		return
	}
	t.content.WriteString(res.Choices[0].Message.Content)
	t.toolCalls = present(res.Choices[0].Message.ToolCalls)
	t.done, t.final = true, true
}

// present reports whether a JSON value is there and not empty: not
// absent, null, [] or {}.
func present(raw json.RawMessage) bool {
	switch string(bytes.TrimSpace(raw)) {
	case "", "null", "[]", "{}":
		return false
	}
	return true
}

// openAIRecord is the part of an OpenAI chat completion, or of one chunk of
// a streamed one, that the tee needs. Only the first choice is recorded.
type openAIRecord struct {
	Choices []struct {
		Index   int `json:"index"`
		Message *struct {
			Content   string          `json:"content"`
			ToolCalls json.RawMessage `json:"tool_calls"`
		} `json:"message"`
		Delta *struct {
			Content   string          `json:"content"`
			ToolCalls json.RawMessage `json:"tool_calls"`
		} `json:"delta"`
	} `json:"choices"`
	Error any `json:"error"`
}

// sseEvent takes the data of one Server-Sent Event.
func (t *answerTee) sseEvent(data []byte) {
	if t.done {
		// Nothing may follow the final event.
		t.failed = true
		return
	}
	switch t.d {
	case openAIResponses:
		t.responsesEvent(data)
		return
	case anthropicMessages:
		t.messagesEvent(data)
		return
	}
	if string(bytes.TrimSpace(data)) == "[DONE]" {
		t.done = true
		return
	}
	if !json.Valid(data) {
		t.failed = true
		return
	}
	// A chunk: the first choice's delta, read in place.
	bad := false
	ok := members(data, func(key, val []byte) {
		switch string(key) {
		case "error":
			bad = bad || !jsonNull(val)
		case "choices":
			if jsonNull(val) {
				return
			}
			// (A closure that sets bad runs inside each call: the calls
			// come first, then bad is set from what they return.)
			if !elements(val, func(choice []byte) {
				first, delta := true, []byte(nil)
				if !members(choice, func(key, val []byte) {
					switch string(key) {
					case "index":
						// null decodes to 0, and so does -0.
						first = jsonNull(val) || string(bytes.TrimPrefix(val, []byte{'-'})) == "0"
						bad = bad || !jsonInt(val)
					case "delta":
						delta = val
					}
				}) {
					bad = true
				}
				if !first || delta == nil || jsonNull(delta) {
					return
				}
				bad = bad || !t.message(delta)
			}) {
				bad = true
			}
		}
	})
	if !ok || bad {
		t.failed = true
	}
}
