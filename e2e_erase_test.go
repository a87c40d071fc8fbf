package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ollama/ollama/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/ollama/ollamatest"
)

// eachFile calls fn with every file under dir: its path from dir and
// its bytes.
func eachFile(t *testing.T, dir string, fn func(rel string, b []byte)) {
	t.Helper()
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
		rel, _ := filepath.Rel(dir, path)
		fn(rel, b)
		return nil
	}))
}

// holding lists the files under dir that hold secret, in any case (the
// index keeps words lowercased), read as bytes.
func holding(t *testing.T, dir, secret string) []string {
	t.Helper()
	var out []string
	want := bytes.ToLower([]byte(secret))
	eachFile(t, dir, func(rel string, b []byte) {
		if n := bytes.Count(bytes.ToLower(b), want); n > 0 {
			out = append(out, fmt.Sprintf("%s (%d)", rel, n))
		}
	})
	return out
}

// copyDir copies dir's files as they are on disk now: what a kill -9 at
// this moment would leave.
func copyDir(t *testing.T, dir string) string {
	t.Helper()
	to := t.TempDir()
	eachFile(t, dir, func(rel string, b []byte) {
		require.NoError(t, os.MkdirAll(filepath.Join(to, filepath.Dir(rel)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(to, rel), b, 0o600))
	})
	return to
}

// eraseVera starts vera on a data dir of its own, with small layers.
func eraseVera(t *testing.T) (*ollamatest.Dialects, string, *inProcess) {
	t.Helper()
	up := ollamatest.NewDialects(t)
	numberedReplies(up)
	data := t.TempDir()
	return up, data, conversationVera(t, up, data, t.TempDir())
}

// DELETE /memories/{id} erases: the moment it answers (what a kill -9
// then would leave), and after a start on those files, no file under the
// data dir holds a byte of the memory's text: not the database, its
// write-ahead log, the index snapshot, the queue's journal, nor a
// conversation's kept plan that carried it.
func TestDeleteErasesToTheByte(t *testing.T) {
	const secret = "ZX9988776SECRET"
	up, data, p := eraseVera(t)
	sendOllama(t, p, "alice", "tell", []msg{{"user", "My passport number is " + secret + "."}}, "")
	settled(t, p)
	// A second chat recalls it: its kept plan carries the text too.
	var h []msg
	converse(t, conversationDialects[0], p, up, "alice", "ask", &h, "What is my passport number?", "And when does it expire?")
	require.Contains(t, up.LastRaw("/api/chat"), secret, "recalled")
	settled(t, p)
	id := memoryIDWith(t, p, "alice", secret)
	require.NotEmpty(t, holding(t, data, secret), "on disk before")

	require.Equal(t, 204, adminCall(t, p, "", "DELETE", "/memories/"+id, "", nil))
	killed := copyDir(t, data)
	if d := os.Getenv("KEEP_ERASED"); d != "" {
		_ = os.CopyFS(d, os.DirFS(killed))
	}
	assert.Empty(t, holding(t, killed, secret), "nothing of it the moment DELETE answered")
	time.Sleep(200 * time.Millisecond)
	assert.Empty(t, holding(t, data, secret), "nor after")

	// A start on what a kill -9 left.
	db := openStore(t, killed)
	require.NoError(t, db.Close())
	assert.Empty(t, holding(t, killed, secret), "nor after a start on those files")

	// The chat goes on without it.
	converse(t, conversationDialects[0], p, up, "alice", "ask", &h, "Tell me again?")
	assert.NotContains(t, up.LastRaw("/api/chat"), secret)
}

// DELETE /namespaces/{ns} erases everything of one person: every type of
// memory, the conversation plans, the row in /namespaces; the receipt
// counts what was there, and no file holds a byte of it. Another
// person's memories stay.
func TestNamespaceEraseLeavesNothing(t *testing.T) {
	const secret = "QW4455SECRETPIN"
	up, data, p := eraseVera(t)
	for i, d := range conversationDialects {
		d.send(t, p, "alice", fmt.Sprintf("chat-%d", i), []msg{{"user", fmt.Sprintf("Remember my PIN %s, number %d.", secret, i)}}, "")
	}
	for _, m := range []string{`{"namespace":"alice","text":"Alice's PIN is ` + secret + `."}`,
		`{"namespace":"alice","type":"rule","text":"Never say ` + secret + ` aloud."}`,
		`{"namespace":"alice","type":"profile","text":"Alice, whose PIN is ` + secret + `."}`,
		`{"namespace":"bob","text":"Bob's PIN is 1234."}`} {
		require.Equal(t, 201, adminCall(t, p, "", "POST", "/memories", m, nil))
	}
	settled(t, p)
	var h []msg
	converse(t, conversationDialects[0], p, up, "alice", "ask", &h, "What is my PIN?", "Say it again?")
	require.NotEmpty(t, holding(t, data, secret))

	var r struct {
		Namespace string         `json:"namespace"`
		Erased    map[string]int `json:"erased"`
		At        time.Time      `json:"at"`
	}
	require.Equal(t, 200, adminCall(t, p, "", "DELETE", "/namespaces/alice", "", &r))
	killed := copyDir(t, data)
	assert.Equal(t, "alice", r.Namespace)
	assert.Equal(t, len(conversationDialects)+2, r.Erased["raw"], "a turn a chat, the two of the last chat")
	assert.Equal(t, 1, r.Erased["curated"])
	assert.Equal(t, 1, r.Erased["rule"])
	assert.Equal(t, 1, r.Erased["profile"])
	assert.Positive(t, r.Erased["plans"])
	assert.WithinDuration(t, time.Now(), r.At, time.Minute)
	assert.Empty(t, holding(t, killed, secret), "nothing of it the moment the erase answered")
	db := openStore(t, killed)
	require.NoError(t, db.Close())
	assert.Empty(t, holding(t, killed, secret), "nor after a start on those files")

	var spaces struct {
		Namespaces []struct{ Namespace string } `json:"namespaces"`
	}
	require.Equal(t, 200, adminCall(t, p, "", "GET", "/namespaces", "", &spaces))
	require.Len(t, spaces.Namespaces, 1)
	assert.Equal(t, "bob", spaces.Namespaces[0].Namespace)
	assert.NotEmpty(t, memoryIDWith(t, p, "bob", "1234"))
}

// sendGenerate sends history's last user message as an /api/generate
// prompt, streamed, through the official Ollama client (what `ollama run
// MODEL "prompt"` sends): the route has no history of its own.
func sendGenerate(t *testing.T, p *inProcess, ns, chatID string, history []msg, _ string) (string, string) {
	t.Helper()
	prompt := ""
	for _, m := range history {
		if m.role == "user" {
			prompt = m.text
		}
	}
	c := api.NewClient(mustParse(t, "http://"+p.addr), &http.Client{Transport: headerTransport{Header: headersFor(ns, chatID)}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out strings.Builder
	require.NoError(t, c.Generate(ctx, &api.GenerateRequest{Model: "llama3.2", Prompt: prompt}, func(r api.GenerateResponse) error {
		out.WriteString(r.Response)
		return nil
	}))
	return out.String(), ""
}

// eraseDialects are the five chat routes a secret can be told on.
var eraseDialects = append([]convo{{name: "ollama generate", path: "/api/generate", send: sendGenerate}}, conversationDialects...)

// idsHolding lists the ids of ns's memories, of every type, whose text
// holds secret (in any case), reading every page of GET /memories.
func idsHolding(t *testing.T, p *inProcess, ns, secret string) []string {
	t.Helper()
	var ids []string
	cursor := ""
	for {
		var page struct {
			Memories []struct {
				ID   string `json:"id"`
				Text string `json:"text"`
			} `json:"memories"`
			Next string `json:"next_cursor"`
		}
		require.Equal(t, 200, adminCall(t, p, "", "GET", "/memories?namespace="+url.QueryEscape(ns)+"&limit=1000&cursor="+url.QueryEscape(cursor), "", &page))
		for _, m := range page.Memories {
			if strings.Contains(strings.ToLower(m.Text), strings.ToLower(secret)) {
				ids = append(ids, m.ID)
			}
		}
		if page.Next == "" {
			return ids
		}
		cursor = page.Next
	}
}

// logLeaks logs, for each place a file under dir holds secret, the bytes
// before it: which record kept it.
func logLeaks(t *testing.T, dir, secret string) {
	t.Helper()
	want := asciiLower([]byte(secret))
	eachFile(t, dir, func(rel string, b []byte) {
		low := asciiLower(b)
		for off := 0; ; {
			i := bytes.Index(low[off:], want)
			if i < 0 {
				return
			}
			at := off + i
			t.Logf("%s at %d: %q", rel, at, b[max(0, at-240):min(len(b), at+len(want)+40)])
			off = at + len(want)
		}
	})
}

// asciiLower lowercases b's ASCII letters and keeps every other byte as
// it is (bytes.ToLower rewrites invalid UTF-8, moving the offsets).
func asciiLower(b []byte) []byte {
	out := make([]byte, len(b))
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		out[i] = c
	}
	return out
}

// erasedToTheByte erases every memory of ns holding secret by DELETE
// /memories/{id} and checks that no file under data holds it: the moment
// the last DELETE answered (a copy: what a kill -9 then would leave),
// the live files a moment later, and the copy after a start on it.
func erasedToTheByte(t *testing.T, p *inProcess, data, ns, secret string) {
	t.Helper()
	ids := idsHolding(t, p, ns, secret)
	require.NotEmpty(t, ids, "a memory holds %s", secret)
	before := holding(t, data, secret)
	require.NotEmpty(t, before, "on disk before the erase")
	t.Logf("before the erase, %s is in %v", secret, before)
	for _, id := range ids {
		require.Equal(t, 204, adminCall(t, p, "", "DELETE", "/memories/"+id, "", nil), id)
	}
	killed := copyDir(t, data)
	if d := os.Getenv("KEEP_ERASED"); d != "" {
		_ = os.CopyFS(filepath.Join(d, strings.ReplaceAll(t.Name(), "/", "_")), os.DirFS(killed))
	}
	if !assert.Empty(t, holding(t, killed, secret), "nothing of it the moment DELETE answered") {
		logLeaks(t, killed, secret)
	}
	time.Sleep(300 * time.Millisecond)
	assert.Empty(t, holding(t, data, secret), "nor a moment after")
	db := openStore(t, killed)
	require.NoError(t, db.Close())
	assert.Empty(t, holding(t, killed, secret), "nor after a start on what a kill -9 left")
	assert.Empty(t, idsHolding(t, p, ns, secret), "no memory holds it any more")
}

// A secret told on each way in (the five chat routes through their
// official clients, and MCP's add_memory), recalled by a later chat whose
// kept plan carries it, then erased by DELETE /memories/{id}: no file
// under the data dir holds a byte of it, the moment DELETE answered, a
// moment later, after a start on what a kill -9 would have left, and
// after a graceful stop; the next chat does not carry it. Then the same
// secrets told on every way into one namespace, erased by DELETE
// /namespaces/{ns}: the receipt counts what was stored.
func TestEraseInEveryDialectAndMCP(t *testing.T) {
	for i, d := range eraseDialects {
		t.Run(d.name, func(t *testing.T) {
			secret := fmt.Sprintf("SECRET%d73019582640", i+1)
			up, data, p := eraseVera(t)
			var h []msg
			d.send(t, p, "alice", "tell", []msg{{"user", "My locker code is " + secret + "."}}, "")
			settled(t, p)
			converse(t, d, p, up, "alice", "ask", &h, "What is my locker code?")
			require.Contains(t, up.LastRaw(d.path), secret, "recalled")
			settled(t, p)

			erasedToTheByte(t, p, data, "alice", secret)

			converse(t, d, p, up, "alice", "ask", &h, "Tell me the code again?")
			assert.NotContains(t, up.LastRaw(d.path), secret, "the chat goes on without it")
			settled(t, p)
			p.stop(t)
			assert.Empty(t, holding(t, data, secret), "nor after a graceful stop")
		})
	}

	t.Run("mcp add_memory", func(t *testing.T) {
		const secret = "SECRET973019582640"
		up, data, p := eraseVera(t)
		s := mcpSession(t, p, http.Header{"X-Openwebui-User-Id": {"alice"}})
		var added struct{ ID string }
		res := call(t, s, "add_memory", map[string]any{"content": "Alice's locker code is " + secret + "."}, &added)
		require.False(t, res.IsError, toolText(res))
		settled(t, p)
		d := conversationDialects[0]
		var h []msg
		converse(t, d, p, up, "alice", "ask", &h, "What is my locker code?")
		require.Contains(t, up.LastRaw(d.path), secret, "recalled")
		settled(t, p)
		assert.Contains(t, idsHolding(t, p, "alice", secret), added.ID)

		erasedToTheByte(t, p, data, "alice", secret)

		var found struct{ Memories []struct{ ID, Text string } }
		res = call(t, s, "search_memories", map[string]any{"query": "locker code " + secret}, &found)
		require.False(t, res.IsError, toolText(res))
		for _, m := range found.Memories {
			assert.NotContains(t, m.Text, secret, "search_memories finds nothing of it")
		}
		converse(t, d, p, up, "alice", "ask", &h, "Tell me the code again?")
		assert.NotContains(t, up.LastRaw(d.path), secret, "the chat goes on without it")
		settled(t, p)
		p.stop(t)
		assert.Empty(t, holding(t, data, secret), "nor after a graceful stop")
	})

	// The ways TestNamespaceEraseLeavesNothing does not take (/api/generate
	// and MCP) with the others, into one namespace, erased at once.
	t.Run("namespace", func(t *testing.T) {
		const secret = "SECRET073019582640"
		_, data, p := eraseVera(t)
		for i, d := range eraseDialects {
			d.send(t, p, "carol", fmt.Sprintf("chat-%d", i), []msg{{"user", fmt.Sprintf("My locker code is %s, note %d.", secret, i)}}, "")
		}
		s := mcpSession(t, p, http.Header{"X-Openwebui-User-Id": {"carol"}})
		res := call(t, s, "add_memory", map[string]any{"content": "Carol's locker code is " + secret + "."}, nil)
		require.False(t, res.IsError, toolText(res))
		require.Equal(t, 201, adminCall(t, p, "", "POST", "/memories", `{"namespace":"dave","text":"Dave's locker code is 1234."}`, nil))
		settled(t, p)
		require.Len(t, idsHolding(t, p, "carol", secret), len(eraseDialects)+1, "a turn a chat, and MCP's memory")
		require.NotEmpty(t, holding(t, data, secret))

		var r struct {
			Namespace string         `json:"namespace"`
			Erased    map[string]int `json:"erased"`
		}
		require.Equal(t, 200, adminCall(t, p, "", "DELETE", "/namespaces/carol", "", &r))
		killed := copyDir(t, data)
		assert.Equal(t, "carol", r.Namespace)
		assert.Equal(t, len(eraseDialects), r.Erased["raw"], "a turn a chat")
		assert.Equal(t, 1, r.Erased["curated"], "MCP's add_memory")
		assert.Zero(t, r.Erased["queued"], "settled before")
		assert.Positive(t, r.Erased["plans"], "the chats' kept plans")
		assert.Empty(t, holding(t, killed, secret), "nothing of it the moment the erase answered")
		time.Sleep(300 * time.Millisecond)
		assert.Empty(t, holding(t, data, secret), "nor a moment after")
		db := openStore(t, killed)
		require.NoError(t, db.Close())
		assert.Empty(t, holding(t, killed, secret), "nor after a start on those files")
		assert.Empty(t, idsHolding(t, p, "carol", secret))
		assert.NotEmpty(t, memoryIDWith(t, p, "dave", "1234"), "another person's memory stays")
		p.stop(t)
		assert.Empty(t, holding(t, data, secret), "nor after a graceful stop")
	})
}
