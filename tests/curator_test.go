package tests

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

func post(t *testing.T, url, token string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	var body map[string]any
	require.NoError(t, json.NewDecoder(res.Body).Decode(&body))
	return res.StatusCode, body
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
	p := startVera(t, env...)
	base := "http://" + p.addr

	chat(t, p, "alice", false, user("My boat is called Nautilus."))
	chat(t, p, "alice", false, user("I sail every Sunday."))

	// Admin routes need the token.
	code, body := post(t, base+"/curator/run", "")
	assert.Equal(t, http.StatusUnauthorized, code)
	assert.Contains(t, body["error"], "Bearer")

	// A dry run changes nothing; it waits for both turns to be stored.
	require.Eventually(t, func() bool {
		_, body := post(t, base+"/curator/run?dry_run=true&namespace=alice", "s3cret")
		return body["processed"] == float64(2)
	}, 15*time.Second, 100*time.Millisecond)
	promptsUnchanged("a dry run writes nothing")
	mu.Lock()
	assert.Contains(t, systems[0], "Today is "+time.Now().Format("2006-01-02"), "the date is filled in")
	mu.Unlock()

	code, body = post(t, base+"/curator/run?namespace=alice", "s3cret")
	assert.Equal(t, http.StatusOK, code, body)
	assert.Equal(t, "ok", body["status"])
	assert.Equal(t, float64(2), body["processed"])
	assert.Equal(t, float64(2), body["curated"])
	assert.Equal(t, float64(2), body["deleted"])
	assert.Equal(t, float64(1), body["rules"])
	assert.Equal(t, "2 turns curated", body["summary"])

	promptsUnchanged("the rule is alice's, not the prompts dir's")

	// The curated memories reach the next chat without a restart.
	chat(t, p, "alice", false, user("What is my boat called?"))
	sys := systemOf(up.LastChat(t))
	assert.Contains(t, sys, "Assistant: My boat is called Nautilus.")

	// Status and health.
	req, _ := http.NewRequest(http.MethodGet, base+"/curator/status", nil)
	req.Header.Set("Authorization", "Bearer s3cret")
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	var st map[string]any
	require.NoError(t, json.NewDecoder(res.Body).Decode(&st))
	res.Body.Close()
	assert.Equal(t, false, st["running"])
	assert.Equal(t, "0 2 * * *", st["schedule"])
	assert.NotEmpty(t, st["next_run"])
	assert.Equal(t, "ok", st["last"].(map[string]any)["alice"].(map[string]any)["status"])
	cur := healthz(t, p)["curator"].(map[string]any)
	assert.Equal(t, "ok", cur["last_status"])

	// 409 while a run is going.
	chat(t, p, "alice", false, user("My dog is Rex."))
	chat(t, p, "bob", false, user("I like tea."))
	require.Eventually(t, func() bool {
		_, body := post(t, base+"/curator/run?dry_run=true", "s3cret")
		return body["processed"] == float64(3) // the boat question, the dog and bob's tea
	}, 15*time.Second, 100*time.Millisecond)
	hold.Store(true)
	first := make(chan int, 1)
	go func() {
		c, _ := post(t, base+"/curator/run", "s3cret")
		first <- c
	}()
	<-entered
	code, body = post(t, base+"/curator/run", "s3cret")
	assert.Equal(t, http.StatusConflict, code)
	assert.Equal(t, "busy", body["status"])
	close(release)
	assert.Equal(t, http.StatusOK, <-first)
	stop(t, p)

	// vera curate, with vera stopped: nothing left to do.
	hold.Store(false)
	code2, out, stderr := runVera(t, env, "curate", "--dry-run")
	require.Equal(t, 0, code2, stderr)
	assert.Contains(t, out, `"status": "ok"`)
	assert.Contains(t, out, `"processed": 0`)
	promptsUnchanged("no run writes into the prompts dir")

	// The rule is a memory of alice's alone, stored once although the boat
	// question taught it again.
	db := openStore(t, data)
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
	p = startVera(t, env...)
	base = "http://" + p.addr
	req, _ = http.NewRequest(http.MethodPost, base+"/api/chat",
		strings.NewReader(`{"model":"llama3.2","stream":false,"messages":[{"role":"user","content":"good morning"}]}`))
	req.Header.Set("X-OpenWebUI-User-Id", "alice")
	res, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	res.Body.Close()
	assert.Contains(t, systemOf(up.LastChat(t)), "- Call the user Captain.")
	assert.Regexp(t, `; rules=1; `, res.Header.Get("X-Vera-Context"))
	chat(t, p, "bob", false, user("good morning"))
	assert.NotContains(t, systemOf(up.LastChat(t)), "Captain")
}
