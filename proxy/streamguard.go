package proxy

import (
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"

	"github.com/vera-proxy/vera/dialect"
)

// The stream guard: a stream that fails in the middle ends with an error
// record in its own format, so that the client cannot take it for a clean
// end.

// streamKind tells how a response body is framed, so that a failure in the
// middle can be signalled in the body's own format.
type streamKind int

const (
	streamNone   streamKind = iota // a sized body: only an aborted connection can signal
	streamNDJSON                   // Ollama's streams
	streamSSE                      // OpenAI-compatible streams
)

func kindOf(res *http.Response) streamKind {
	if res.ContentLength >= 0 {
		return streamNone
	}
	mt, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type"))
	switch mt {
	case "application/x-ndjson", "application/ndjson", "application/jsonl":
		return streamNDJSON
	case "text/event-stream":
		return streamSSE
	}
	return streamNone
}

// guardStream wraps an upstream body so that, if the upstream fails in the
// middle of a stream, the client receives a last error record before the
// ReverseProxy aborts the connection. Ollama itself ends a failed NDJSON
// stream with {"error":"..."}; line-parsing clients such as the official Go
// client only notice a failure that way, since they treat a bare cut as a
// normal end.
func guardStream(res *http.Response, d dialect.Dialect, body io.ReadCloser) io.ReadCloser {
	kind := kindOf(res)
	if kind == streamNone {
		return body
	}
	return &guardedBody{ReadCloser: body, kind: kind, d: d}
}

type guardedBody struct {
	io.ReadCloser
	kind    streamKind
	d       dialect.Dialect // the error event's shape
	last    byte            // last byte passed on, to know whether a record is open
	pending []byte          // the error record still to deliver
	err     error           // the upstream's error, returned after pending
	// started, when set, is called at the first byte of the answer.
	started func()
}

func (g *guardedBody) Read(p []byte) (int, error) {
	if g.err != nil {
		n := copy(p, g.pending)
		g.pending = g.pending[n:]
		if len(g.pending) > 0 {
			return n, nil
		}
		return n, g.err
	}
	n, err := g.ReadCloser.Read(p)
	if n > 0 {
		g.last = p[n-1]
		if g.started != nil {
			g.started()
			g.started = nil
		}
	}
	if err == nil || err == io.EOF {
		return n, err
	}
	g.err = err
	var told interface{ Reported() bool }
	if errors.As(err, &told) && told.Reported() {
		return n, nil // the stream ended with its own error record
	}
	g.pending = errorRecord(g.kind, g.d, g.last, "ollama stream interrupted: "+err.Error())
	return n, nil
}

// errorRecord renders msg as the stream's final record, starting on a fresh
// line (or event) even if the upstream died in the middle of one.
func errorRecord(kind streamKind, d dialect.Dialect, last byte, msg string) []byte {
	var rec []byte
	if kind == streamSSE {
		if last != 0 && last != '\n' {
			rec = append(rec, '\n', '\n')
		} else if last == '\n' {
			rec = append(rec, '\n')
		}
		return append(rec, d.ErrorEvent(msg)...)
	}
	line, _ := json.Marshal(map[string]string{"error": msg})
	if last != 0 && last != '\n' {
		rec = append(rec, '\n')
	}
	rec = append(rec, line...)
	return append(rec, '\n')
}
