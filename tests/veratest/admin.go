package veratest

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/admin"
)

// AdminCall sends an admin request with the token (if any: the whole
// Authorization header) and decodes the JSON answer into out (when not
// nil and the status is a success).
func AdminCall(t *testing.T, v Vera, token, method, path, body string, out any) int {
	t.Helper()
	code, b := AdminDo(t, v, token, method, path, body)
	if out != nil && code < 300 {
		require.NoError(t, json.Unmarshal(b, out), string(b))
	}
	return code
}

// AdminDo is AdminCall, returning the answer's body.
func AdminDo(t *testing.T, v Vera, token, method, path, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+v.Address()+path, strings.NewReader(body))
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", token)
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return res.StatusCode, b
}

// AdminMemory is a memory as the admin routes answer with it.
type AdminMemory struct {
	ID, Namespace, Type, Text string
	Score                     *float64
	UsedCount                 int        `json:"used_count"`
	LastUsed                  *time.Time `json:"last_used"`
}

// MemoriesOf lists the memories of namespace ns, of type typ ("": of every
// type), through GET /memories as token, page by page.
func MemoriesOf(t *testing.T, v Vera, token, ns, typ string) []AdminMemory {
	t.Helper()
	q := url.Values{"namespace": {ns}, "limit": {"500"}}
	if typ != "" {
		q.Set("type", typ)
	}
	var all []AdminMemory
	for {
		var page struct {
			Memories []AdminMemory `json:"memories"`
			Next     string        `json:"next_cursor"`
		}
		require.Equal(t, http.StatusOK, AdminCall(t, v, token, "GET", "/memories?"+q.Encode(), "", &page))
		all = append(all, page.Memories...)
		if page.Next == "" {
			return all
		}
		q.Set("cursor", page.Next)
	}
}

// Texts is the memories' texts, a line each.
func Texts(ms []AdminMemory) string {
	var b strings.Builder
	for _, m := range ms {
		b.WriteString(m.Text + "\n")
	}
	return b.String()
}

// IDsHolding lists the ids of ns's memories, of every type, whose text
// holds secret (in any case), reading every page of GET /memories as
// token ("": none).
func IDsHolding(t *testing.T, v Vera, token, ns, secret string) []string {
	t.Helper()
	var ids []string
	for _, m := range MemoriesOf(t, v, token, ns, "") {
		if strings.Contains(strings.ToLower(m.Text), strings.ToLower(secret)) {
			ids = append(ids, m.ID)
		}
	}
	return ids
}

// Healthz returns vera's /healthz answer.
func Healthz(t *testing.T, v Vera) map[string]any {
	t.Helper()
	var body map[string]any
	healthOf(t, v, &body)
	return body
}

// healthOf decodes vera's /healthz answer into out.
func healthOf(t *testing.T, v Vera, out any) {
	t.Helper()
	res, err := http.Get("http://" + v.Address() + "/healthz")
	require.NoError(t, err)
	defer res.Body.Close()
	require.NoError(t, json.NewDecoder(res.Body).Decode(out))
}

// Queued reads the number of queued turns from /healthz; -1 when vera
// does not say, or does not answer.
func Queued(v Vera) int {
	res, err := http.Get("http://" + v.Address() + "/healthz")
	if err != nil {
		return -1
	}
	defer res.Body.Close()
	var h struct {
		Store *struct {
			Pending int `json:"pending"`
		} `json:"store"`
	}
	if json.NewDecoder(res.Body).Decode(&h) != nil || h.Store == nil {
		return -1
	}
	return h.Store.Pending
}

// Settled waits until every recorded turn is in the store.
func Settled(t *testing.T, v Vera) {
	t.Helper()
	require.Eventually(t, func() bool { return Queued(v) == 0 }, 20*time.Second, 20*time.Millisecond, "turns never stored")
}

// WaitLoaded waits until vera has loaded its store's index (it listens
// at once, and answers chats without memory until then).
func WaitLoaded(t testing.TB, v Vera) {
	t.Helper()
	require.Eventually(t, func() bool {
		var h admin.Health
		return admin.GetJSON(context.Background(), http.DefaultClient, "http://"+v.Address()+"/healthz", &h) == nil && h.Status != "loading"
	}, 60*time.Second, 5*time.Millisecond, "vera's store did not load:\n%s", v.Logs())
}
