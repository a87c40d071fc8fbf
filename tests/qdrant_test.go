package tests

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/memory/qdrant"
	"github.com/vera-proxy/vera/memory/qdrant/standin"
)

// healthz returns vera's /healthz body.
func healthz(t *testing.T, p *proc) map[string]any {
	t.Helper()
	res, err := http.Get("http://" + p.addr + "/healthz")
	require.NoError(t, err)
	defer res.Body.Close()
	var body map[string]any
	require.NoError(t, json.NewDecoder(res.Body).Decode(&body))
	return body
}

func (f *fakeOllama) chatCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.chats)
}

func TestQdrantBackendOutageAndRecovery(t *testing.T) {
	q, err := standin.Start("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(q.Stop)
	up := newFakeOllama(t)
	data := t.TempDir()
	p := startVera(t, "VERA_OLLAMA_URL="+up.URL, "VERA_QDRANT_URL="+q.URL(), "VERA_DATA_DIR="+data)

	// Memory works on Qdrant: the collection is made, a fact is recalled.
	chat(t, p, "alice", false, user("My sister Ana lives in Lisbon."))
	recallsEventually(t, p, up, "alice", "Where does my sister live?", "Ana lives in Lisbon")
	h := healthz(t, p)
	store := h["store"].(map[string]any)
	assert.Equal(t, "qdrant", store["backend"])
	assert.Equal(t, true, store["ok"])
	assert.Equal(t, "memories", store["collection"])

	// Qdrant goes down: chats are still answered, health says degraded,
	// turns wait in the local queue.
	q.Stop()
	for _, s := range []string{"outage one", "outage two", "outage three"} {
		assert.Equal(t, "Hello from Ollama", chat(t, p, "alice", false, user("Remember "+s+" please.")))
	}
	require.Eventually(t, func() bool {
		h := healthz(t, p)
		st := h["store"].(map[string]any)
		return h["status"] == "degraded" && st["ok"] == false && st["pending"].(float64) >= 1
	}, 10*time.Second, 100*time.Millisecond, "health must say the store is down")

	// Qdrant is back: every turn arrives, each once.
	require.NoError(t, q.Restart())
	want := up.chatCount()
	require.Eventually(t, func() bool { return q.Points("memories") == want }, 30*time.Second, 100*time.Millisecond,
		"every finished chat stored once in Qdrant (want %d)", want)
	require.Eventually(t, func() bool { return healthz(t, p)["status"] == "ok" }, 10*time.Second, 100*time.Millisecond)
	recallsEventually(t, p, up, "alice", "what was outage two?", "Remember outage two please.")
	assert.False(t, strings.Contains(p.logs(), "level=ERROR"), p.logs())
	stop(t, p)
	assert.Equal(t, up.chatCount(), q.Points("memories"), "a clean stop leaves nothing behind")
}

func TestQdrantCollectionOfAnotherSizeStopsVera(t *testing.T) {
	q, err := standin.Start("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(q.Stop)
	up := newFakeOllama(t)
	// A collection made for a 4-dimension model; the fake embeds in 256.
	other, err := qdrant.Open(context.Background(), qdrant.Options{URL: q.URL(), Collection: "memories"})
	require.NoError(t, err)
	_, err = other.VectorSpace(context.Background(), "tiny-embed", 4)
	require.NoError(t, err)
	other.Close()
	code, _, stderr := runVera(t, []string{"VERA_OLLAMA_URL=" + up.URL, "VERA_QDRANT_URL=" + q.URL(),
		"VERA_DATA_DIR=" + t.TempDir(), "VERA_LISTEN=127.0.0.1:0"}, "serve")
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, `holds 4-dimension vectors, but embedding model "nomic-embed-text" makes 256-dimension ones`)
}
