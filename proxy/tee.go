package proxy

import (
	"bytes"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/vera-proxy/vera/dialect"
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
	d       dialect.Dialect
	stream  bool // a stream of records (NDJSON or SSE), else one object
	buf     []byte
	event   []byte // SSE: the data lines of the event being read
	inEvent bool   // SSE: an event has begun
	// Answer is what the dialect reads: the text, its tool calls, and
	// whether its final record (done:true, the data: [DONE] line, the end
	// of a non-streamed body) has come.
	dialect.Answer

	// onEnd, when set, hears the answer once it ended cleanly, before its
	// final record reaches the client: the client learns that its answer
	// is complete only after it returns (the turn is committed first).
	onEnd    answerEnd
	ended    bool
	finished bool
}

// Captured returns the captured answer and whether the response finished
// cleanly: done:true from Ollama, [DONE] or a non-streamed choice from
// OpenAI. An aborted, failed or empty answer is not complete.
func (t *answerTee) Captured() (string, bool) {
	ok := t.Done && !t.Failed && !t.ToolCalls && strings.TrimSpace(t.Content.String()) != ""
	return t.Content.String(), ok
}

// wrap starts teeing res's body. Error statuses are forwarded untouched and
// never captured.
func (t *answerTee) wrap(res *http.Response, body io.ReadCloser) io.ReadCloser {
	if res.StatusCode != http.StatusOK {
		t.Failed = true
		return body
	}
	t.stream = streamed(res, t.d)
	return &teeBody{ReadCloser: body, tee: t}
}

// streamed reports whether an answer is a stream of its dialect's records
// (SSE or NDJSON), else one object.
func streamed(res *http.Response, d dialect.Dialect) bool {
	mt, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type"))
	if d.SSE() {
		return mt == "text/event-stream"
	}
	return mt == "application/x-ndjson"
}

// teeBody passes the upstream body through the tee. When the tee has an
// onEnd, the answer's final record is held back until it has run:
// everything before it flows as it comes, so only the very end waits. Until
// then the last byte of each read is kept back too, unless it ends a line:
// a client that decodes JSON objects as bytes arrive (rather than lines)
// cannot see a record whole before its newline has been checked.
type teeBody struct {
	io.ReadCloser
	tee *answerTee

	held    []byte // the final record, given out after onEnd ran
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
			b.tee.Failed = true
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
		b.tee.Failed = true
	}
	total := off + n
	switch {
	case b.tee.Final && cut < 0:
		// The answer ended with the body (a non-streamed object, or a
		// last line without its newline): commit, then give it all.
		b.tee.end()
		return b.give(p, buf, total, err)
	case b.tee.Final:
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

// An answerEnd is what a chat does once its answer ended cleanly, and
// before the client can tell (turnEnd): a failed or cut answer never
// reaches it.
type answerEnd interface {
	answered(a *dialect.Answer)
}

// turnAnswer is the answer a turn is stored with: its text, unless it
// calls tools (the loop goes on) or is empty.
func turnAnswer(a *dialect.Answer) (string, bool) {
	text := a.Content.String()
	return text, !a.ToolCalls && strings.TrimSpace(text) != ""
}

// hooked reports whether the end of the answer waits for onEnd.
func (t *answerTee) hooked() bool { return t.onEnd != nil }

// end runs onEnd once, when the answer is complete.
func (t *answerTee) end() {
	if t.ended || !t.hooked() {
		return
	}
	t.ended = true
	if !t.Final || t.Failed {
		return
	}
	t.onEnd.answered(&t.Answer)
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
	if t.Failed {
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
		wasFinal := t.Final
		if len(t.buf) == 0 {
			t.line(rest[:i]) // the whole line is in p: no copy
		} else {
			start = 0
			t.append(rest[:i])
			t.line(t.buf)
			t.buf = t.buf[:0]
		}
		if t.Final && !wasFinal {
			cut = start
		}
		off += i + 1
	}
	return cut
}

func (t *answerTee) append(p []byte) {
	if len(t.buf)+len(p) > maxRecord {
		t.Failed = true
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
	case t.Failed:
	case !t.stream:
		t.d.ReadWhole(&t.Answer, t.buf)
	default:
		if len(t.buf) > 0 {
			t.line(t.buf)
		}
		if t.d.SSE() {
			t.line(nil)
		}
	}
	t.buf = nil
}

// line takes one line of a stream (without its newline).
func (t *answerTee) line(l []byte) {
	if t.Failed {
		return
	}
	if !t.d.SSE() {
		t.d.Read(&t.Answer, l)
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
		t.Failed = true
		return
	}
	first := !t.inEvent
	if !first {
		t.event = append(t.event, '\n')
	}
	t.event, t.inEvent = append(t.event, data...), true
	// Clients end the stream on the final event: its last data line is
	// the final record (an event's data may span several lines).
	if !t.Final && (first && t.d.Final(data) || !first && t.d.Final(t.event)) {
		t.Final = true
	}
}

// sseEvent takes the data of one Server-Sent Event.
func (t *answerTee) sseEvent(data []byte) {
	if t.Done {
		// Nothing may follow the final event.
		t.Failed = true
		return
	}
	t.d.Read(&t.Answer, data)
}
