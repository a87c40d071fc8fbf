// Package httperr is vera's one error model for HTTP answers, used by the
// proxy, the admin routes and the cloud alike: an error carries the status
// it is answered with and the message its client reads, apart from the
// cause the request's log line keeps (as Tailscale's tsweb.HTTPError
// does). Rendering is the caller's: each dialect draws the message in its
// own shape.
package httperr

import (
	"context"
	"errors"
	"net/http"
)

// StatusClientClosed is nginx's code for a client that hung up before the
// answer; Ollama's clients never see it, but logs and metrics do.
const StatusClientClosed = 499

// Error is an error answered with Code. The client reads Msg, followed by
// the cause's text when there is one; the log line keeps the cause whole.
type Error struct {
	Code int
	Msg  string
	Err  error
}

func (e *Error) Error() string {
	if e.Err != nil {
		return e.Msg + ": " + e.Err.Error()
	}
	return e.Msg
}

func (e *Error) Unwrap() error { return e.Err }

// New returns an error answered with code and msg (plus cause's text).
func New(code int, msg string, cause error) error {
	return &Error{Code: code, Msg: msg, Err: cause}
}

// Status maps an error to the status it is answered with: its own, 499
// when the client went away, else 500.
func Status(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	if errors.Is(err, context.Canceled) {
		return StatusClientClosed
	}
	return http.StatusInternalServerError
}
