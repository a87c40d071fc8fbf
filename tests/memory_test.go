package tests

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ollama/ollama/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/memory"
	"github.com/vera-proxy/vera/ollama/ollamatest"
	"github.com/vera-proxy/vera/tests/veratest"
)

func TestMemoryAcrossConversationsRestartsAndNamespaces(t *testing.T) {
	up := ollamatest.New(t)
	data := t.TempDir()
	p := veratest.Start(t, "VERA_OLLAMA_URL="+up.URL, "VERA_DATA_DIR="+data)

	assert.Equal(t, "Hello from Ollama", veratest.Chat(t, p, "alice", false, veratest.User("My sister Ana lives in Lisbon.")))
	// A new conversation: only the question, no history.
	veratest.RecallsEventually(t, p, up, "alice", "Where does my sister live?", "Ana lives in Lisbon")
	fwd := up.LastChat(t)
	assert.Equal(t, "Where does my sister live?", fwd.Messages[len(fwd.Messages)-1].Content, "the request's own message goes last, unchanged")

	// The response says what was injected.
	req, _ := http.NewRequest(http.MethodPost, "http://"+p.Addr+"/api/chat",
		strings.NewReader(`{"model":"llama3.2","messages":[{"role":"user","content":"Where does my sister live?"}]}`))
	req.Header.Set("X-OpenWebUI-User-Id", "alice")
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	res.Body.Close()
	assert.Regexp(t, regexp.MustCompile(`^semantic=[1-9]\d*; recent=\d+; rules=\d+; tokens=[1-9]\d*$`), res.Header.Get("X-Vera-Context"))
	assert.Regexp(t, regexp.MustCompile(`^[0-9a-f-]{36}(,[0-9a-f-]{36})*$`), res.Header.Get("X-Vera-Memories"))

	// Namespace B never sees namespace A.
	veratest.Chat(t, p, "bob", false, veratest.User("Where does my sister live?"))
	assert.NotContains(t, veratest.SystemOf(up.LastChat(t)), "Lisbon")
	for _, m := range up.LastChat(t).Messages {
		assert.NotContains(t, m.Content, "Lisbon", "bob must not see alice's memory")
	}
	veratest.Chat(t, p, "", false, veratest.User("Where does my sister live?"))
	assert.NotContains(t, veratest.SystemOf(up.LastChat(t)), "Lisbon", "nor the default namespace")

	// It survives a restart.
	p.Stop(t)
	p = veratest.Start(t, "VERA_OLLAMA_URL="+up.URL, "VERA_DATA_DIR="+data)
	veratest.Chat(t, p, "alice", false, veratest.User("Remind me, where is my sister?"))
	assert.Contains(t, veratest.SystemOf(up.LastChat(t)), "Ana lives in Lisbon")
	veratest.Chat(t, p, "bob", false, veratest.User("Remind me, where is my sister?"))
	assert.NotContains(t, veratest.SystemOf(up.LastChat(t)), "Lisbon")
}

func TestMemoryWithEmbedderDown(t *testing.T) {
	up := ollamatest.New(t)
	up.EmbedDown.Store(true)
	data, cfgDir := t.TempDir(), t.TempDir()
	// A lower threshold: the fake embedder's hashed vectors are cruder than
	// a real model's.
	require.NoError(t, os.WriteFile(filepath.Join(cfgDir, "config.toml"), []byte("[layers]\nsemantic_score_threshold = 0.3\n"), 0o644))
	p := veratest.Start(t, "VERA_OLLAMA_URL="+up.URL, "VERA_DATA_DIR="+data, "VERA_CONFIG_DIR="+cfgDir)

	// Answered although /api/embed fails.
	assert.Equal(t, "Hello from Ollama", veratest.Chat(t, p, "alice", false, veratest.User("My sister Ana lives in Lisbon.")))
	// Recalled lexically at once (shared words).
	veratest.RecallsEventually(t, p, up, "alice", "Is Ana still in Lisbon?", "Ana lives in Lisbon")
	// No shared words: nothing lexical can find it while the embedder is down.
	veratest.Chat(t, p, "alice", false, veratest.User("Where does my sibling reside?"))
	assert.NotContains(t, veratest.SystemOf(up.LastChat(t)), "Lisbon")

	// The embedder comes back: the stored turn gets its vector and is
	// found by meaning.
	up.EmbedDown.Store(false)
	require.Eventually(t, func() bool {
		veratest.Chat(t, p, "carol", true, veratest.User("ping")) // memory off: stores nothing
		veratest.Chat(t, p, "alice", false, veratest.User("Where does my sibling reside?"))
		return strings.Contains(veratest.SystemOf(up.LastChat(t)), "Ana lives in Lisbon")
	}, 20*time.Second, 200*time.Millisecond)
}

func TestMemoryParallelChatsStoredOnceAndMemoryOff(t *testing.T) {
	up := ollamatest.New(t)
	data := t.TempDir()
	p := veratest.Start(t, "VERA_OLLAMA_URL="+up.URL, "VERA_DATA_DIR="+data)
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() { veratest.Chat(t, p, "load", false, veratest.User(fmt.Sprintf("parallel question %d", i))) })
	}
	for i := range 5 {
		wg.Go(func() { veratest.Chat(t, p, "private", true, veratest.User(fmt.Sprintf("do not remember %d", i))) })
	}
	wg.Wait()

	// Memory off also means nothing injected: only the caller's messages.
	veratest.Chat(t, p, "load", true, api.Message{Role: "system", Content: "Be brief."}, veratest.User("parallel question 3?"))
	fwd := up.LastChat(t)
	require.Len(t, fwd.Messages, 2)
	assert.Equal(t, "Be brief.", fwd.Messages[0].Content)

	p.Stop(t) // a clean stop commits whatever is still in flight
	db := veratest.OpenStore(t, data)
	ctx := context.Background()
	n, err := db.Count(ctx, memory.Filter{Namespace: "load"})
	require.NoError(t, err)
	pending, err := db.Pending(ctx, 1000)
	require.NoError(t, err)
	assert.Equal(t, 50, n+len(pending), "every turn stored or queued")
	seen := map[string]int{}
	page, _, err := db.Scroll(ctx, memory.Filter{Namespace: "load"}, "", 1000)
	require.NoError(t, err)
	for _, m := range append(page, pending...) {
		u, a, ok := memory.ParseExchange(m.Text)
		require.True(t, ok)
		assert.Equal(t, "Hello from Ollama", a)
		assert.Equal(t, memory.Raw, m.Type)
		assert.Equal(t, "llama3.2", m.Model)
		seen[u]++
	}
	for i := range 50 {
		assert.Equal(t, 1, seen[fmt.Sprintf("parallel question %d", i)], "question %d", i)
	}
	n, err = db.Count(ctx, memory.Filter{Namespace: "private"})
	require.NoError(t, err)
	assert.Zero(t, n, "X-Vera-Memory: off stores nothing")
	for _, m := range pending {
		assert.NotEqual(t, "private", m.Namespace)
	}
}

func TestDebugLog(t *testing.T) {
	up := ollamatest.New(t)
	logs := t.TempDir()
	p := veratest.Start(t, "VERA_OLLAMA_URL="+up.URL, "VERA_DEBUG=true", "VERA_LOG_DIR="+logs)
	veratest.Chat(t, p, "alice", false, veratest.User("My sister Ana lives in Lisbon."))
	p.Stop(t)
	files, err := filepath.Glob(filepath.Join(logs, "debug_*.log"))
	require.NoError(t, err)
	require.Len(t, files, 1)
	assert.Regexp(t, `debug_\d{4}-\d{2}-\d{2}\.log$`, files[0])
	b, err := os.ReadFile(files[0])
	require.NoError(t, err)
	lines := bytes.Split(bytes.TrimSpace(b), []byte("\n"))
	require.Len(t, lines, 1)
	for _, key := range []string{`"request_id":"`, `"namespace":"alice"`, `"semantic":{`, `"recent":{`, `"messages":[`, `"answer_chars":17`} {
		assert.Contains(t, string(lines[0]), key)
	}
}
