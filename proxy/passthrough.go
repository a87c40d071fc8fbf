package proxy

import (
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/vera-proxy/vera/dialect"
	"github.com/vera-proxy/vera/ollama"
)

// NewTransport returns the transport vera uses to reach Ollama: it limits
// only connecting and waiting for response headers, never a stream
// (ollama.NewTransport).
func NewTransport(responseHeaderTimeout time.Duration) *http.Transport {
	return ollama.NewTransport(responseHeaderTimeout)
}

// upstream is where a request goes: an address and the transport that
// reaches it: Ollama, the cloud provider, or Ollama with the fallback
// model behind it (plan). The stream guard, the tee and recording are the
// same for each.
type upstream struct {
	url       *url.URL
	transport http.RoundTripper
	name      string // for metrics: "ollama" (the default) or "cloud"
}

// forwarder builds the reverse proxies that send requests upstream, the
// passthroughs' and each chat's: vera's own credentials taken out, the
// answer's stream guarded, the upstream timed.
type forwarder struct {
	keys    keys
	buffers *bufferPool
	metrics *Metrics
	log     *slog.Logger
}

// reverseProxy builds the httputil.ReverseProxy that forwards to up,
// teeing each answer through tee when it is set, and taking inline
// thinking out of a chat's answer with strip (routing.strip_think). A
// proxy is a few fields: one per request costs nothing next to the
// request itself.
func (f *forwarder) reverseProxy(up upstream, d dialect.Dialect, tee *answerTee, rename *[2]string, strip bool) *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			// SetURL also rewrites Host to the upstream's, as Ollama checks it.
			pr.SetURL(up.url)
			f.outbound(pr.Out, up)
		},
		Transport:     f.timed(up),
		FlushInterval: -1, // every write reaches the client at once
		BufferPool:    f.buffers,
		ErrorLog:      slogAdapter(f.log),
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
			if g, ok := res.Body.(*guardedBody); ok && f.metrics != nil {
				if n, ok := res.Request.Context().Value(errorNoteKey{}).(*errorNote); ok {
					g.started = func() { f.metrics.streamStarted(d, time.Since(n.start)) }
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
func (f *forwarder) timed(up upstream) http.RoundTripper {
	name := up.name
	if name == "" {
		name = "ollama"
	}
	return &timedTransport{metrics: f.metrics, name: name, next: up.transport}
}

// outbound takes what is vera's alone out of a request it forwards: the
// Origin it has already judged (Ollama's own list must not overrule it),
// and its own credentials (an API key, the admin token), which are no
// business of Ollama's nor of whatever sits in front of it. A user:password
// in the upstream's URL goes on every request, as Basic auth.
func (f *forwarder) outbound(out *http.Request, up upstream) {
	h := out.Header
	h.Del("Origin")
	if f.keys.valid(bearerToken(h.Get("Authorization"))) {
		h.Del("Authorization")
	}
	if f.keys.valid(strings.TrimSpace(h.Get("X-Api-Key"))) {
		h.Del("X-Api-Key")
	}
	if u := up.url.User; u != nil {
		pass, _ := u.Password()
		out.SetBasicAuth(u.Username(), pass)
	}
}
