package proxy

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"

	"github.com/vera-proxy/vera/cloud"
	"github.com/vera-proxy/vera/dialect"
)

// fallbacks sends chats for local models to the fallback cloud model
// (cloud.fallback_model) while Ollama cannot be reached; active is set
// while it does, so that the outage is logged once, and its end.
type fallbacks struct {
	model   string
	ollama  http.RoundTripper
	cloud   *cloud.Provider
	metrics *Metrics
	log     *slog.Logger
	active  atomic.Bool
}

// used logs, once per outage, that chats go to the cloud.
func (fs *fallbacks) used(asked string) {
	if fs.active.CompareAndSwap(false, true) {
		fs.log.Warn("Ollama unreachable: chats for local models go to the fallback cloud model until it is back",
			slog.String("fallback_model", fs.model), slog.String("model_asked", asked))
	}
}

// fallback sends a chat to Ollama and, when Ollama cannot be reached, to
// the fallback cloud model, with X-Vera-Fallback on the answer. Nothing
// was sent or received when it switches: the client sees one answer.
type fallback struct {
	to    *fallbacks
	d     dialect.Dialect
	own   []byte // the chat as the client sent it, before memory
	asked string
	// memory: the fallback plan takes the memory the chat was sent with;
	// else it gets the chat as the client sent it (the fallback's policy
	// sends less than the local model's, and memory was injected).
	memory bool
}

func (f *fallback) RoundTrip(r *http.Request) (*http.Response, error) {
	// The chat as forwarded, memory in place, kept to send again.
	sent, err := io.ReadAll(r.Body)
	r.Body.Close()
	if err != nil {
		return nil, err
	}
	r.Body = io.NopCloser(bytes.NewReader(sent))
	res, err := f.to.ollama.RoundTrip(r)
	if err == nil && f.to.active.CompareAndSwap(true, false) {
		f.to.log.Info("Ollama is back: chats for local models go to it again")
	}
	if err == nil || r.Context().Err() != nil || !unreachable(err) {
		return res, err
	}
	withheld := !f.memory
	if withheld {
		sent = f.own // nothing remembered leaves that the cloud's policy keeps
	}
	body, err := f.d.Retarget(sent, f.to.model, false, false)
	if err != nil {
		return nil, err // never: the chat was parsed, an object
	}
	f.to.used(f.asked)
	f.to.metrics.fellBack()
	out := r.Clone(r.Context())
	out.URL = f.to.cloud.URL()
	out.URL.Path = r.URL.Path
	out.Host = out.URL.Host
	out.Body = io.NopCloser(bytes.NewReader(body))
	out.ContentLength = int64(len(body))
	res, err = f.to.cloud.Serve(out, f.asked)
	if err == nil {
		res.Header.Set("X-Vera-Fallback", f.to.model)
	}
	return res, err
}

// emptyContext is X-Vera-Context for a chat that was sent no memory.
const emptyContext = "semantic=0; recent=0; rules=0; tokens=0"

// unreachable reports whether err means nobody answered at Ollama's
// address (as opposed to a slow or failing Ollama).
func unreachable(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}
