// Package cloud serves cloud models behind Ollama's API: an
// OpenAI-compatible provider (OpenRouter, OpenAI, a LiteLLM or vLLM
// server) answers the names listed in [cloud.models]. Provider
// is an http.RoundTripper that vera's forward step uses in place of
// Ollama's: it translates Ollama's /api/chat and /api/generate to chat
// completions and the answer back to NDJSON, and forwards the OpenAI
// dialects with the model name mapped. It is pure translation plus HTTP;
// memory and recording stay in the proxy's pipeline.
package cloud

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vera-proxy/vera/dialect"
)

// DefaultContextLength is a cloud model's window when its provider's
// /models gives none.
const DefaultContextLength = 32768

// Config is a provider's settings, resolved.
type Config struct {
	Base *url.URL // api_base, e.g. https://openrouter.ai/api/v1
	Key  string   // the API key; never shown
	// Models maps the names clients pick to cloud models.
	Models  map[string]string
	Headers map[string]string
	// ResponseHeaderTimeout bounds the wait for the cloud's first byte;
	// 0 means 60s.
	ResponseHeaderTimeout time.Duration
}

// Provider is one OpenAI-compatible provider.
type Provider struct {
	cfg  Config
	rt   http.RoundTripper
	host string

	// MaxRetries is how many times a 429 or 5xx that came before any byte
	// of the answer is retried; 0 means 3, negative none.
	MaxRetries int
	// Backoff is the wait before retry n (from 1) when the provider sets
	// no Retry-After; nil means 0.5s doubling, at most 8s.
	Backoff func(n int) time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Observe, when set, hears of every request sent to the provider: its
	// status (0 when none came) and whether it was a retry.
	Observe func(status int, retry bool)

	catalogMu sync.Mutex
	catalog   map[string]Model
	fetched   time.Time
	fetchedOK bool
	fetching  chan struct{} // closed when the fetch under way ends
}

// New returns a Provider sending through transport (nil: a default
// transport with the response header timeout).
func New(cfg Config, transport http.RoundTripper) *Provider {
	if cfg.ResponseHeaderTimeout <= 0 {
		cfg.ResponseHeaderTimeout = 60 * time.Second
	}
	if transport == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.ResponseHeaderTimeout = cfg.ResponseHeaderTimeout
		transport = t
	}
	return &Provider{cfg: cfg, rt: transport, host: cfg.Base.Host}
}

// Host names the provider in messages.
func (p *Provider) Host() string { return p.host }

// URL is where the forward step sends a cloud model's chats: the
// provider's scheme and host; the path is the client's, which RoundTrip
// maps.
func (p *Provider) URL() *url.URL { return &url.URL{Scheme: p.cfg.Base.Scheme, Host: p.cfg.Base.Host} }

// Model returns the cloud model a name stands for. "name" and
// "name:latest" are the same name, as in Ollama.
func (p *Provider) Model(name string) (string, bool) {
	if m, ok := p.cfg.Models[name]; ok {
		return m, true
	}
	for n, m := range p.cfg.Models {
		if canonical(n) == canonical(name) {
			return m, true
		}
	}
	return "", false
}

func canonical(name string) string {
	if !strings.Contains(name, ":") {
		return name + ":latest"
	}
	return name
}

// Names lists the names clients may pick, sorted.
func (p *Provider) Names() []string {
	names := make([]string, 0, len(p.cfg.Models))
	for n := range p.cfg.Models {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// redact takes the key out of a text that came from the provider (some
// echo it in their errors).
func (p *Provider) redact(s string) string {
	if len(p.cfg.Key) >= 4 {
		s = strings.ReplaceAll(s, p.cfg.Key, "[redacted]")
	}
	return s
}

func (p *Provider) now() time.Time {
	if p.Now != nil {
		return p.Now()
	}
	return time.Now()
}

// Routes lists the routes a cloud model is served on, for messages.
const Routes = "/api/chat, /api/generate, /v1/chat/completions and /v1/responses"

// Serves reports whether a cloud model is served on a route (Routes).
func Serves(path string) bool {
	switch path {
	case "/api/chat", "/api/generate", "/v1/chat/completions", "/v1/responses":
		return true
	}
	return false
}

// RoundTrip serves a chat for a cloud name, on the route the client used:
// /api/chat and /api/generate are translated, /v1/chat/completions and
// /v1/responses are forwarded with the model mapped. The answer's errors
// come in the route's own shape and say which provider failed.
func (p *Provider) RoundTrip(r *http.Request) (*http.Response, error) { return p.Serve(r, "") }

// Serve is RoundTrip with the name Ollama-shaped answers report: the
// model the client asked for, when it is not the cloud name in the body
// (a fallback); "" reports the body's.
func (p *Provider) Serve(r *http.Request, report string) (*http.Response, error) {
	body, err := io.ReadAll(r.Body)
	r.Body.Close()
	if err != nil {
		return nil, err
	}
	var probe struct {
		Model string `json:"model"`
	}
	_ = json.Unmarshal(body, &probe)
	cloudModel, ok := p.Model(probe.Model)
	if !ok {
		return p.errorResponse(r, http.StatusNotFound, fmt.Sprintf("model %q is not one of the cloud models", probe.Model)), nil
	}
	switch path := r.URL.Path; path {
	case "/api/chat", "/api/generate":
		req, err := translateChat(body, cloudModel, path == "/api/generate", p.cfg.Base.Host == "api.openai.com")
		if err != nil {
			return p.errorResponse(r, http.StatusBadRequest, err.Error()), nil
		}
		res, err := p.send(r, "/chat/completions", req.body)
		if err != nil || res.StatusCode != http.StatusOK {
			return p.failed(r, res, err)
		}
		if report != "" {
			req.model = report
		}
		a := &answer{model: req.model, generate: path == "/api/generate", start: p.now(), now: p.now}
		return p.ollamaAnswer(res, a, req.stream)
	case "/v1/chat/completions", "/v1/responses":
		mapped, err := withModel(body, cloudModel)
		if err != nil {
			return p.errorResponse(r, http.StatusBadRequest, err.Error()), nil
		}
		res, err := p.send(r, strings.TrimPrefix(path, "/v1"), mapped)
		if err == nil && res.StatusCode == http.StatusNotFound && path == "/v1/responses" {
			res.Body.Close()
			return p.errorResponse(r, http.StatusBadRequest, fmt.Sprintf("cloud provider %s does not serve the Responses API for %s; use /v1/chat/completions", p.host, probe.Model)), nil
		}
		if err != nil || res.StatusCode != http.StatusOK {
			return p.failed(r, res, err)
		}
		return res, nil
	}
	return p.errorResponse(r, http.StatusBadRequest, fmt.Sprintf("%s is not served for cloud models; use /api/chat, /api/generate, /v1/chat/completions or /v1/responses", r.URL.Path)), nil
}

// withModel sets a body's model field, leaving every other field as it is.
func withModel(body []byte, model string) ([]byte, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, errors.New("the request is not a JSON object")
	}
	b, _ := json.Marshal(model)
	m["model"] = b
	return json.Marshal(m)
}

// send posts body to the provider's path, retrying a 429 or 5xx that came
// before any byte of the answer. Only what the cloud needs is sent: none
// of the client's headers (its user id, its own Authorization) leave.
func (p *Provider) send(r *http.Request, path string, body []byte) (*http.Response, error) {
	u := *p.cfg.Base
	u.Path = strings.TrimRight(u.Path, "/") + path
	retries := p.MaxRetries
	if retries == 0 {
		retries = 3
	}
	for attempt := 0; ; attempt++ {
		req, err := http.NewRequestWithContext(r.Context(), http.MethodPost, u.String(), bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if p.cfg.Key != "" {
			req.Header.Set("Authorization", "Bearer "+p.cfg.Key)
		}
		for k, v := range p.cfg.Headers {
			req.Header.Set(k, v)
		}
		res, err := p.rt.RoundTrip(req)
		if p.Observe != nil {
			status := 0
			if err == nil {
				status = res.StatusCode
			}
			p.Observe(status, attempt > 0)
		}
		if err != nil {
			return nil, err
		}
		if attempt >= retries || (res.StatusCode != http.StatusTooManyRequests && res.StatusCode < 500) {
			return res, nil
		}
		wait, ok := p.retryAfter(res, attempt+1)
		if !ok {
			return res, nil
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10))
		res.Body.Close()
		select {
		case <-r.Context().Done():
			return nil, r.Context().Err()
		case <-time.After(wait):
		}
	}
}

// maxRetryWait is the longest vera waits before a retry: a provider that
// asks for longer gets its error passed on.
const maxRetryWait = 10 * time.Second

// retryAfter is the wait before retry n: the provider's Retry-After
// (seconds or a date), else the backoff.
func (p *Provider) retryAfter(res *http.Response, n int) (time.Duration, bool) {
	if ra := strings.TrimSpace(res.Header.Get("Retry-After")); ra != "" {
		var d time.Duration
		if s, err := strconv.Atoi(ra); err == nil {
			d = time.Duration(s) * time.Second
		} else if t, err := http.ParseTime(ra); err == nil {
			d = t.Sub(p.now())
		}
		return max(d, 0), d <= maxRetryWait
	}
	if p.Backoff != nil {
		return p.Backoff(n), true
	}
	return min(500*time.Millisecond<<(n-1), 8*time.Second), true
}

// ollamaAnswer turns the cloud's answer into Ollama's.
func (p *Provider) ollamaAnswer(res *http.Response, a *answer, stream bool) (*http.Response, error) {
	out := &http.Response{StatusCode: http.StatusOK, Status: "200 OK", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: http.Header{}, Request: res.Request}
	if ct := res.Header.Get("Content-Type"); stream && strings.HasPrefix(ct, "text/event-stream") {
		out.Header.Set("Content-Type", "application/x-ndjson")
		out.Body = newNDJSON(res.Body, a, p.host, p.redact)
		out.ContentLength = -1
		return out, nil
	}
	// Not streamed, or a provider that answered a stream request with one
	// object.
	body, err := io.ReadAll(io.LimitReader(res.Body, 64<<20))
	res.Body.Close()
	if err != nil {
		return nil, err
	}
	whole, err := wholeAnswer(body, a)
	if err != nil {
		return p.errorResponse(res.Request, http.StatusBadGateway, p.redact(fmt.Sprintf("cloud provider %s: %v", p.host, err))), nil
	}
	if stream {
		out.Header.Set("Content-Type", "application/x-ndjson")
		whole = append(whole, '\n')
	} else {
		out.Header.Set("Content-Type", "application/json; charset=utf-8")
	}
	out.Body = io.NopCloser(bytes.NewReader(whole))
	out.ContentLength = int64(len(whole))
	return out, nil
}

// failed answers a request the cloud refused or could not be reached
// for, in the route's error shape.
func (p *Provider) failed(r *http.Request, res *http.Response, err error) (*http.Response, error) {
	if err != nil {
		if r.Context().Err() != nil {
			return nil, err // the client hung up
		}
		return p.errorResponse(r, http.StatusBadGateway, fmt.Sprintf("cloud provider %s cannot be reached: %s", p.host, errorText(err))), nil
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
	msg := providerMessage(b)
	if msg == "" {
		msg = http.StatusText(res.StatusCode)
	}
	// The client's request to vera was fine: a key the provider refuses
	// or a provider failing is a bad gateway, not the client's 401 (the
	// ollama CLI would ask its user to sign in to ollama.com).
	code := res.StatusCode
	switch {
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		msg += " (check the API key in the variable cloud.api_key_env names)"
		code = http.StatusBadGateway
	case code >= 500:
		code = http.StatusBadGateway
	}
	return p.errorResponse(r, code, p.redact(fmt.Sprintf("cloud provider %s answered %d: %s", p.host, res.StatusCode, msg))), nil
}

// errorText is an error without the URL (which may carry a key in its
// query) that net/http puts in front.
func errorText(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "no answer in time"
	}
	return err.Error()
}

// providerMessage reads an error body's message: OpenAI's {"error":
// {"message"}}, or {"error": "..."}, or {"message": "..."}.
func providerMessage(b []byte) string {
	var e struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
	}
	if json.Unmarshal(b, &e) != nil {
		return strings.TrimSpace(string(b[:min(len(b), 300)]))
	}
	var inner providerError
	if json.Unmarshal(e.Error, &inner) == nil && inner.Message != "" {
		return inner.Message
	}
	var s string
	if json.Unmarshal(e.Error, &s) == nil && s != "" {
		return s
	}
	return e.Message
}

// errorResponse is an error in the shape of the request's route: the
// route's dialect draws it, as it draws vera's own.
func (p *Provider) errorResponse(r *http.Request, code int, msg string) *http.Response {
	body := dialect.Of(r.URL.Path).ErrorBody(code, msg)
	b, _ := json.Marshal(body)
	return &http.Response{
		StatusCode: code, Status: fmt.Sprintf("%d %s", code, http.StatusText(code)),
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        http.Header{"Content-Type": {"application/json; charset=utf-8"}},
		Body:          io.NopCloser(bytes.NewReader(b)),
		ContentLength: int64(len(b)),
		Request:       r,
	}
}
