package openwebui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Path is the route of a user's memories, under Open WebUI's address (its
// memories router is mounted at /api/v1/memories; FastAPI redirects the
// form without the final slash).
const Path = "api/v1/memories/"

// maxAnswer bounds the answer read: a person's memories are short notes,
// thousands of them fit many times over.
const maxAnswer = 64 << 20

// The details Open WebUI (backend/open_webui/constants.py, utils/auth.py)
// answers with, where one status has several causes.
const (
	// detailProhibited: 403 from the memories router when the user lacks
	// the features.memories permission; 401 from get_verified_user for an
	// account still pending.
	detailProhibited = "You do not have permission to access this resource. Please contact your administrator for assistance."
	// detailNoToken: 403 when the request carried no token at all.
	detailNoToken = "Not authenticated"
	// detailNoRoute: FastAPI's own 404, for a route that does not exist
	// (memories turned off answer ERROR_MESSAGES.NOT_FOUND instead).
	detailNoRoute = "Not Found"
)

// Client reads memories from an Open WebUI.
type Client struct {
	// Base is Open WebUI's address, e.g. http://127.0.0.1:3000 (where its
	// users open it).
	Base *url.URL
	// Token is a user's API key (sk-...) or session token (JWT): Open
	// WebUI answers with that user's memories.
	Token string
	// HTTP sends the request; nil: a client with dial, TLS and answer
	// timeouts.
	HTTP *http.Client
	// UserAgent names the client; empty: Go's.
	UserAgent string
}

// StatusError is an answer of Open WebUI other than 200 OK, said so that
// a person can act on it.
type StatusError struct {
	Status int
	// Detail is Open WebUI's own explanation ({"detail": ...}), when it
	// sent one.
	Detail string
	msg    string
}

func (e *StatusError) Error() string { return e.msg }

// newHTTPClient is the client used when Client.HTTP is nil.
func newHTTPClient() *http.Client {
	return &http.Client{
		Timeout: 2 * time.Minute,
		Transport: &http.Transport{
			DialContext:           (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
			TLSHandshakeTimeout:   10 * time.Second,
			ResponseHeaderTimeout: time.Minute,
		},
	}
}

// Memories returns the memories of the token's user. Every error names
// the Open WebUI asked (without credentials), never the token.
func (c *Client) Memories(ctx context.Context) ([]Memory, error) {
	ms, err := c.memories(ctx)
	if err != nil {
		return nil, c.redact(err)
	}
	return ms, nil
}

func (c *Client) memories(ctx context.Context) ([]Memory, error) {
	at := Server(c.Base)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.Base.JoinPath(Path).String(), nil)
	if err != nil {
		return nil, fmt.Errorf("Open WebUI at %s: %w", at, err)
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	req.Header.Set("Accept", "application/json")
	if c.UserAgent != "" {
		req.Header.Set("User-Agent", c.UserAgent)
	}
	hc := c.HTTP
	if hc == nil {
		hc = newHTTPClient()
	}
	res, err := hc.Do(req)
	if err != nil {
		return nil, unreachable(ctx, at, err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, maxAnswer+1))
	switch {
	case err != nil:
		return nil, fmt.Errorf("reading the answer of Open WebUI at %s: %w", at, cause(err))
	case len(body) > maxAnswer:
		return nil, fmt.Errorf("the answer of Open WebUI at %s is larger than %d MiB: no list of memories is that long", at, maxAnswer>>20)
	case res.StatusCode != http.StatusOK:
		return nil, statusError(at, req.URL.Path, res, body)
	}
	ms, err := Decode(body)
	if webPage(res) || errors.Is(err, errWebPage) {
		return nil, fmt.Errorf("Open WebUI at %s answered GET %s with a web page, not the JSON of its memories API: is %s the address of Open WebUI itself, not of a sign-in page or a proxy in front of it?", at, req.URL.Path, at)
	}
	if err != nil {
		return nil, fmt.Errorf("Open WebUI at %s, GET %s: %w", at, req.URL.Path, err)
	}
	return ms, nil
}

// webPage reports whether res is HTML by its Content-Type.
func webPage(res *http.Response) bool {
	mt, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type"))
	return mt == "text/html" || mt == "application/xhtml+xml"
}

// unreachable says that the Open WebUI at at did not answer, and why.
func unreachable(ctx context.Context, at string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("asking Open WebUI at %s: %w", at, ctx.Err())
	}
	err = cause(err)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return fmt.Errorf("Open WebUI at %s did not answer in time: %w", at, err)
	}
	return fmt.Errorf("Open WebUI at %s does not answer: %w", at, err)
}

// cause is err without the *url.Error around it, which repeats the
// method and URL (the URL may hold credentials).
func cause(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// statusError says what an answer other than 200 to GET path means, from
// Open WebUI's routes: the memories router and the authentication before
// it.
func statusError(at, path string, res *http.Response, body []byte) error {
	e := &StatusError{Status: res.StatusCode, Detail: detailOf(res, body)}
	said := res.Status
	if e.Detail != "" {
		said = fmt.Sprintf("%d: %s", res.StatusCode, e.Detail)
	}
	switch {
	case e.Status == http.StatusUnauthorized && e.Detail == detailProhibited:
		e.msg = fmt.Sprintf("the account of that token may not use Open WebUI at %s yet (%s): an admin activates it in Admin Panel → Users", at, said)
	case e.Status == http.StatusUnauthorized:
		e.msg = fmt.Sprintf("Open WebUI at %s refused the token (%s): create an API key under Settings → Account → API keys (or copy the JWT token shown there) and pass it with --token", at, said)
	case e.Status == http.StatusForbidden && e.Detail == detailNoToken:
		e.msg = fmt.Sprintf("no token reached Open WebUI at %s (%s): does a proxy in front of it drop the Authorization header?", at, said)
	case e.Status == http.StatusForbidden && strings.Contains(strings.ToLower(e.Detail), "api key"):
		e.msg = fmt.Sprintf("Open WebUI at %s does not take this API key here (%s): an admin enables API keys in Admin Panel → Settings → General (and, for a user who is no admin, the API Keys permission; with endpoint restrictions on, /api/v1/memories must be allowed); or pass the JWT token from Settings → Account instead", at, said)
	case e.Status == http.StatusForbidden:
		e.msg = fmt.Sprintf("this user may not use memories on Open WebUI at %s (%s): an admin allows it in Admin Panel → Users → Groups, Features → Memories (in the default permissions or a group of the user)", at, said)
	case e.Status == http.StatusNotFound && e.Detail != "" && e.Detail != detailNoRoute:
		e.msg = fmt.Sprintf("memories are turned off on Open WebUI at %s (%s): an admin turns them on in Admin Panel → Settings → General → Memories (or sets ENABLE_MEMORIES=true)", at, said)
	case e.Status == http.StatusNotFound:
		e.msg = fmt.Sprintf("Open WebUI at %s has no memories API (%s, for GET %s): is %s the address of Open WebUI, where its users open it?", at, said, path, at)
	case e.Status >= 500:
		e.msg = fmt.Sprintf("Open WebUI at %s failed to list the memories (%s)", at, said)
	default:
		e.msg = fmt.Sprintf("Open WebUI at %s answered GET %s with %s", at, path, said)
	}
	return e
}

// detailOf is the "detail" of a FastAPI error answer ({"detail": "..."},
// or {"detail": {"message": "..."}}), shortened; "" when there is none.
func detailOf(res *http.Response, body []byte) string {
	if webPage(res) {
		return ""
	}
	var v struct {
		Detail json.RawMessage `json:"detail"`
	}
	if json.Unmarshal(body, &v) != nil || len(v.Detail) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(v.Detail, &s) != nil {
		var obj struct {
			Message string `json:"message"`
		}
		_ = json.Unmarshal(v.Detail, &obj)
		s = obj.Message
	}
	return clip(strings.Join(strings.Fields(s), " "), 300)
}

// redact masks the token wherever err's message holds it (a proxy may
// echo a header back).
func (c *Client) redact(err error) error {
	tok := c.Token
	if len(tok) < 4 || !strings.Contains(err.Error(), tok) {
		return err
	}
	msg := strings.ReplaceAll(err.Error(), tok, "xxxxx")
	var se *StatusError
	if errors.As(err, &se) {
		return &StatusError{Status: se.Status, Detail: strings.ReplaceAll(se.Detail, tok, "xxxxx"), msg: msg}
	}
	return errors.New(msg)
}
