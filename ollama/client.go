// Package ollama is vera's one client for Ollama's own API: what vera asks
// Ollama for itself (its version, the models it has and runs, a model's
// settings, embeddings, a non-streamed chat or generation, loading and
// unloading a model), as opposed to the requests of vera's users, which the
// proxy forwards byte for byte.
//
// It also keeps the model facts a chat needs on every request (the context
// window a model runs with, its Modelfile SYSTEM) in a small cache:
// ModelInfo.
//
// The package depends on nothing else of vera's: memory, the curator, the
// proxy and `vera check` all build on it.
package ollama

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// maxAnswer bounds an answer's body: embeddings of a large batch are the
// largest thing Ollama sends back to vera.
const maxAnswer = 256 << 20

// maxErrorBody bounds how much of an error answer is read for its message.
const maxErrorBody = 64 << 10

// Client calls the Ollama at one base URL. Its methods are safe for
// concurrent use. It sets no overall timeout: a cold model load may take
// minutes, so callers bound a call with their context, and the transport
// bounds connecting and waiting for headers.
type Client struct {
	base *url.URL
	http *http.Client
}

// New returns a client for the Ollama at base (its path, if any, prefixes
// every route, and its query is kept: a gateway may take its key there)
// through transport. A nil transport means NewTransport(0).
func New(base *url.URL, transport http.RoundTripper) *Client {
	if transport == nil {
		transport = NewTransport(0)
	}
	return &Client{base: base, http: &http.Client{Transport: transport}}
}

// NewTransport returns a transport for Ollama that limits only how long
// connecting and waiting for response headers may take: a model load or a
// stream may last as long as it needs. Compression is off so that bytes
// pass through exactly as Ollama sent them.
func NewTransport(responseHeaderTimeout time.Duration) *http.Transport {
	return &http.Transport{
		DialContext: (&net.Dialer{
			Timeout:   10 * time.Second,
			KeepAlive: 30 * time.Second,
		}).DialContext,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: responseHeaderTimeout,
		ExpectContinueTimeout: time.Second,
		MaxIdleConns:          256,
		MaxIdleConnsPerHost:   64,
		IdleConnTimeout:       90 * time.Second,
		DisableCompression:    true,
	}
}

// Base returns the URL the client calls. It may hold secrets: show it
// redacted.
func (c *Client) Base() *url.URL { return c.base }

// StatusError is an answer of Ollama's other than 200 OK, or an error
// record inside a 200 answer.
type StatusError struct {
	Method, Path string
	// StatusCode is the HTTP status, Status its text ("404 Not Found").
	StatusCode int
	Status     string
	// Message is Ollama's {"error": ...}, or the start of the body when
	// it is not one (a gateway's page).
	Message string
}

func (e *StatusError) Error() string {
	s := fmt.Sprintf("%s %s: %s", e.Method, e.Path, e.Status)
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// IsNotFound reports whether err is Ollama's 404: a model that is not
// pulled (or a route this Ollama does not have).
func IsNotFound(err error) bool {
	var se *StatusError
	return errors.As(err, &se) && se.StatusCode == http.StatusNotFound
}

// do sends body (nil for none) to path and decodes the answer into out.
// Transport errors are returned as they are (a *url.Error, which quotes the
// URL: callers showing it redact it); an answer that is not 200 is a
// *StatusError.
func (c *Client) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("%s %s: %w", method, path, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base.JoinPath(path).String(), rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	res, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return statusError(method, path, res)
	}
	raw, err := io.ReadAll(io.LimitReader(res.Body, maxAnswer))
	if err != nil {
		return fmt.Errorf("%s %s: reading the answer: %w", method, path, err)
	}
	// Ollama may answer 200 and still fail (an error record in place of
	// the answer).
	var e struct {
		Error string `json:"error"`
	}
	if bytes.Contains(raw, []byte(`"error"`)) && json.Unmarshal(raw, &e) == nil && e.Error != "" {
		return &StatusError{Method: method, Path: path, StatusCode: res.StatusCode, Status: res.Status, Message: e.Error}
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("%s %s: not an Ollama answer (%.200q): %w", method, path, raw, err)
	}
	return nil
}

// statusError reads Ollama's {"error": ...} from a failed answer.
func statusError(method, path string, res *http.Response) *StatusError {
	raw, _ := io.ReadAll(io.LimitReader(res.Body, maxErrorBody))
	var e struct {
		Error string `json:"error"`
	}
	msg := ""
	if json.Unmarshal(raw, &e) == nil {
		msg = e.Error
	}
	if msg = strings.TrimSpace(msg); msg == "" {
		msg = strings.TrimSpace(strings.ToValidUTF8(string(raw), "\uFFFD"))
		if r := []rune(msg); len(r) > 200 {
			msg = string(r[:200]) + "…"
		}
	}
	return &StatusError{Method: method, Path: path, StatusCode: res.StatusCode, Status: res.Status, Message: msg}
}

// AllowsOrigin reports whether Ollama serves a browser page of origin
// (its OLLAMA_ORIGINS and defaults): it refuses others with 403.
func (c *Client) AllowsOrigin(ctx context.Context, origin string) (bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base.JoinPath("/api/version").String(), nil)
	if err != nil {
		return false, err
	}
	req.Header.Set("Origin", origin)
	res, err := c.http.Do(req)
	if err != nil {
		return false, err
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 1<<16))
	switch {
	case res.StatusCode == http.StatusForbidden:
		return false, nil
	case res.StatusCode/100 == 2:
		return true, nil
	}
	return false, fmt.Errorf("GET /api/version with an Origin: %s", res.Status)
}

// Version returns Ollama's version (GET /api/version).
func (c *Client) Version(ctx context.Context) (string, error) {
	var out struct {
		Version string `json:"version"`
	}
	if err := c.do(ctx, http.MethodGet, "/api/version", nil, &out); err != nil {
		return "", err
	}
	return out.Version, nil
}
