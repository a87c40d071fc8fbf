package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/ollama/ollamatest"
)

// eraseToken is the admin token of the erase tests' vera.
const eraseToken = "erase-t0ken"

// eraseAdmin sends an admin request to p with the token and returns the
// status and the body.
func eraseAdmin(t *testing.T, p *proc, method, path, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+p.addr+path, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+eraseToken)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return res.StatusCode, b
}

// eraseMemory is a memory as GET /memories lists it.
type eraseMemory struct {
	ID, Type, Text string
}

// eraseList lists every memory of ns, of every type, through GET
// /memories, page by page.
func eraseList(t *testing.T, p *proc, ns string) []eraseMemory {
	t.Helper()
	var out []eraseMemory
	cursor := ""
	for {
		code, b := eraseAdmin(t, p, http.MethodGet, "/memories?namespace="+url.QueryEscape(ns)+"&limit=1000&cursor="+url.QueryEscape(cursor), "")
		require.Equal(t, http.StatusOK, code, string(b))
		var page struct {
			Memories []eraseMemory `json:"memories"`
			Next     string        `json:"next_cursor"`
		}
		require.NoError(t, json.Unmarshal(b, &page), string(b))
		out = append(out, page.Memories...)
		if page.Next == "" {
			return out
		}
		cursor = page.Next
	}
}

// eraseIDs returns the ids of ns's memories whose text holds secret.
func eraseIDs(t *testing.T, p *proc, ns, secret string) []string {
	t.Helper()
	var ids []string
	for _, m := range eraseList(t, p, ns) {
		if strings.Contains(strings.ToLower(m.Text), strings.ToLower(secret)) {
			ids = append(ids, m.ID)
		}
	}
	return ids
}

// eraseHolding lists the files under dir that hold secret, in any case
// (the index keeps words lowercased), read as raw bytes as grep -a reads
// them, with the offsets of the first hits.
func eraseHolding(t *testing.T, dir, secret string) []string {
	t.Helper()
	want := eraseLower([]byte(secret))
	var out []string
	require.NoError(t, filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			return nil // renamed meanwhile (a snapshot's temporary file)
		}
		if err != nil {
			return err
		}
		low := eraseLower(b)
		var at []int
		for off := 0; len(at) < 5; {
			i := bytes.Index(low[off:], want)
			if i < 0 {
				break
			}
			at = append(at, off+i)
			off += i + len(want)
		}
		if len(at) > 0 {
			rel, _ := filepath.Rel(dir, path)
			out = append(out, fmt.Sprintf("%s (%d times, at %v)", rel, bytes.Count(low, want), at))
		}
		return nil
	}))
	return out
}

// eraseLower lowercases b's ASCII letters and keeps every other byte as
// it is (bytes.ToLower rewrites invalid UTF-8, moving the offsets).
func eraseLower(b []byte) []byte {
	out := make([]byte, len(b))
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		out[i] = c
	}
	return out
}

// eraseTell tells secret as ns through /api/chat (the official Ollama
// client) and /v1/chat/completions (openai-go), each in a chat of its
// own, then asks for it in a new chat until vera recalls it (that chat's
// kept plan carries it), and waits until every turn is stored.
func eraseTell(t *testing.T, p *proc, up *ollamatest.Server, ns, secret string) {
	t.Helper()
	ollamatest.ChatWith(t, p.addr, http.Header{"X-Openwebui-User-Id": {ns}, "X-Openwebui-Chat-Id": {ns + "-tell-ollama"}},
		user("My locker code is "+secret+"."))
	c := openai.NewClient(option.WithBaseURL("http://"+p.addr+"/v1/"), option.WithAPIKey("ollama"), option.WithMaxRetries(0),
		option.WithHeader("X-OpenWebUI-User-Id", ns), option.WithHeader("X-OpenWebUI-Chat-Id", ns+"-tell-openai"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "llama3.2",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Note it well: my locker code is " + secret + ".")}})
	require.NoError(t, err)
	recallsEventually(t, p, up, ns, "What is my locker code?", secret)
	require.Eventually(t, func() bool { return pendingOf(t, p) == 0 }, 20*time.Second, 20*time.Millisecond, "turns never stored")
}

// eraseRestart starts vera again on env's data dir (what a restart after
// the kill does: the store opened, the queue written, the index loaded),
// waits until nothing is queued, checks that ns holds nothing of secret,
// and stops it gracefully.
func eraseRestart(t *testing.T, env []string, ns, secret string) {
	t.Helper()
	p := startVera(t, env...)
	require.Eventually(t, func() bool { return pendingOf(t, p) == 0 }, 20*time.Second, 20*time.Millisecond)
	assert.Empty(t, eraseIDs(t, p, ns, secret), "no memory holds it after the restart")
	stop(t, p)
}

// A secret told through /api/chat and /v1/chat/completions, recalled by a
// later chat, then erased by DELETE /memories/{id} (each memory holding
// it) or DELETE /namespaces/{ns}, with vera killed by SIGKILL the moment
// the answer arrives: no file under the data dir holds a byte of it, read
// raw, neither right after the kill nor after the next start on those
// files and a graceful stop.
func TestEraseSurvivesKill9(t *testing.T) {
	up := ollamatest.New(t)

	t.Run("delete memories", func(t *testing.T) {
		const ns, secret = "alice", "SECRET51844027716093"
		data := t.TempDir()
		env := []string{"VERA_OLLAMA_URL=" + up.URL, "VERA_DATA_DIR=" + data, "VERA_ADMIN_TOKEN=" + eraseToken}
		p := startVera(t, env...)
		eraseTell(t, p, up, ns, secret)
		// A stop and a start: the index snapshot holds its words too.
		stop(t, p)
		p = startVera(t, env...)
		ids := eraseIDs(t, p, ns, secret)
		require.Len(t, ids, 2, "a turn a chat that told it")
		before := eraseHolding(t, data, secret)
		require.NotEmpty(t, before, "on disk before the erase")
		t.Logf("before the erase, %s is in %v", secret, before)

		for i, id := range ids {
			code, b := eraseAdmin(t, p, http.MethodDelete, "/memories/"+id, "")
			if i == len(ids)-1 && code == http.StatusNoContent {
				require.NoError(t, p.cmd.Process.Kill(), "SIGKILL the moment the last 204 arrived")
			}
			require.Equal(t, http.StatusNoContent, code, string(b))
		}
		select {
		case <-p.exited:
		case <-time.After(10 * time.Second):
			t.Fatal("vera did not die of SIGKILL")
		}
		assert.Empty(t, eraseHolding(t, data, secret), "nothing of it after kill -9")

		eraseRestart(t, env, ns, secret)
		assert.Empty(t, eraseHolding(t, data, secret), "nor after a start on those files and a stop")
	})

	t.Run("erase namespace", func(t *testing.T) {
		const ns, secret = "carol", "SECRET62955138827104"
		data := t.TempDir()
		env := []string{"VERA_OLLAMA_URL=" + up.URL, "VERA_DATA_DIR=" + data, "VERA_ADMIN_TOKEN=" + eraseToken}
		p := startVera(t, env...)
		eraseTell(t, p, up, ns, secret)
		code, b := eraseAdmin(t, p, http.MethodPost, "/memories", `{"namespace":"dave","text":"Dave's locker code is 1234."}`)
		require.Equal(t, http.StatusCreated, code, string(b))
		stored := map[string]int{}
		for _, m := range eraseList(t, p, ns) {
			stored[m.Type]++
		}
		require.Len(t, eraseIDs(t, p, ns, secret), 2, "a turn a chat that told it")
		before := eraseHolding(t, data, secret)
		require.NotEmpty(t, before, "on disk before the erase")
		t.Logf("before the erase, %s is in %v", secret, before)

		code, b = eraseAdmin(t, p, http.MethodDelete, "/namespaces/"+ns, "")
		if code == http.StatusOK {
			require.NoError(t, p.cmd.Process.Kill(), "SIGKILL the moment the receipt arrived")
		}
		require.Equal(t, http.StatusOK, code, string(b))
		select {
		case <-p.exited:
		case <-time.After(10 * time.Second):
			t.Fatal("vera did not die of SIGKILL")
		}
		assert.Empty(t, eraseHolding(t, data, secret), "nothing of it after kill -9")

		var r struct {
			Namespace string         `json:"namespace"`
			Erased    map[string]int `json:"erased"`
		}
		require.NoError(t, json.Unmarshal(b, &r), string(b))
		assert.Equal(t, ns, r.Namespace)
		assert.Equal(t, stored["raw"], r.Erased["raw"], "every turn stored: %v", stored)
		assert.GreaterOrEqual(t, r.Erased["raw"], 3, "the two that told it and a recall")
		assert.Zero(t, r.Erased["queued"], "all stored before")
		assert.Positive(t, r.Erased["plans"], "the chats' kept plans")

		p = startVera(t, env...)
		require.Eventually(t, func() bool { return pendingOf(t, p) == 0 }, 20*time.Second, 20*time.Millisecond)
		assert.Empty(t, eraseList(t, p, ns), "nothing of carol after the restart")
		assert.Len(t, eraseList(t, p, "dave"), 1, "another person's memory stays")
		code, b = eraseAdmin(t, p, http.MethodGet, "/namespaces", "")
		require.Equal(t, http.StatusOK, code)
		assert.NotContains(t, string(b), `"`+ns+`"`, "carol is not listed")
		stop(t, p)
		assert.Empty(t, eraseHolding(t, data, secret), "nor after a start on those files and a stop")
	})
}
