package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"syscall"
	"time"

	"github.com/vera-proxy/vera/config"
	"github.com/vera-proxy/vera/dialect"
	"github.com/vera-proxy/vera/httperr"
)

// StatusClientClosed is nginx's code for a client that hung up before the
// answer (httperr.StatusClientClosed).
const StatusClientClosed = httperr.StatusClientClosed

// httpError returns an error answered with code and msg (plus err's text).
func httpError(code int, msg string, err error) error { return httperr.New(code, msg, err) }

// statusOf maps an error to the status it is answered with.
func statusOf(err error) int { return httperr.Status(err) }

// upstreamError classifies a failed round trip to Ollama: the client hung
// up (499), Ollama was too slow to answer (504), it could not be reached at
// all (502), or it took the request and closed the connection without an
// answer (502). base is shown redacted, and so is any URL in err's text:
// what the client reads must not carry a password.
func upstreamError(ctx context.Context, base string, err error) error {
	u, perr := url.Parse(base)
	if perr != nil {
		u = nil
	}
	shown := config.RedactURL(base)
	cause := redactedError{err: err, text: config.RedactIn(err.Error(), u)}
	if errors.Is(err, context.Canceled) || errors.Is(ctx.Err(), context.Canceled) {
		return httpError(StatusClientClosed, "client closed request", cause)
	}
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout() {
		return httpError(http.StatusGatewayTimeout, "ollama timed out at "+shown, cause)
	}
	if closedBeforeAnswer(err) {
		return httpError(http.StatusBadGateway, "ollama closed the connection before answering (it may have crashed or run out of memory)", cause)
	}
	return httpError(http.StatusBadGateway, "ollama unreachable at "+shown, cause)
}

// closedBeforeAnswer reports whether err is a connection that was made and
// then lost before the response headers came. Ollama sends a non-streamed
// answer's headers only once the answer is complete, so a runner that
// crashes or is killed for memory in the middle looks like this, and calling
// it "unreachable" would send the operator after the wrong problem. A dial
// failure (refused, no such host) is not one of these.
func closedBeforeAnswer(err error) bool {
	var oe *net.OpError
	if errors.As(err, &oe) {
		return oe.Op != "dial"
	}
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// redactedError shows an error with its secrets masked, while errors.Is and
// errors.As still see the error itself.
type redactedError struct {
	err  error
	text string
}

func (e redactedError) Error() string { return e.text }
func (e redactedError) Unwrap() error { return e.err }

// writeError answers in the shape of the route's dialect: Ollama's
// {"error":"..."}, OpenAI's {"error":{"message":...,"type":...}} on /v1,
// Anthropic's {"type":"error","error":{...}} on /v1/messages. It must only
// be called before any byte of the response has gone out.
func writeError(w http.ResponseWriter, ctx context.Context, d dialect.Dialect, err error) {
	noteError(ctx, err)
	code := statusOf(err)
	msg := err.Error()
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Del("Content-Length")
	if refused(code) {
		dropMemoryHeaders(h)
	}
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(d.ErrorBody(code, msg))
}

// errorNote carries, in a request's context, its error to its log line
// (the client is told the message in its dialect's shape, the log line
// keeps the whole cause) and its start, for the time to first byte.
type errorNote struct {
	err   error
	start time.Time
}

type errorNoteKey struct{}

// withErrorNote gives ctx a place for the request's error.
func withErrorNote(ctx context.Context) (context.Context, *errorNote) {
	n := &errorNote{}
	return context.WithValue(ctx, errorNoteKey{}, n), n
}

// noteError keeps err for the request's log line.
func noteError(ctx context.Context, err error) {
	if n, ok := ctx.Value(errorNoteKey{}).(*errorNote); ok && n.err == nil {
		n.err = err
	}
}

// refused reports whether a status refuses the request itself (who sent
// it, how, how much): such an answer says nothing of what vera remembers.
func refused(code int) bool {
	switch code {
	case http.StatusUnauthorized, http.StatusForbidden, http.StatusRequestTimeout, http.StatusRequestEntityTooLarge:
		return true
	}
	return false
}

// dropMemoryHeaders takes out the headers that tell what memory a chat got.
func dropMemoryHeaders(h http.Header) {
	h.Del("X-Vera-Context")
	h.Del("X-Vera-Memories")
}
