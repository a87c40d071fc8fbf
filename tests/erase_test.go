package tests

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ollama/ollama/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/ollama/ollamatest"
	"github.com/vera-proxy/vera/tests/veratest"
)

// eraseVera starts vera on a data dir of its own, with small layers.
func eraseVera(t *testing.T) (*ollamatest.Dialects, string, *veratest.InProcess) {
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
	veratest.Settled(t, p)
	// A second chat recalls it: its kept plan carries the text too.
	var h []msg
	converse(t, conversationDialects[0], p, up, "alice", "ask", &h, "What is my passport number?", "And when does it expire?")
	require.Contains(t, up.LastRaw("/api/chat"), secret, "recalled")
	veratest.Settled(t, p)
	id := memoryIDWith(t, p, "alice", secret)
	require.NotEmpty(t, veratest.Holding(t, data, secret), "on disk before")

	require.Equal(t, 204, veratest.AdminCall(t, p, "", "DELETE", "/memories/"+id, "", nil))
	killed := veratest.CopyDir(t, data)
	if d := os.Getenv("KEEP_ERASED"); d != "" {
		_ = os.CopyFS(d, os.DirFS(killed))
	}
	assert.Empty(t, veratest.Holding(t, killed, secret), "nothing of it the moment DELETE answered")
	time.Sleep(200 * time.Millisecond)
	assert.Empty(t, veratest.Holding(t, data, secret), "nor after")

	// A start on what a kill -9 left.
	db := veratest.OpenStore(t, killed)
	require.NoError(t, db.Close())
	assert.Empty(t, veratest.Holding(t, killed, secret), "nor after a start on those files")

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
		require.Equal(t, 201, veratest.AdminCall(t, p, "", "POST", "/memories", m, nil))
	}
	veratest.Settled(t, p)
	var h []msg
	converse(t, conversationDialects[0], p, up, "alice", "ask", &h, "What is my PIN?", "Say it again?")
	require.NotEmpty(t, veratest.Holding(t, data, secret))

	var r struct {
		Namespace string         `json:"namespace"`
		Erased    map[string]int `json:"erased"`
		At        time.Time      `json:"at"`
	}
	require.Equal(t, 200, veratest.AdminCall(t, p, "", "DELETE", "/namespaces/alice", "", &r))
	killed := veratest.CopyDir(t, data)
	assert.Equal(t, "alice", r.Namespace)
	assert.Equal(t, len(conversationDialects)+2, r.Erased["raw"], "a turn a chat, the two of the last chat")
	assert.Equal(t, 1, r.Erased["curated"])
	assert.Equal(t, 1, r.Erased["rule"])
	assert.Equal(t, 1, r.Erased["profile"])
	assert.Positive(t, r.Erased["plans"])
	assert.WithinDuration(t, time.Now(), r.At, time.Minute)
	assert.Empty(t, veratest.Holding(t, killed, secret), "nothing of it the moment the erase answered")
	db := veratest.OpenStore(t, killed)
	require.NoError(t, db.Close())
	assert.Empty(t, veratest.Holding(t, killed, secret), "nor after a start on those files")

	var spaces struct {
		Namespaces []struct{ Namespace string } `json:"namespaces"`
	}
	require.Equal(t, 200, veratest.AdminCall(t, p, "", "GET", "/namespaces", "", &spaces))
	require.Len(t, spaces.Namespaces, 1)
	assert.Equal(t, "bob", spaces.Namespaces[0].Namespace)
	assert.NotEmpty(t, memoryIDWith(t, p, "bob", "1234"))
}

// sendGenerate sends history's last user message as an /api/generate
// prompt, streamed, through the official Ollama client (what `ollama run
// MODEL "prompt"` sends): the route has no history of its own.
func sendGenerate(t *testing.T, p *veratest.InProcess, ns, chatID string, history []msg, _ string) (string, string) {
	t.Helper()
	prompt := ""
	for _, m := range history {
		if m.role == "user" {
			prompt = m.text
		}
	}
	c := veratest.OllamaClientWith(t, p, veratest.HeadersFor(ns, chatID))
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

// erasedToTheByte erases every memory of ns holding secret by DELETE
// /memories/{id} and checks that no file under data holds it: the moment
// the last DELETE answered (a copy: what a kill -9 then would leave),
// the live files a moment later, and the copy after a start on it.
func erasedToTheByte(t *testing.T, p *veratest.InProcess, data, ns, secret string) {
	t.Helper()
	ids := veratest.IDsHolding(t, p, "", ns, secret)
	require.NotEmpty(t, ids, "a memory holds %s", secret)
	before := veratest.Holding(t, data, secret)
	require.NotEmpty(t, before, "on disk before the erase")
	t.Logf("before the erase, %s is in %v", secret, before)
	for _, id := range ids {
		require.Equal(t, 204, veratest.AdminCall(t, p, "", "DELETE", "/memories/"+id, "", nil), id)
	}
	killed := veratest.CopyDir(t, data)
	if d := os.Getenv("KEEP_ERASED"); d != "" {
		_ = os.CopyFS(filepath.Join(d, strings.ReplaceAll(t.Name(), "/", "_")), os.DirFS(killed))
	}
	if !assert.Empty(t, veratest.Holding(t, killed, secret), "nothing of it the moment DELETE answered") {
		veratest.LogLeaks(t, killed, secret)
	}
	time.Sleep(300 * time.Millisecond)
	assert.Empty(t, veratest.Holding(t, data, secret), "nor a moment after")
	db := veratest.OpenStore(t, killed)
	require.NoError(t, db.Close())
	assert.Empty(t, veratest.Holding(t, killed, secret), "nor after a start on what a kill -9 left")
	assert.Empty(t, veratest.IDsHolding(t, p, "", ns, secret), "no memory holds it any more")
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
			veratest.Settled(t, p)
			converse(t, d, p, up, "alice", "ask", &h, "What is my locker code?")
			require.Contains(t, up.LastRaw(d.path), secret, "recalled")
			veratest.Settled(t, p)

			erasedToTheByte(t, p, data, "alice", secret)

			converse(t, d, p, up, "alice", "ask", &h, "Tell me the code again?")
			assert.NotContains(t, up.LastRaw(d.path), secret, "the chat goes on without it")
			veratest.Settled(t, p)
			p.Stop(t)
			assert.Empty(t, veratest.Holding(t, data, secret), "nor after a graceful stop")
		})
	}

	t.Run("mcp add_memory", func(t *testing.T) {
		const secret = "SECRET973019582640"
		up, data, p := eraseVera(t)
		s := veratest.MCPSession(t, p, http.Header{"X-Openwebui-User-Id": {"alice"}})
		var added struct{ ID string }
		res := veratest.Call(t, s, "add_memory", map[string]any{"content": "Alice's locker code is " + secret + "."}, &added)
		require.False(t, res.IsError, veratest.ToolText(res))
		veratest.Settled(t, p)
		d := conversationDialects[0]
		var h []msg
		converse(t, d, p, up, "alice", "ask", &h, "What is my locker code?")
		require.Contains(t, up.LastRaw(d.path), secret, "recalled")
		veratest.Settled(t, p)
		assert.Contains(t, veratest.IDsHolding(t, p, "", "alice", secret), added.ID)

		erasedToTheByte(t, p, data, "alice", secret)

		var found struct{ Memories []struct{ ID, Text string } }
		res = veratest.Call(t, s, "search_memories", map[string]any{"query": "locker code " + secret}, &found)
		require.False(t, res.IsError, veratest.ToolText(res))
		for _, m := range found.Memories {
			assert.NotContains(t, m.Text, secret, "search_memories finds nothing of it")
		}
		converse(t, d, p, up, "alice", "ask", &h, "Tell me the code again?")
		assert.NotContains(t, up.LastRaw(d.path), secret, "the chat goes on without it")
		veratest.Settled(t, p)
		p.Stop(t)
		assert.Empty(t, veratest.Holding(t, data, secret), "nor after a graceful stop")
	})

	// The ways TestNamespaceEraseLeavesNothing does not take (/api/generate
	// and MCP) with the others, into one namespace, erased at once.
	t.Run("namespace", func(t *testing.T) {
		const secret = "SECRET073019582640"
		_, data, p := eraseVera(t)
		for i, d := range eraseDialects {
			d.send(t, p, "carol", fmt.Sprintf("chat-%d", i), []msg{{"user", fmt.Sprintf("My locker code is %s, note %d.", secret, i)}}, "")
		}
		s := veratest.MCPSession(t, p, http.Header{"X-Openwebui-User-Id": {"carol"}})
		res := veratest.Call(t, s, "add_memory", map[string]any{"content": "Carol's locker code is " + secret + "."}, nil)
		require.False(t, res.IsError, veratest.ToolText(res))
		require.Equal(t, 201, veratest.AdminCall(t, p, "", "POST", "/memories", `{"namespace":"dave","text":"Dave's locker code is 1234."}`, nil))
		veratest.Settled(t, p)
		require.Len(t, veratest.IDsHolding(t, p, "", "carol", secret), len(eraseDialects)+1, "a turn a chat, and MCP's memory")
		require.NotEmpty(t, veratest.Holding(t, data, secret))

		var r struct {
			Namespace string         `json:"namespace"`
			Erased    map[string]int `json:"erased"`
		}
		require.Equal(t, 200, veratest.AdminCall(t, p, "", "DELETE", "/namespaces/carol", "", &r))
		killed := veratest.CopyDir(t, data)
		assert.Equal(t, "carol", r.Namespace)
		assert.Equal(t, len(eraseDialects), r.Erased["raw"], "a turn a chat")
		assert.Equal(t, 1, r.Erased["curated"], "MCP's add_memory")
		assert.Zero(t, r.Erased["queued"], "settled before")
		assert.Positive(t, r.Erased["plans"], "the chats' kept plans")
		assert.Empty(t, veratest.Holding(t, killed, secret), "nothing of it the moment the erase answered")
		time.Sleep(300 * time.Millisecond)
		assert.Empty(t, veratest.Holding(t, data, secret), "nor a moment after")
		db := veratest.OpenStore(t, killed)
		require.NoError(t, db.Close())
		assert.Empty(t, veratest.Holding(t, killed, secret), "nor after a start on those files")
		assert.Empty(t, veratest.IDsHolding(t, p, "", "carol", secret))
		assert.NotEmpty(t, memoryIDWith(t, p, "dave", "1234"), "another person's memory stays")
		p.Stop(t)
		assert.Empty(t, veratest.Holding(t, data, secret), "nor after a graceful stop")
	})
}
