package tests

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/memory"
	"github.com/vera-proxy/vera/ollama/ollamatest"
	"github.com/vera-proxy/vera/tests/veratest"
)

// Requests that store nothing, each under a namespace of its own and with
// a long user name (a flood of Ollama's load calls), add no row to GET
// /namespaces, nor do rows an older version noted for such requests: a
// namespace is listed from its first stored turn on, under the name its
// client sent.
func TestNamespacesListOnlyWhoStores(t *testing.T) {
	data := t.TempDir()
	db := veratest.OpenStore(t, data)
	var old []memory.Seen // noted by an older version for load calls
	for i := range 100 {
		old = append(old, memory.Seen{Namespace: fmt.Sprint("old-flood-", i), Name: "Flood", LastSeen: time.Now().UTC()})
	}
	require.NoError(t, db.SaveSeen(context.Background(), old...))
	require.NoError(t, db.Close())

	up := ollamatest.New(t)
	p := veratest.Start(t, "VERA_OLLAMA_URL="+up.URL, "VERA_DATA_DIR="+data)
	type row struct{ Namespace, Name string }
	list := func() []row {
		t.Helper()
		veratest.Settled(t, p)
		var got struct{ Namespaces []row }
		require.Equal(t, http.StatusOK, veratest.AdminCall(t, p, "", "GET", "/namespaces", "", &got))
		return got.Namespaces
	}
	assert.Zero(t, len(list()), "rows of namespaces that hold nothing are not listed")

	hi := `{"model":"llama3.2","stream":false,"messages":[{"role":"user","content":"hi"}]}`
	cases := []struct {
		name, path, body string
		header           http.Header
	}{
		{"chat load call", "/api/chat", `{"model":"llama3.2","messages":[]}`, nil},
		{"chat load call without messages", "/api/chat", `{"model":"llama3.2"}`, nil},
		{"generate load call", "/api/generate", `{"model":"llama3.2","prompt":""}`, nil},
		{"memory off", "/api/chat", hi, http.Header{"X-Vera-Memory": {"off"}}},
		{"temporary chat", "/api/chat", hi, http.Header{"X-Openwebui-Chat-Id": {"local:Xy12socket"}}},
		{"background task", "/api/chat", hi, http.Header{"X-Openwebui-Task": {"title_generation"}}},
	}
	name := strings.Repeat("N", 256)
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for k := range 25 {
				req, err := http.NewRequest(http.MethodPost, "http://"+p.Addr+tc.path, strings.NewReader(tc.body))
				require.NoError(t, err)
				for h, v := range tc.header {
					req.Header[h] = v
				}
				req.Header.Set("X-Openwebui-User-Id", fmt.Sprintf("flood-%d-%d", i, k))
				req.Header.Set("X-Openwebui-User-Name", name)
				res, err := http.DefaultClient.Do(req)
				require.NoError(t, err)
				res.Body.Close()
				require.Equal(t, http.StatusOK, res.StatusCode)
			}
			assert.Zero(t, len(list()), "a request that stores nothing adds no namespace")
		})
	}

	ollamatest.ChatWith(t, p.Addr, http.Header{"X-Openwebui-User-Id": {"alice"}, "X-Openwebui-User-Name": {"Alice Martin"}}, veratest.User("My sister Ana lives in Lisbon."))
	assert.Equal(t, []row{{Namespace: "alice", Name: "Alice Martin"}}, list(), "a stored turn lists its namespace, with its name")
}
