package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
)

// StatusClientClosed is nginx's code for a client that hung up before the
// answer; Ollama's clients never see it, but logs and metrics do.
const StatusClientClosed = 499

// statusError carries the HTTP status an error should be answered with.
type statusError struct {
	code int
	msg  string
	err  error
}

func (e *statusError) Error() string {
	if e.err != nil {
		return e.msg + ": " + e.err.Error()
	}
	return e.msg
}

func (e *statusError) Unwrap() error { return e.err }

// httpError returns an error answered with code and msg (plus err's text).
func httpError(code int, msg string, err error) error {
	return &statusError{code: code, msg: msg, err: err}
}

// statusOf maps an error to the status it is answered with.
func statusOf(err error) int {
	var se *statusError
	if errors.As(err, &se) {
		return se.code
	}
	if errors.Is(err, context.Canceled) {
		return StatusClientClosed
	}
	return http.StatusInternalServerError
}

// upstreamError classifies a failed round trip to Ollama: the client hung
// up (499), Ollama was too slow to answer (504), or it could not be reached
// at all (502).
func upstreamError(ctx context.Context, base string, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(ctx.Err(), context.Canceled) {
		return httpError(StatusClientClosed, "client closed request", err)
	}
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout() {
		return httpError(http.StatusGatewayTimeout, "ollama timed out at "+base, err)
	}
	return httpError(http.StatusBadGateway, "ollama unreachable at "+base, err)
}

// writeError answers with Ollama's error shape {"error":"..."}, or OpenAI's
// {"error":{"message":...,"type":...}} on the OpenAI-compatible /v1 routes.
// It must only be called before any byte of the response has gone out.
func writeError(w http.ResponseWriter, r *http.Request, err error) {
	code := statusOf(err)
	msg := err.Error()
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Del("Content-Length")
	w.WriteHeader(code)
	var body any = map[string]string{"error": msg}
	if isOpenAIPath(r.URL.Path) {
		body = map[string]any{"error": map[string]any{"message": msg, "type": openAIErrorType(code)}}
	}
	_ = json.NewEncoder(w).Encode(body)
}

func isOpenAIPath(p string) bool { return strings.HasPrefix(p, "/v1/") }

func openAIErrorType(code int) string {
	switch {
	case code == http.StatusBadRequest:
		return "invalid_request_error"
	case code == http.StatusNotFound:
		return "not_found_error"
	case code >= 500:
		return "api_error"
	default:
		return fmt.Sprintf("http_%d", code)
	}
}
