package proxy

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

// stripThink removes <think> blocks from a whole text.
func stripThink(s string) string {
	var f thinkFilter
	return f.feed(s) + f.flush()
}

// thinkNDJSON takes <think> blocks out of an Ollama answer, record by
// record (message.content, or response for generate), or out of one
// object when the answer is not streamed.
type thinkNDJSON struct {
	io.ReadCloser
	src    *bufio.Reader
	stream bool
	f      thinkFilter
	out    []byte
	err    error
}

func newThinkNDJSON(body io.ReadCloser, stream bool) *thinkNDJSON {
	return &thinkNDJSON{ReadCloser: body, src: bufio.NewReaderSize(body, 32<<10), stream: stream}
}

func (t *thinkNDJSON) Read(p []byte) (int, error) {
	for len(t.out) == 0 {
		if t.err != nil {
			return 0, t.err
		}
		if !t.stream {
			b, err := io.ReadAll(t.src)
			t.out, t.err = t.record(b, true), err
			if t.err == nil {
				t.err = io.EOF
			}
			continue
		}
		line, err := t.src.ReadBytes('\n')
		if len(line) > 0 {
			t.out = t.record(line, false)
		}
		t.err = err
	}
	n := copy(p, t.out)
	t.out = t.out[n:]
	return n, nil
}

// record filters one record's text; a line that is not a record passes
// as it is.
func (t *thinkNDJSON) record(line []byte, whole bool) []byte {
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
			rec["response"], _ = json.Marshal(filter(s))
		}
	} else if raw, ok := rec["message"]; ok {
		var m map[string]json.RawMessage
		var s string
		if json.Unmarshal(raw, &m) == nil && json.Unmarshal(m["content"], &s) == nil {
			m["content"], _ = json.Marshal(filter(s))
			rec["message"], _ = json.Marshal(m)
		}
	} else {
		return line
	}
	b, err := marshal(rec)
	if err != nil {
		return line
	}
	if bytes.HasSuffix(line, []byte("\n")) {
		b = append(b, '\n')
	}
	return b
}
