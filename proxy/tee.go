package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"strings"
)

// maxRecord bounds how much of one response record the tee buffers. A record
// larger than that is still forwarded, but the answer is not captured.
const maxRecord = 16 << 20

// answerTee reads a copy of an /api/chat response as it streams past and
// keeps the assistant's answer. It never delays or alters a byte: the
// client receives exactly what Ollama sent.
type answerTee struct {
	stream  bool // NDJSON records, else one JSON object
	buf     []byte
	content strings.Builder
	done    bool
	failed  bool
}

// Answer returns the captured answer and whether the response finished
// cleanly with done:true. An aborted, failed or empty answer is not
// complete.
func (t *answerTee) Answer() (string, bool) {
	ok := t.done && !t.failed && strings.TrimSpace(t.content.String()) != ""
	return t.content.String(), ok
}

type teeKey struct{}

func withTee(ctx context.Context, t *answerTee) context.Context {
	return context.WithValue(ctx, teeKey{}, t)
}

func teeFrom(ctx context.Context) *answerTee {
	t, _ := ctx.Value(teeKey{}).(*answerTee)
	return t
}

// wrap starts teeing res's body. Error statuses are forwarded untouched and
// never captured.
func (t *answerTee) wrap(res *http.Response, body io.ReadCloser) io.ReadCloser {
	if res.StatusCode != http.StatusOK {
		t.failed = true
		return body
	}
	mt, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type"))
	t.stream = mt == "application/x-ndjson"
	return &teeBody{ReadCloser: body, tee: t}
}

type teeBody struct {
	io.ReadCloser
	tee *answerTee
}

func (b *teeBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.tee.Write(p[:n])
	switch {
	case err == io.EOF:
		b.tee.finish()
	case err != nil:
		b.tee.failed = true
	}
	return n, err
}

// Write feeds the next bytes of the response; it never fails.
func (t *answerTee) Write(p []byte) (int, error) {
	n := len(p)
	if t.failed {
		return n, nil
	}
	if !t.stream {
		t.append(p)
		return n, nil
	}
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			t.append(p)
			break
		}
		if len(t.buf) == 0 {
			t.record(p[:i]) // the whole line is in p: no copy
		} else {
			t.append(p[:i])
			t.record(t.buf)
			t.buf = t.buf[:0]
		}
		p = p[i+1:]
	}
	return n, nil
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
// answer, or a last NDJSON line without its newline.
func (t *answerTee) finish() {
	if !t.failed && len(bytes.TrimSpace(t.buf)) > 0 {
		t.record(t.buf)
	}
	t.buf = nil
}

// chatRecord is the part of an Ollama chat response record the tee needs.
type chatRecord struct {
	Message *struct {
		Content string `json:"content"`
	} `json:"message"`
	Done  bool   `json:"done"`
	Error string `json:"error"`
}

func (t *answerTee) record(line []byte) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 || t.failed {
		return
	}
	var rec chatRecord
	if err := json.Unmarshal(line, &rec); err != nil || rec.Error != "" || t.done {
		// Garbage, an error record, or anything after done: not a clean answer.
		t.failed = true
		return
	}
	if rec.Message != nil {
		t.content.WriteString(rec.Message.Content)
	}
	t.done = rec.Done
}
