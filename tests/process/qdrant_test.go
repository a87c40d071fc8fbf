package process

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	qc "github.com/qdrant/go-client/qdrant"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/memory"
	"github.com/vera-proxy/vera/memory/qdrant"
	"github.com/vera-proxy/vera/memory/qdrant/qdranttest"
	"github.com/vera-proxy/vera/ollama/ollamatest"
	"github.com/vera-proxy/vera/tests/veratest"
)

func TestQdrantBackendOutageAndRecovery(t *testing.T) {
	q, err := qdranttest.Start("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(q.Stop)
	up := ollamatest.New(t)
	data := t.TempDir()
	p := veratest.Launch(t, "VERA_OLLAMA_URL="+up.URL, "VERA_QDRANT_URL="+q.URL(), "VERA_DATA_DIR="+data)

	// Memory works on Qdrant: the collection is made, a fact is recalled.
	veratest.Chat(t, p, "alice", false, veratest.User("My sister Ana lives in Lisbon."))
	veratest.RecallsEventually(t, p, up, "alice", "Where does my sister live?", "Ana lives in Lisbon")
	h := veratest.Healthz(t, p)
	store := h["store"].(map[string]any)
	assert.Equal(t, "qdrant", store["backend"])
	assert.Equal(t, true, store["ok"])
	assert.Equal(t, "memories", store["collection"])

	// Qdrant goes down: chats are still answered, health says degraded,
	// turns wait in the local queue.
	q.Stop()
	for _, s := range []string{"outage one", "outage two", "outage three"} {
		assert.Equal(t, "Hello from Ollama", veratest.Chat(t, p, "alice", false, veratest.User("Remember "+s+" please.")))
	}
	require.Eventually(t, func() bool {
		h := veratest.Healthz(t, p)
		st := h["store"].(map[string]any)
		return h["status"] == "degraded" && st["ok"] == false && st["pending"].(float64) >= 1
	}, 10*time.Second, 100*time.Millisecond, "health must say the store is down")

	// Qdrant is back: every turn arrives, each once.
	require.NoError(t, q.Restart())
	want := up.ChatCount()
	require.Eventually(t, func() bool { return q.Points("memories") == want }, 30*time.Second, 100*time.Millisecond,
		"every finished chat stored once in Qdrant (want %d)", want)
	require.Eventually(t, func() bool { return veratest.Healthz(t, p)["status"] == "ok" }, 10*time.Second, 100*time.Millisecond)
	veratest.RecallsEventually(t, p, up, "alice", "what was outage two?", "Remember outage two please.")
	assert.False(t, strings.Contains(p.Logs(), "level=ERROR"), p.Logs())
	p.Stop(t)
	assert.Equal(t, up.ChatCount(), q.Points("memories"), "a clean stop leaves nothing behind")
}

func TestQdrantCollectionOfAnotherSizeStopsVera(t *testing.T) {
	q, err := qdranttest.Start("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(q.Stop)
	up := ollamatest.New(t)
	// A collection made for a 4-dimension model; the fake embeds in 256.
	other, err := qdrant.Open(context.Background(), qdrant.Options{URL: q.URL(), Collection: "memories"})
	require.NoError(t, err)
	_, err = other.VectorSpace(context.Background(), "tiny-embed", 4)
	require.NoError(t, err)
	other.Close()
	code, _, stderr := veratest.RunCommand(t, []string{"VERA_OLLAMA_URL=" + up.URL, "VERA_QDRANT_URL=" + q.URL(),
		"VERA_DATA_DIR=" + t.TempDir(), "VERA_LISTEN=127.0.0.1:0"}, "serve")
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, `holds 4-dimension vectors, but embedding model "nomic-embed-text" makes 256-dimension ones`)
}

// veraAICollection fills a collection laid out as Vera-AI writes it: one
// unnamed vector, payload type/text/timestamp(/role/content), a keyword
// index on timestamp. It returns the number of points.
func veraAICollection(t *testing.T, url, name string, n int) int {
	t.Helper()
	ctx := context.Background()
	cfg, _, err := qdrant.ClientConfig(url)
	require.NoError(t, err)
	c, err := qc.NewClient(cfg)
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.CreateCollection(ctx, &qc.CreateCollection{CollectionName: name,
		VectorsConfig: qc.NewVectorsConfig(&qc.VectorParams{Size: 4, Distance: qc.Distance_Cosine})}))
	_, err = c.CreateFieldIndex(ctx, &qc.CreateFieldIndexCollection{CollectionName: name, FieldName: "timestamp",
		FieldType: qc.FieldType_FieldTypeKeyword.Enum()})
	require.NoError(t, err)
	var points []*qc.PointStruct
	for i := range n {
		ts := time.Date(2025, 3, 1, 10, 0, i, 0, time.UTC).Format(time.RFC3339)
		payload := map[string]any{"type": "raw", "role": "qa", "timestamp": ts,
			"text": fmt.Sprintf("User: fact number %d about herons\nAssistant: noted %d\nTimestamp: %s", i, i, ts)}
		if i%10 == 0 {
			payload["type"] = "curated"
		}
		if i == 1 { // longer than memory.max_turn_tokens: capped on the way in
			payload["text"] = fmt.Sprintf("User: fact number %d about herons%s\nAssistant: noted %d\nTimestamp: %s", i, strings.Repeat(" heron", 10000), i, ts)
		}
		points = append(points, &qc.PointStruct{Id: qc.NewID(memory.NewID()), Vectors: qc.NewVectorsDense([]float32{1, 0, 0, float32(i)}),
			Payload: qc.NewValueMap(payload)})
	}
	// One Vera-AI could not have meant: skipped and reported.
	points = append(points, &qc.PointStruct{Id: qc.NewIDNum(7), Vectors: qc.NewVectorsDense([]float32{1, 0, 0, 0}),
		Payload: qc.NewValueMap(map[string]any{"type": "summary", "text": "?"})})
	_, err = c.Upsert(ctx, &qc.UpsertPoints{CollectionName: name, Points: points})
	require.NoError(t, err)
	return n + 1
}

func TestImportFromVeraAI(t *testing.T) {
	q, err := qdranttest.Start("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(q.Stop)
	up := ollamatest.New(t)
	total := veraAICollection(t, q.URL(), "vera_ai", 250) // more than one page

	// Into the embedded store, twice: the second run replaces.
	data := t.TempDir()
	env := []string{"VERA_OLLAMA_URL=" + up.URL, "VERA_DATA_DIR=" + data}
	for range 2 {
		code, out, stderr := veratest.RunCommand(t, env, "memories", "import", "--from-vera-ai", "--url", q.URL(), "--collection", "vera_ai", "--namespace", "alice")
		require.Equal(t, 0, code, stderr)
		var rep struct {
			Read, Imported, Embedded, Undated int
			Skipped                           map[string]int
		}
		require.NoError(t, json.Unmarshal([]byte(out), &rep), out)
		assert.Equal(t, total, rep.Read)
		assert.Equal(t, 250, rep.Imported)
		assert.Equal(t, 250, rep.Embedded, "re-embedded with vera's model")
		assert.Equal(t, map[string]int{`type "summary"`: 1}, rep.Skipped)
	}
	db := veratest.OpenStore(t, data)
	ctx := context.Background()
	n, err := db.Count(ctx, memory.Filter{Namespace: "alice"})
	require.NoError(t, err)
	assert.Equal(t, 250, n)
	n, err = db.Count(ctx, memory.Filter{Namespace: "alice", Types: []memory.Type{memory.Curated}})
	require.NoError(t, err)
	assert.Equal(t, 25, n)
	latest, err := db.Latest(ctx, memory.Filter{Namespace: "alice"}, 1)
	require.NoError(t, err)
	assert.Equal(t, "User: fact number 249 about herons\nAssistant: noted 249", latest[0].Text, "no Timestamp line; Vera-AI's time kept")
	assert.True(t, latest[0].Time.Equal(time.Date(2025, 3, 1, 10, 4, 9, 0, time.UTC)))
	long, err := db.Search(ctx, memory.Query{Filter: memory.Filter{Namespace: "alice"}, Text: "fact number 1 about herons", Limit: 300})
	require.NoError(t, err)
	capped := false
	for _, h := range long {
		if strings.HasPrefix(h.Text, "User: fact number 1 about herons") {
			capped = true
			assert.Contains(t, h.Text, "[…]")
			assert.True(t, strings.HasSuffix(h.Text, "Assistant: noted 1"), "the answer is kept whole")
			assert.LessOrEqual(t, h.Tokens, memory.DefaultMaxTurnTokens)
		}
	}
	assert.True(t, capped, "the long turn was imported")
	page, _, err := db.Scroll(ctx, memory.Filter{Namespace: "alice", NoVector: true}, "", 10)
	require.NoError(t, err)
	assert.Empty(t, page, "every memory has a vector")
	require.NoError(t, db.Close())

	// Into Qdrant: vera's own collection next to Vera-AI's.
	code, out, stderr := veratest.RunCommand(t, append(env, "VERA_QDRANT_URL="+q.URL(), "VERA_QDRANT_COLLECTION=vera"),
		"memories", "import", "--from-vera-ai", "--url", q.URL(), "--collection", "vera_ai")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, `"imported":250`)
	assert.Equal(t, 250, q.Points("vera"))

	// The same collection as source and target is refused.
	code, _, stderr = veratest.RunCommand(t, append(env, "VERA_QDRANT_URL="+q.URL(), "VERA_QDRANT_COLLECTION=vera_ai"),
		"memories", "import", "--from-vera-ai", "--url", q.URL(), "--collection", "vera_ai")
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "is the one vera is configured to use")

	// Usage errors.
	code, _, _ = veratest.RunCommand(t, env, "memories", "import", "--url", q.URL())
	assert.Equal(t, 2, code)
	code, _, _ = veratest.RunCommand(t, env, "memories", "lsit")
	assert.Equal(t, 2, code)
}
