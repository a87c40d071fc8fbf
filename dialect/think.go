package dialect

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"strings"
)

// Some models write their reasoning inline, as <think>...</think> in the
// answer's text. With routing.strip_think, vera takes those blocks out of
// what the client receives, as it streams; and it never stores them.

const (
	thinkOpen  = "<think>"
	thinkClose = "</think>"
)

// thinkFilter removes <think> blocks from text that comes in pieces: a tag
// split across pieces is held back until it is whole.
type thinkFilter struct {
	in   bool   // inside a block
	hold string // the start of a tag, maybe
	// after a block, the blank lines that followed it are dropped too.
	trim bool
}

// feed returns what of s the client sees.
func (f *thinkFilter) feed(s string) string {
	buf := f.hold + s
	f.hold = ""
	var out strings.Builder
	for buf != "" {
		if f.trim {
			buf = strings.TrimLeft(buf, "\r\n")
			if buf == "" {
				break
			}
			f.trim = false
		}
		tag := thinkOpen
		if f.in {
			tag = thinkClose
		}
		if i := strings.Index(buf, tag); i >= 0 {
			if !f.in {
				out.WriteString(buf[:i])
			}
			buf = buf[i+len(tag):]
			f.in = !f.in
			f.trim = !f.in
			continue
		}
		k := partialSuffix(buf, tag)
		if !f.in {
			out.WriteString(buf[:len(buf)-k])
		}
		f.hold = buf[len(buf)-k:]
		break
	}
	return out.String()
}

// idle reports whether the filter passes any text without a '<' as it is:
// it is outside a block, holds nothing back, and trims nothing.
func (f *thinkFilter) idle() bool { return !f.in && f.hold == "" && !f.trim }

// mayOpen reports whether a raw JSON record may hold the start of a tag:
// a '<', which encoders may escape as \u003c.
func mayOpen(raw []byte) bool {
	return bytes.IndexByte(raw, '<') >= 0 || bytes.Contains(raw, []byte(`\u003c`)) || bytes.Contains(raw, []byte(`\u003C`))
}

// flush returns what was held back at the end of the answer: a tag that
// never completed is text (an unclosed block stays hidden).
func (f *thinkFilter) flush() string {
	h := f.hold
	f.hold = ""
	if f.in {
		return ""
	}
	return h
}

// partialSuffix is the length of the longest end of s that begins tag.
func partialSuffix(s, tag string) int {
	for k := min(len(tag)-1, len(s)); k > 0; k-- {
		if strings.HasSuffix(s, tag[:k]) {
			return k
		}
	}
	return 0
}

// StripThink removes <think> blocks from a whole text.
func StripThink(s string) string {
	var f thinkFilter
	return f.feed(s) + f.flush()
}

// recordFilter rewrites an answer record by record as it streams (each
// line through line), or whole when it is not streamed (through whole).
type recordFilter struct {
	io.ReadCloser
	src         *bufio.Reader
	stream      bool
	line, whole func([]byte) []byte
	out         []byte
	err         error
	long        []byte // a line longer than src's buffer, put together
}

func newRecordFilter(body io.ReadCloser, stream bool, line, whole func([]byte) []byte) *recordFilter {
	return &recordFilter{ReadCloser: body, src: bufio.NewReaderSize(body, 32<<10), stream: stream, line: line, whole: whole}
}

func (t *recordFilter) Read(p []byte) (int, error) {
	for len(t.out) == 0 {
		if t.err != nil {
			return 0, t.err
		}
		if !t.stream {
			b, err := io.ReadAll(t.src)
			t.out, t.err = t.whole(b), err
			if t.err == nil {
				t.err = io.EOF
			}
			continue
		}
		// The line is src's own bytes, good until the next read: it is
		// given out whole before then.
		line, err := t.src.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			t.long = append(t.long[:0], line...)
			for err == bufio.ErrBufferFull {
				line, err = t.src.ReadSlice('\n')
				t.long = append(t.long, line...)
			}
			line = t.long
		}
		if len(line) > 0 {
			line = t.line(line)
		}
		t.out, t.err = line, err
	}
	n := copy(p, t.out)
	t.out = t.out[n:]
	return n, nil
}

// thinkNDJSON takes <think> blocks out of an Ollama answer, record by
// record (message.content, or response for generate), or out of one
// object when the answer is not streamed.
type thinkNDJSON struct{ f thinkFilter }

func newThinkNDJSON(body io.ReadCloser, stream bool) io.ReadCloser {
	t := &thinkNDJSON{}
	return newRecordFilter(body, stream,
		func(l []byte) []byte { return t.record(l, false) },
		func(b []byte) []byte { return t.record(b, true) })
}

// record filters one record's text; a line that is not a record passes
// as it is.
func (t *thinkNDJSON) record(line []byte, whole bool) []byte {
	if t.f.idle() && !mayOpen(line) {
		return line // as it came: most records of most answers
	}
	var rec map[string]json.RawMessage
	if json.Unmarshal(line, &rec) != nil {
		return line
	}
	var done bool
	_ = json.Unmarshal(rec["done"], &done)
	filter := func(s string) string {
		out := t.f.feed(s)
		if done || whole {
			out += t.f.flush()
		}
		return out
	}
	if raw, ok := rec["response"]; ok {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			rec["response"], _ = Marshal(filter(s))
		}
	} else if raw, ok := rec["message"]; ok {
		var m map[string]json.RawMessage
		var s string
		if json.Unmarshal(raw, &m) == nil && json.Unmarshal(m["content"], &s) == nil {
			m["content"], _ = Marshal(filter(s))
			rec["message"], _ = Marshal(m)
		}
	} else {
		return line
	}
	b, err := Marshal(rec)
	if err != nil {
		return line
	}
	if bytes.HasSuffix(line, []byte("\n")) {
		b = append(b, '\n')
	}
	return b
}

// thinkSSE takes <think> blocks out of an OpenAI chat completions answer:
// the deltas of a stream (choices[0].delta.content), or the message of a
// whole answer.
type thinkSSE struct{ f thinkFilter }

func newThinkSSE(body io.ReadCloser, stream bool) io.ReadCloser {
	t := &thinkSSE{}
	return newRecordFilter(body, stream, func(line []byte) []byte {
		data, ok := bytes.CutPrefix(line, []byte("data: "))
		if !ok || t.f.idle() && !mayOpen(data) {
			return line
		}
		nl := len(data) - len(bytes.TrimRight(data, "\r\n"))
		body := t.chunk(data[:len(data)-nl], "delta", false)
		return append(append([]byte("data: "), body...), data[len(data)-nl:]...)
	}, func(b []byte) []byte { return t.chunk(b, "message", true) })
}

// chunk filters the content of the first choice's field (delta or
// message); a chunk that ends the choice gives back what was held.
func (t *thinkSSE) chunk(data []byte, field string, whole bool) []byte {
	var c map[string]json.RawMessage
	if json.Unmarshal(data, &c) != nil {
		return data // [DONE], or not JSON
	}
	var choices []map[string]json.RawMessage
	if json.Unmarshal(c["choices"], &choices) != nil || len(choices) == 0 {
		return data
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(choices[0][field], &m) != nil || m == nil {
		return data
	}
	var s string
	_ = json.Unmarshal(m["content"], &s)
	var reason string
	_ = json.Unmarshal(choices[0]["finish_reason"], &reason)
	out := t.f.feed(s)
	if whole || reason != "" {
		out += t.f.flush()
	}
	if _, had := m["content"]; !had && out == "" {
		return data
	}
	m["content"], _ = Marshal(out)
	choices[0][field], _ = Marshal(m)
	c["choices"], _ = Marshal(choices)
	b, err := Marshal(c)
	if err != nil {
		return data
	}
	return b
}
