package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/vera-proxy/vera/memory"
)

// Client calls a vera's memory routes: what `vera memories` uses, against
// a running vera or against the routes served in-process over the store.
type Client struct {
	// Base is vera's address, e.g. http://127.0.0.1:11434.
	Base *url.URL
	// Token is the admin token (VERA_ADMIN_TOKEN); empty sends none.
	Token string
	// HTTP sends the requests; nil: http.DefaultClient.
	HTTP *http.Client
	// Scope, when set, scopes the calls on one memory (Get, Edit,
	// Delete) to that namespace: a memory of another is not found.
	Scope string
	// UserAgent names the client (a memory it adds says so in its
	// metadata.source.client); empty: Go's.
	UserAgent string
}

// one is the path of a memory, scoped when Scope is set.
func (c *Client) one(id string) string {
	p := "/memories/" + url.PathEscape(id)
	if c.Scope != "" {
		p += "?" + url.Values{"namespace": {c.Scope}}.Encode()
	}
	return p
}

// Memory is a MEMORY, as the API answers it.
type Memory = memory.JSON

// Page is one answer of GET /memories.
type Page struct {
	Memories   []Memory `json:"memories"`
	NextCursor string   `json:"next_cursor"`
}

// ListQuery selects memories for GET /memories.
type ListQuery struct {
	Namespace, Type, Q, Cursor string
	Since, Until               time.Time
	Limit                      int
	// Private, when set ("true" or "false"), keeps the private memories
	// or the others.
	Private string
	// Order is "oldest" for the oldest first; empty (or "newest"), the
	// newest first. A cursor goes on in the order that gave it.
	Order string
}

// ImportReport is the answer of POST /memories/import: Errors lists the
// first bad lines (at most 100), ErrorCount counts them all.
type ImportReport struct {
	Imported int `json:"imported"`
	Errors   []struct {
		Line  int    `json:"line"`
		Error string `json:"error"`
	} `json:"errors"`
	ErrorCount int `json:"error_count"`
}

// APIError is an answer other than 2xx, with vera's message.
type APIError struct {
	Status  int
	Message string
}

func (e *APIError) Error() string {
	if e.Status == http.StatusUnauthorized {
		return e.Message + " (set VERA_ADMIN_TOKEN to vera's admin token)"
	}
	return e.Message
}

// List answers GET /memories.
func (c *Client) List(ctx context.Context, q ListQuery) (Page, error) {
	v := url.Values{"namespace": {q.Namespace}}
	for k, s := range map[string]string{"type": q.Type, "q": q.Q, "cursor": q.Cursor, "private": q.Private, "order": q.Order} {
		if s != "" {
			v.Set(k, s)
		}
	}
	for k, t := range map[string]time.Time{"since": q.Since, "until": q.Until} {
		if !t.IsZero() {
			v.Set(k, t.Format(time.RFC3339))
		}
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	var p Page
	return p, c.do(ctx, http.MethodGet, "/memories?"+v.Encode(), nil, "", &p)
}

// Namespaces answers GET /namespaces.
func (c *Client) Namespaces(ctx context.Context) ([]Namespace, error) {
	var out struct {
		Namespaces []Namespace `json:"namespaces"`
	}
	return out.Namespaces, c.do(ctx, http.MethodGet, "/namespaces", nil, "", &out)
}

// Get answers GET /memories/{id}.
func (c *Client) Get(ctx context.Context, id string) (Memory, error) {
	var m Memory
	return m, c.do(ctx, http.MethodGet, c.one(id), nil, "", &m)
}

// History answers GET /memories/{id}/history: its changes, oldest first.
func (c *Client) History(ctx context.Context, id string) ([]memory.Entry, error) {
	p := "/memories/" + url.PathEscape(id) + "/history"
	if c.Scope != "" {
		p += "?" + url.Values{"namespace": {c.Scope}}.Encode()
	}
	var out struct {
		History []memory.Entry `json:"history"`
	}
	return out.History, c.do(ctx, http.MethodGet, p, nil, "", &out)
}

// Add adds a curated memory or a rule by hand.
func (c *Client) Add(ctx context.Context, ns, typ, text string) (Memory, error) {
	body, _ := json.Marshal(map[string]string{"namespace": ns, "type": typ, "text": text})
	var m Memory
	return m, c.do(ctx, http.MethodPost, "/memories", strings.NewReader(string(body)), "application/json", &m)
}

// Edit replaces a memory's text; vera embeds it again.
func (c *Client) Edit(ctx context.Context, id, text string) (Memory, error) {
	return c.Patch(ctx, id, map[string]any{"text": text})
}

// Patch answers PATCH /memories/{id} with body (text, type, metadata).
func (c *Client) Patch(ctx context.Context, id string, patch map[string]any) (Memory, error) {
	body, _ := json.Marshal(patch)
	var m Memory
	return m, c.do(ctx, http.MethodPatch, c.one(id), strings.NewReader(string(body)), "application/json", &m)
}

// Delete forgets a memory for good.
func (c *Client) Delete(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, c.one(id), nil, "", nil)
}

// ForgetNamespace forgets a whole namespace and reports how many memories
// and queued turns went.
func (c *Client) ForgetNamespace(ctx context.Context, ns string) (int, error) {
	var out struct {
		Forgotten int `json:"forgotten"`
	}
	err := c.do(ctx, http.MethodDelete, "/memories?"+url.Values{"namespace": {ns}, "confirm": {"true"}}.Encode(), nil, "", &out)
	return out.Forgotten, err
}

// EraseNamespace erases everything of namespace ns (DELETE
// /namespaces/NS) and returns the receipt.
func (c *Client) EraseNamespace(ctx context.Context, ns string) (memory.Receipt, error) {
	var r memory.Receipt
	err := c.do(ctx, http.MethodDelete, "/namespaces/"+url.PathEscape(ns), nil, "", &r)
	return r, err
}

// Export copies the JSONL export (of one namespace, or all for "") to w
// as it streams.
func (c *Client) Export(ctx context.Context, ns string, w io.Writer) error {
	path := "/memories/export"
	if ns != "" {
		path += "?" + url.Values{"namespace": {ns}}.Encode()
	}
	res, err := c.send(ctx, http.MethodGet, path, nil, "")
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if _, err := io.Copy(w, res.Body); err != nil {
		return fmt.Errorf("reading the export: %w", err)
	}
	return nil
}

// Import sends JSONL to POST /memories/import.
func (c *Client) Import(ctx context.Context, r io.Reader) (ImportReport, error) {
	var rep ImportReport
	return rep, c.do(ctx, http.MethodPost, "/memories/import", r, "application/x-ndjson", &rep)
}

// do sends a request and decodes a JSON answer into out (nil: drained).
func (c *Client) do(ctx context.Context, method, path string, body io.Reader, ctype string, out any) error {
	res, err := c.send(ctx, method, path, body, ctype)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, res.Body)
		return nil
	}
	if err := json.NewDecoder(res.Body).Decode(out); err != nil {
		return fmt.Errorf("%s %s: the answer is not the JSON vera sends: %w", method, path, err)
	}
	return nil
}

// send sends a request and turns an answer other than 2xx into an
// APIError with vera's message.
func (c *Client) send(ctx context.Context, method, path string, body io.Reader, ctype string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(c.Base.String(), "/")+path, body)
	if err != nil {
		return nil, err
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	if c.UserAgent != "" {
		req.Header.Set("User-Agent", c.UserAgent)
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	res, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	if res.StatusCode/100 == 2 {
		return res, nil
	}
	defer res.Body.Close()
	var e struct {
		Error string `json:"error"`
	}
	b, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
	if json.Unmarshal(b, &e) != nil || e.Error == "" {
		e.Error = fmt.Sprintf("%s %s: %s", method, path, res.Status)
	}
	return nil, &APIError{Status: res.StatusCode, Message: e.Error}
}
