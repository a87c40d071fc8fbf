package proxy

import (
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"time"

	"github.com/vera-proxy/vera/ollama"
	"github.com/vera-proxy/vera/proxy/dialect"
)

// NewTransport returns the transport vera uses to reach Ollama: it limits
// only connecting and waiting for response headers, never a stream
// (ollama.NewTransport).
func NewTransport(responseHeaderTimeout time.Duration) *http.Transport {
	return ollama.NewTransport(responseHeaderTimeout)
}

// upstream is where a request goes: an address and the transport that
// reaches it. Today every request goes to Ollama; cloud models and tier
// routing (later issues) choose another per request, and the stream
// guard, the tee and recording stay the same.
type upstream struct {
	url       *url.URL
	transport http.RoundTripper
	name      string // for metrics: "ollama" (the default) or "cloud"
}

// newReverseProxy builds the httputil.ReverseProxy that forwards to up,
// teeing each answer through tee when it is set, and taking inline
// thinking out of a chat's answer with strip (routing.strip_think). A
// proxy is a few fields: one per request costs nothing next to the
// request itself.
func (s *Server) newReverseProxy(up upstream, d dialect.Dialect, tee *answerTee, rename *[2]string, strip bool) *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			// SetURL also rewrites Host to the upstream's, as Ollama checks it.
			pr.SetURL(up.url)
			s.outbound(pr.Out, up)
		},
		Transport:     s.timed(up),
		FlushInterval: -1, // every write reaches the client at once
		BufferPool:    s.buffers,
		ErrorLog:      slogAdapter(s.log),
		ModifyResponse: func(res *http.Response) error {
			dropCORS(res.Header)
			body := res.Body
			if strip && res.StatusCode == http.StatusOK {
				// Before the tee: what is stored is what the client sees.
				if f := d.StripThinking(body, streamed(res, d)); f != nil {
					body = f
					res.Header.Del("Content-Length")
					res.ContentLength = -1
				}
			}
			if tee != nil {
				body = tee.wrap(res, body)
			}
			res.Body = guardStream(res, d, body)
			if g, ok := res.Body.(*guardedBody); ok && s.Metrics != nil {
				if n, ok := res.Request.Context().Value(errorNoteKey{}).(*errorNote); ok {
					g.started = func() { s.Metrics.streamStarted(d, time.Since(n.start)) }
				}
			}
			if rename != nil {
				// A routed chat: the answer names the model asked for.
				res.Body = newRenamer(res.Body, rename[0], rename[1])
				res.Header.Del("Content-Length")
				res.ContentLength = -1
			}
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if bodyStalled(r) {
				w.Header().Set("Connection", "close")
				writeError(w, r.Context(), d, httpError(http.StatusRequestTimeout, "request body stalled: the client sent nothing for too long", nil))
				return
			}
			if r.Method == http.MethodHead && r.URL.Path == "/" {
				// The heartbeat the ollama CLI sends before every command
				// (api.Client.Heartbeat): it reports any failure as
				// "something went wrong", since a HEAD answer has no body.
				// vera runs, so the command goes on to its real call,
				// which gets the 502 and vera's reason.
				noteError(r.Context(), upstreamError(r.Context(), up.url.String(), err))
				w.Header().Set("Content-Type", "text/plain; charset=utf-8")
				w.WriteHeader(http.StatusOK)
				return
			}
			writeError(w, r.Context(), d, upstreamError(r.Context(), up.url.String(), err))
		},
	}
}

// passthrough forwards a request vera does not own, with errors in the
// shape of d.
func (s *Server) passthrough(w http.ResponseWriter, r *http.Request, d dialect.Dialect) {
	if enableFullDuplex(w, r) {
		// With full duplex on, net/http drains an unread body only after the
		// handler returns, and that drain restarts the connection's
		// background read just when the server goes on to read the next
		// request: "invalid concurrent Body.Read call" (golang/go#68560). It
		// happens whenever Ollama cannot be reached, since nothing then
		// reads the body. Closing it here, before the handler returns, takes
		// that drain out of the server's way. ReverseProxy never closes the
		// inbound body itself: it hands the Transport a no-op-close wrapper.
		defer r.Body.Close()
	}
	s.passthroughs[d].ServeHTTP(w, r)
}

// enableFullDuplex stops net/http from draining and closing the request
// body when the response header is written, and reports whether it did. By
// default an HTTP/1 server does that (so simple handlers cannot deadlock a
// client), but in a proxy the Transport's write loop may still be reading
// the same body: after copying Content-Length bytes it reads once more to
// check for EOF. If the upstream answers within that window, the server
// closes the body under it, the read fails with "invalid Read on closed
// Body", and the Transport tears down the upstream connection in the middle
// of the streamed response (golang/go#40747; about 1 stream in 1000 here).
// vera lets the Transport read every body to its end, so full duplex is both
// safe and what a proxy means.
func enableFullDuplex(w http.ResponseWriter, r *http.Request) bool {
	if r.ContentLength == 0 || r.ProtoMajor != 1 {
		return false
	}
	return http.NewResponseController(w).EnableFullDuplex() == nil
}

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

// bufferPool recycles the ReverseProxy's 32 KiB copy buffers across
// requests, so a streamed answer costs no allocation per request for them.
type bufferPool struct{ pool sync.Pool }

func (p *bufferPool) Get() []byte {
	if b, ok := p.pool.Get().(*[]byte); ok {
		return *b
	}
	return make([]byte, 32*1024)
}

func (p *bufferPool) Put(b []byte) { p.pool.Put(&b) }

// timed wraps up's transport with the upstream metrics.
func (s *Server) timed(up upstream) http.RoundTripper {
	name := up.name
	if name == "" {
		name = "ollama"
	}
	return &timedTransport{s: s, name: name, next: up.transport}
}
