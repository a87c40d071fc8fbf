package tests

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/admin"
	"github.com/vera-proxy/vera/memory"
	"github.com/vera-proxy/vera/memory/embedded"
	"github.com/vera-proxy/vera/ollama/ollamatest"
	"github.com/vera-proxy/vera/tests/veratest"
	"github.com/vera-proxy/vera/text"
)

// vera listens at once on a large store: while its index loads, every
// route is served, chats are answered without memory (X-Vera-Context:
// loading) and /healthz says loading with its progress; once it is
// loaded, chats have memory. The events are checked in order, never
// timed: the load of 50k memories outlasts a few requests by far.
func TestListensWhileTheStoreLoads(t *testing.T) {
	const n = 50_000
	data := t.TempDir()
	db := veratest.OpenStore(t, data)
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ms := make([]memory.Memory, 0, 1000)
	for i := range n {
		content := fmt.Sprintf("User: note %d about the garden, the weather and work item %d\nAssistant: noted", i, i%997)
		if i == n/2 {
			content = "User: My sister Ilse plays the cello.\nAssistant: Lovely."
		}
		ms = append(ms, memory.Memory{ID: fmt.Sprintf("m%06d", i), Namespace: "alice", Type: memory.Raw, Text: content, Time: start.Add(time.Duration(i) * time.Second), Tokens: 20})
		if len(ms) == cap(ms) {
			// Embedded as the fake Ollama embeds, and counted: nothing
			// is left for the backfills to do.
			texts := make([]string, len(ms))
			for j, m := range ms {
				texts[j] = m.Text
			}
			vecs, err := text.HashEmbedder{}.Embed(context.Background(), texts)
			require.NoError(t, err)
			for j := range ms {
				ms[j].Vector = vecs[j]
			}
			require.NoError(t, db.Upsert(context.Background(), ms...))
			ms = ms[:0]
		}
	}
	require.NoError(t, db.Close())
	// As the first start after an upgrade: no snapshot of the index yet.
	require.NoError(t, os.Remove(filepath.Join(data, embedded.SnapshotName)))

	up := ollamatest.New(t)
	p := veratest.StartLoading(t, "VERA_OLLAMA_URL="+up.URL, "VERA_DATA_DIR="+data)

	var h admin.Health
	require.NoError(t, admin.GetJSON(context.Background(), http.DefaultClient, "http://"+p.Addr+"/healthz", &h))
	require.Equal(t, "loading", h.Status, "served before the store is ready")
	require.NotNil(t, h.Store.Loading)
	assert.Equal(t, n, h.Store.Loading.Total)
	assert.Less(t, h.Store.Loading.Loaded, n)

	// Ollama's other routes pass.
	res, err := http.Get("http://" + p.Addr + "/api/tags")
	require.NoError(t, err)
	res.Body.Close()
	assert.Equal(t, http.StatusOK, res.StatusCode)

	// A search of the admin API says why it cannot answer yet.
	res, err = http.Get("http://" + p.Addr + "/memories?namespace=alice&q=cello")
	require.NoError(t, err)
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	assert.Equal(t, http.StatusServiceUnavailable, res.StatusCode)
	assert.Contains(t, string(body), "still loading")

	// A chat is answered, without memory.
	ctxHeader, answer := chatWithHeader(t, p, "alice", "What instrument does Ilse play?")
	assert.Equal(t, "loading", ctxHeader)
	assert.Equal(t, "Hello from Ollama", answer)
	assert.NotContains(t, veratest.SystemOf(up.LastChat(t)), "cello")
	require.NoError(t, admin.GetJSON(context.Background(), http.DefaultClient, "http://"+p.Addr+"/healthz", &h))
	require.Equal(t, "loading", h.Status, "the chat came before the store was ready")

	// Once loaded, chats have memory, and the turn told while loading
	// was kept.
	veratest.WaitLoaded(t, p)
	ctxHeader, _ = chatWithHeader(t, p, "alice", "Which instrument does my sister Ilse play?")
	assert.Regexp(t, `^semantic=[1-9]`, ctxHeader)
	assert.Contains(t, veratest.SystemOf(up.LastChat(t)), "Ilse plays the cello")
	require.Eventually(t, func() bool {
		chatWithHeader(t, p, "alice", "What did I ask about Ilse's instrument?")
		return strings.Contains(veratest.SystemOf(up.LastChat(t)), "What instrument does Ilse play?")
	}, 10*time.Second, 50*time.Millisecond, "the turn answered while loading is stored")
}

// chatWithHeader sends a one-message /api/chat as namespace ns and returns
// X-Vera-Context and the answer.
func chatWithHeader(t *testing.T, p *veratest.InProcess, ns, question string) (string, string) {
	t.Helper()
	h, answer := veratest.ChatWhole(t, p, ns, "llama3.2", question)
	return h.Get("X-Vera-Context"), answer
}
