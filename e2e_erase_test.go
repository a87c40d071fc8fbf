package main

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

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
