package openwebui

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/memory"
	"github.com/vera-proxy/vera/memory/openwebui/openwebuitest"
)

const (
	jwt    = "eyJhbGciOiJIUzI1NiJ9.eyJpZCI6ImFsaWNlIn0.c2lnbmF0dXJl"
	apiKey = "sk-0123456789abcdef0123456789abcdef"
)

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	require.NoError(t, err)
	return u
}

func TestMemories(t *testing.T) {
	owui := openwebuitest.New(t)
	owui.AddUser(jwt, "u-alice", "user")
	owui.AddUser(apiKey, "u-alice", "user")
	owui.Add(openwebuitest.Memory{ID: "m1", UserID: "u-alice", Content: "Alice's sister Ana lives in Lisbon.", CreatedAt: 1735725600, UpdatedAt: 1738404000})
	owui.Add(openwebuitest.Memory{ID: "m2", UserID: "u-bob", Content: "Bob rides a bike.", CreatedAt: 1735725600, UpdatedAt: 1735725600})

	for _, tok := range []string{jwt, apiKey} {
		for _, base := range []string{owui.URL, owui.URL + "/"} {
			c := &Client{Base: mustURL(t, base), Token: tok}
			ms, err := c.Memories(context.Background())
			require.NoError(t, err)
			require.Len(t, ms, 1, "only the token's user's memories")
			assert.Equal(t, Memory{ID: "m1", UserID: "u-alice", Content: "Alice's sister Ana lives in Lisbon.",
				CreatedAt: time.Date(2025, 1, 1, 10, 0, 0, 0, time.UTC), UpdatedAt: time.Date(2025, 2, 1, 10, 0, 0, 0, time.UTC)}, ms[0])
		}
	}
}

// Every refusal of Open WebUI, and every answer that is not its memories
// API's, is an error a person can act on: it names the Open WebUI and
// what to do, never the token or a Go type.
func TestMemoriesRefused(t *testing.T) {
	owui := openwebuitest.New(t)
	owui.AddUser(jwt, "u-alice", "user")
	owui.AddUser(apiKey, "u-alice", "user")
	owui.AddUser("sk-pending-0123456789", "u-new", "pending")
	owui.AddUser("sk-admin-0123456789", "u-root", "admin")
	owui.Forbid("u-alice")
	owui.Forbid("u-root")
	off := openwebuitest.New(t)
	off.AddUser(jwt, "u-alice", "user")
	off.TurnOff()
	noKeys := openwebuitest.New(t)
	noKeys.AddUser(apiKey, "u-alice", "user")
	noKeys.RefuseAPIKeys()
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	page := func(status int, ctype, body string) string {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if ctype != "" {
				w.Header().Set("Content-Type", ctype)
			}
			w.WriteHeader(status)
			w.Write([]byte(body))
		}))
		t.Cleanup(s.Close)
		return s.URL
	}
	login := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/login" {
			http.Redirect(w, r, "/login", http.StatusFound)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write([]byte("<!doctype html><title>Sign in</title>"))
	}))
	t.Cleanup(login.Close)

	tests := []struct {
		name, base, token string
		status            int
		want              []string
	}{
		{name: "unknown session token", base: owui.URL, token: "eyJnot.a.token", status: 401,
			want: []string{"refused the token (401: 401 Unauthorized)", "Settings → Account"}},
		{name: "unknown API key", base: owui.URL, token: "sk-unknown-0123456789", status: 401,
			want: []string{"refused the token (401: Your session has expired", "create an API key"}},
		{name: "pending account", base: owui.URL, token: "sk-pending-0123456789", status: 401,
			want: []string{"may not use Open WebUI at", "yet", "Admin Panel → Users"}},
		{name: "no memories permission", base: owui.URL, token: jwt, status: 403,
			want: []string{"this user may not use memories on Open WebUI at " + owui.URL, "(403: You do not have permission", "Features → Memories"}},
		{name: "API keys off", base: noKeys.URL, token: apiKey, status: 403,
			want: []string{"does not take this API key", "Use of API key is not enabled", "JWT token"}},
		{name: "memories off", base: off.URL, token: jwt, status: 404,
			want: []string{"memories are turned off on Open WebUI at " + off.URL, "404: We could not find", "Admin Panel → Settings → General → Memories"}},
		{name: "not Open WebUI's address", base: owui.URL + "/chat", token: jwt, status: 404,
			want: []string{"Open WebUI at " + owui.URL + "/chat has no memories API (404: Not Found, for GET /chat/api/v1/memories/)", "is " + owui.URL + "/chat the address of Open WebUI"}},
		{name: "a server error", base: page(500, "application/json", `{"detail":"database is locked"}`), token: jwt, status: 500,
			want: []string{"failed to list the memories (500: database is locked)"}},
		{name: "an HTML 404", base: page(404, "text/html", "<html>nope</html>"), token: jwt, status: 404,
			want: []string{"has no memories API (404 Not Found, for GET /api/v1/memories/)"}},
		{name: "unreachable", base: dead.URL, token: jwt,
			want: []string{"Open WebUI at " + dead.URL + " does not answer", "connection refused"}},
		{name: "a sign-in page", base: login.URL, token: jwt,
			want: []string{"answered GET /api/v1/memories/ with a web page", "not of a sign-in page or a proxy"}},
		{name: "HTML without its type", base: page(200, "", "<!doctype html><p>hello</p>"), token: jwt,
			want: []string{"with a web page"}},
		{name: "malformed JSON", base: page(200, "application/json", `[{"id":"m1","content":"x"`), token: jwt,
			want: []string{"the answer is not valid JSON"}},
		{name: "not JSON at all", base: page(200, "application/json", `hello`), token: jwt,
			want: []string{"the answer is not valid JSON: invalid character 'h'", "at byte 1"}},
		{name: "an object", base: page(200, "application/json", `{"memories":[],"total":0}`), token: jwt,
			want: []string{`the answer is a JSON object (with "memories", "total"), not the list of memories Open WebUI sends`}},
		{name: "an object with a detail", base: page(200, "application/json", `{"detail":"Memory service is down"}`), token: jwt,
			want: []string{`a JSON object saying "Memory service is down"`}},
		{name: "a memory without content", base: page(200, "application/json", `[{"id":"m1","user_id":"u","updated_at":1,"created_at":1}]`), token: jwt,
			want: []string{`memory 1 of 1 in the answer: memory "m1": "content" is missing`}},
		{name: "a memory with a number for text", base: page(200, "application/json", `[{"id":"m1","user_id":"u","content":42,"updated_at":1}]`), token: jwt,
			want: []string{`"content" is a number, not a string`}},
		{name: "an empty answer", base: page(200, "application/json", ``), token: jwt,
			want: []string{"the answer is empty"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &Client{Base: mustURL(t, tt.base), Token: tt.token}
			_, err := c.Memories(context.Background())
			require.Error(t, err)
			for _, w := range tt.want {
				assert.Contains(t, err.Error(), w)
			}
			assert.NotContains(t, err.Error(), tt.token, "the token is never told")
			assert.NotContains(t, err.Error(), "Go ")
			assert.NotContains(t, err.Error(), "unmarshal")
			var se *StatusError
			if tt.status != 0 {
				require.ErrorAs(t, err, &se)
				assert.Equal(t, tt.status, se.Status)
			} else {
				assert.False(t, errors.As(err, &se))
			}
		})
	}

	// An admin passes without the permission, as in Open WebUI's latest
	// versions.
	c := &Client{Base: mustURL(t, owui.URL), Token: "sk-admin-0123456789"}
	_, err := c.Memories(context.Background())
	assert.NoError(t, err)
}

// A server that echoes the request (a misconfigured proxy) still never
// gets the token into a message.
func TestTokenNeverTold(t *testing.T) {
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadGateway)
		w.Write([]byte(`{"detail":"upstream refused ` + r.Header.Get("Authorization") + `"}`))
	}))
	defer echo.Close()
	c := &Client{Base: mustURL(t, echo.URL), Token: apiKey}
	_, err := c.Memories(context.Background())
	require.Error(t, err)
	assert.NotContains(t, err.Error(), apiKey)
	assert.Contains(t, err.Error(), "Bearer xxxxx")
	var se *StatusError
	require.ErrorAs(t, err, &se)
	assert.NotContains(t, se.Detail, apiKey)

	// Credentials in the address are not told either.
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	u := mustURL(t, dead.URL)
	u.User = url.UserPassword("admin", "hunter22")
	c = &Client{Base: u, Token: apiKey}
	_, err = c.Memories(context.Background())
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "hunter22")
}

func TestDecode(t *testing.T) {
	ms, err := Decode([]byte(`[
		{"id":"a","user_id":"u","content":"  x  ","updated_at":1738404000,"created_at":1735725600,"type":"user","path":"food","meta":null},
		{"id":"b","user_id":"u","content":"","updated_at":null,"created_at":1735725600},
		{"id":"c","content":"y","updated_at":1738404000123},
		{"id":"d","content":"z","created_at":1738404000.75}
	]`))
	require.NoError(t, err)
	require.Len(t, ms, 4)
	feb := time.Date(2025, 2, 1, 10, 0, 0, 0, time.UTC)
	assert.Equal(t, Memory{ID: "a", UserID: "u", Content: "  x  ", UpdatedAt: feb, CreatedAt: time.Date(2025, 1, 1, 10, 0, 0, 0, time.UTC)}, ms[0])
	assert.True(t, ms[1].UpdatedAt.IsZero())
	assert.Equal(t, feb.Add(123*time.Millisecond), ms[2].UpdatedAt, "milliseconds are read as such")
	assert.Equal(t, feb, ms[3].CreatedAt)

	ms, err = Decode([]byte(" [] \n"))
	require.NoError(t, err)
	assert.Empty(t, ms)

	for body, want := range map[string]string{
		`[1]`:                              `memory 1 of 1 in the answer: it is a number, not a memory`,
		`[{"content":"x","updated_at":1}]`: `"id" is missing`,
		`[{"id":"","content":"x"}]`:        `its "id" is empty`,
		`[{"id":7,"content":"x"}]`:         `"id" is a number, not a string`,
		`[{"id":"a","content":"x"}]`:       `memory "a" has no date`,
		`[{"id":"a","content":"x","updated_at":"2025-01-01"}]`: `"updated_at" is a JSON string, not a time in seconds`,
		`[{"id":"a","content":"x","updated_at":-5}]`:           `"updated_at" is -5: not a time in seconds`,
		`[{"id":"a","content":"x","updated_at":1e300}]`:        `"updated_at" is 1e300: not a time in seconds`,
		`null`:      `the answer is null, not the list`,
		`"x"`:       `the answer is a JSON string, not the list`,
		`{}`:        `the answer is an empty JSON object, not the list`,
		`[`:         `the answer is not valid JSON`,
		`<html>`:    `web page`,
		"\n\t ":     `the answer is empty`,
		`[{"id":}]`: `the answer is not valid JSON: invalid character '}' looking for beginning of value at byte 8`,
	} {
		_, err := Decode([]byte(body))
		require.Error(t, err, body)
		assert.Contains(t, err.Error(), want, body)
	}
}

// FuzzDecode: any answer gives memories or an error, never a panic, and
// no error speaks of Go.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{`[]`, `[{"id":"a","user_id":"u","content":"x","updated_at":1,"created_at":2}]`, `{"detail":"x"}`,
		`<html>`, `[{"id":"a","content":"x","updated_at":1e10}]`, `[null]`, `[{"id":"a","content":null,"updated_at":1}]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		ms, err := Decode(body)
		if err != nil {
			if strings.Contains(err.Error(), "Go value") || strings.Contains(err.Error(), "unmarshal") {
				t.Fatalf("an error speaks of Go: %v", err)
			}
			return
		}
		for _, m := range ms {
			if m.ID == "" || m.UpdatedAt.IsZero() && m.CreatedAt.IsZero() {
				t.Fatalf("a memory without id or date: %+v", m)
			}
		}
	})
}

func TestConvert(t *testing.T) {
	created := time.Date(2025, 1, 1, 10, 0, 0, 0, time.UTC)
	updated := time.Date(2025, 2, 1, 10, 0, 0, 0, time.UTC)
	server := Server(mustURL(t, "https://user:secret@OWUI.example:3000/sub/?token=abc"))
	assert.Equal(t, "https://owui.example:3000/sub", server, "no credentials, no query, no final slash")

	m, ok := Convert(Memory{ID: "m1", UserID: "u-alice", Content: "  Alice likes tea.\n", CreatedAt: created, UpdatedAt: updated}, server, "u-alice")
	require.True(t, ok)
	require.NoError(t, m.Validate())
	assert.Equal(t, "Alice likes tea.", m.Text)
	assert.Equal(t, memory.Curated, m.Type)
	assert.Equal(t, "u-alice", m.Namespace)
	assert.Equal(t, updated, m.Time, "dated when Open WebUI last changed it")
	assert.Equal(t, map[string]any{
		"imported_from": "open-webui",
		"source": map[string]any{"via": "import", "client": "open-webui", "url": server, "memory_id": "m1",
			"user_id": "u-alice", "created_at": "2025-01-01T10:00:00Z"},
	}, m.Metadata)

	// Never changed: its creation date.
	m, _ = Convert(Memory{ID: "m1", Content: "x", CreatedAt: created}, server, "u-alice")
	assert.Equal(t, created, m.Time)

	// Empty: skipped.
	_, ok = Convert(Memory{ID: "m2", Content: " \n\t", UpdatedAt: updated}, server, "u-alice")
	assert.False(t, ok)

	// The id is the same at every import, and pinned: memories imported by
	// an earlier vera are found again.
	a, _ := Convert(Memory{ID: "m1", Content: "x", UpdatedAt: updated}, server, "u-alice")
	b, _ := Convert(Memory{ID: "m1", Content: "changed", UpdatedAt: updated.Add(time.Hour)}, server, "u-alice")
	assert.Equal(t, a.ID, b.ID)
	assert.Equal(t, "a5bf7107-8ebe-58e1-aab2-ac251fd63496", ID("http://127.0.0.1:3000", "m1", "alice"))
	assert.NotEqual(t, a.ID, ID(server, "m1", "bob"), "another namespace, another memory")
	assert.NotEqual(t, a.ID, ID("https://other.example", "m1", "u-alice"), "another Open WebUI, another memory")
}
