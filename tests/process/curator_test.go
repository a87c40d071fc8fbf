package process

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ollama/ollama/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/memory"
	"github.com/vera-proxy/vera/ollama/ollamatest"
	"github.com/vera-proxy/vera/tests/veratest"
)

// curatorAnswer curates every raw turn it is shown into one memory, and
// asks for one rule when a turn speaks of the boat.
func curatorAnswer(t *testing.T, req api.ChatRequest) string {
	var in struct {
		Raw []struct{ ID, Text string } `json:"raw_turns"`
	}
	require.NoError(t, json.Unmarshal([]byte(req.Messages[1].Content), &in))
	var curated []map[string]any
	rules := []map[string]string{}
	for _, r := range in.Raw {
		if strings.Contains(r.Text, "boat") && len(rules) == 0 {
			rules = append(rules, map[string]string{"rule": "Call the user Captain.", "target_file": "systemprompt.md"})
		}
		fact := strings.TrimPrefix(strings.SplitN(r.Text, "\n", 2)[0], "User: ")
		curated = append(curated, map[string]any{"content": "User: What do you know about me?\nAssistant: " + fact, "source_ids": []string{r.ID}})
	}
	b, _ := json.Marshal(map[string]any{"new_curated_turns": curated,
		"permanent_rules": rules,
		"deletions":       []string{}, "summary": fmt.Sprintf("%d turns curated", len(in.Raw))})
	return string(b)
}

// curatorRun posts to /curator/run (with query) as token ("": none) and
// returns the status and the JSON answer, an error's included.
func curatorRun(t *testing.T, v veratest.Vera, query, token string) (int, map[string]any) {
	t.Helper()
	if token != "" {
		token = "Bearer " + token
	}
	code, b := veratest.AdminDo(t, v, token, http.MethodPost, "/curator/run"+query, "")
	var body map[string]any
	require.NoError(t, json.Unmarshal(b, &body), string(b))
	return code, body
}

func TestCuratorThroughVera(t *testing.T) {
	up := ollamatest.New(t)
	var mu sync.Mutex
	var systems []string
	release, entered := make(chan struct{}), make(chan struct{}, 1)
	var hold atomic.Bool
	up.Curate = func(req api.ChatRequest) string {
		mu.Lock()
		systems = append(systems, req.Messages[0].Content)
		mu.Unlock()
		if hold.Load() {
			entered <- struct{}{}
			<-release
		}
		return curatorAnswer(t, req)
	}
	prompts := t.TempDir()
	const operators = "You are a helpful assistant.\n"
	require.NoError(t, os.WriteFile(filepath.Join(prompts, "systemprompt.md"), []byte(operators), 0o644))
	// The curator never writes into the prompts dir: it holds the
	// operator's systemprompt.md and nothing else, byte for byte.
	promptsUnchanged := func(msg string) {
		t.Helper()
		entries, err := os.ReadDir(prompts)
		require.NoError(t, err)
		require.Len(t, entries, 1, msg)
		b, err := os.ReadFile(filepath.Join(prompts, "systemprompt.md"))
		require.NoError(t, err)
		assert.Equal(t, operators, string(b), msg)
	}
	data := t.TempDir()
	env := []string{"VERA_OLLAMA_URL=" + up.URL, "VERA_DATA_DIR=" + data, "VERA_PROMPTS_DIR=" + prompts, "VERA_ADMIN_TOKEN=s3cret"}
	p := veratest.Launch(t, env...)

	veratest.Chat(t, p, "alice", false, veratest.User("My boat is called Nautilus."))
	veratest.Chat(t, p, "alice", false, veratest.User("I sail every Sunday."))

	// Admin routes need the token.
	code, body := curatorRun(t, p, "", "")
	assert.Equal(t, http.StatusUnauthorized, code)
	assert.Contains(t, body["error"], "Bearer")

	// A dry run changes nothing; it waits for both turns to be stored.
	require.Eventually(t, func() bool {
		_, body := curatorRun(t, p, "?dry_run=true&namespace=alice", "s3cret")
		return body["processed"] == float64(2)
	}, 15*time.Second, 100*time.Millisecond)
	promptsUnchanged("a dry run writes nothing")
	mu.Lock()
	assert.Contains(t, systems[0], "Today is "+time.Now().Format("2006-01-02"), "the date is filled in")
	mu.Unlock()

	code, body = curatorRun(t, p, "?namespace=alice", "s3cret")
	assert.Equal(t, http.StatusOK, code, body)
	assert.Equal(t, "ok", body["status"])
	assert.Equal(t, float64(2), body["processed"])
	assert.Equal(t, float64(2), body["curated"])
	assert.Equal(t, float64(2), body["deleted"])
	assert.Equal(t, float64(1), body["rules"])
	assert.Equal(t, "2 turns curated", body["summary"])

	promptsUnchanged("the rule is alice's, not the prompts dir's")

	// The curated memories reach the next chat without a restart.
	veratest.Chat(t, p, "alice", false, veratest.User("What is my boat called?"))
	sys := veratest.SystemOf(up.LastChat(t))
	assert.Contains(t, sys, "Assistant: My boat is called Nautilus.")

	// Status and health.
	_, b := veratest.AdminDo(t, p, "Bearer s3cret", http.MethodGet, "/curator/status", "")
	var st map[string]any
	require.NoError(t, json.Unmarshal(b, &st))
	assert.Equal(t, false, st["running"])
	assert.Equal(t, "0 2 * * *", st["schedule"])
	assert.NotEmpty(t, st["next_run"])
	assert.Equal(t, "ok", st["last"].(map[string]any)["alice"].(map[string]any)["status"])
	cur := veratest.Healthz(t, p)["curator"].(map[string]any)
	assert.Equal(t, "ok", cur["last_status"])

	// 409 while a run is going.
	veratest.Chat(t, p, "alice", false, veratest.User("My dog is Rex."))
	veratest.Chat(t, p, "bob", false, veratest.User("I like tea."))
	require.Eventually(t, func() bool {
		_, body := curatorRun(t, p, "?dry_run=true", "s3cret")
		return body["processed"] == float64(3) // the boat question, the dog and bob's tea
	}, 15*time.Second, 100*time.Millisecond)
	hold.Store(true)
	first := make(chan int, 1)
	go func() {
		c, _ := curatorRun(t, p, "", "s3cret")
		first <- c
	}()
	<-entered
	code, body = curatorRun(t, p, "", "s3cret")
	assert.Equal(t, http.StatusConflict, code)
	assert.Equal(t, "busy", body["status"])
	close(release)
	assert.Equal(t, http.StatusOK, <-first)
	p.Stop(t)

	// vera curate, with vera stopped: nothing left to do.
	hold.Store(false)
	code2, out, stderr := veratest.RunCommand(t, env, "curate", "--dry-run")
	require.Equal(t, 0, code2, stderr)
	assert.Contains(t, out, `"status": "ok"`)
	assert.Contains(t, out, `"processed": 0`)
	promptsUnchanged("no run writes into the prompts dir")

	// The rule is a memory of alice's alone, stored once although the boat
	// question taught it again.
	db := veratest.OpenStore(t, data)
	rulesOf := func(ns string) []string {
		page, _, err := db.Scroll(context.Background(), memory.Filter{Namespace: ns, Types: []memory.Type{memory.Rule}}, "", 100)
		require.NoError(t, err)
		var out []string
		for _, m := range page {
			out = append(out, m.Text)
		}
		return out
	}
	assert.Equal(t, []string{"Call the user Captain."}, rulesOf("alice"))
	assert.Empty(t, rulesOf("bob"), "alice's rule never reaches bob")
	require.NoError(t, db.Close())

	// The rule joins alice's system layer, and only hers.
	p = veratest.Launch(t, env...)
	h, _ := veratest.ChatWhole(t, p, "alice", "llama3.2", "good morning")
	assert.Contains(t, veratest.SystemOf(up.LastChat(t)), "- Call the user Captain.")
	assert.Regexp(t, `; rules=1; `, h.Get("X-Vera-Context"))
	veratest.Chat(t, p, "bob", false, veratest.User("good morning"))
	assert.NotContains(t, veratest.SystemOf(up.LastChat(t)), "Captain")
}
