package tests

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/app"
	"github.com/vera-proxy/vera/memory"
	"github.com/vera-proxy/vera/memory/openwebui"
	"github.com/vera-proxy/vera/memory/openwebui/openwebuitest"
	"github.com/vera-proxy/vera/ollama/ollamatest"
	"github.com/vera-proxy/vera/tests/veratest"
)

const (
	owuiToken = "sk-4f1e9a0c2b7d4e6f8a1b3c5d7e9f0a2b"
	aliceID   = "7d3c1f2e-5a4b-4c6d-8e9f-0a1b2c3d4e5f" // her Open WebUI user id
)

// owuiImport runs `vera memories import --from-open-webui` through app.Run
// with env and the arguments, and returns the report it printed (when it
// printed one), what it wrote to standard error, and its error.
func owuiImport(t *testing.T, env map[string]string, args ...string) (openwebui.Report, string, error) {
	t.Helper()
	var out, errs strings.Builder
	err := app.Run(context.Background(), append([]string{"memories", "import"}, args...), func(k string) string { return env[k] }, &out, &errs, nil)
	var rep openwebui.Report
	if out.Len() > 0 {
		require.NoError(t, json.Unmarshal([]byte(out.String()), &rep), out.String())
	}
	return rep, errs.String(), err
}

// aliceOpenWebUI is an Open WebUI where Alice keeps memories (and Bob
// his): their dates in epoch seconds, as Open WebUI keeps them.
func aliceOpenWebUI(t *testing.T) *openwebuitest.Server {
	owui := openwebuitest.New(t)
	owui.AddUser(owuiToken, aliceID, "user")
	owui.AddUser("sk-bob-0123456789abcdef", "bob-id", "user")
	for _, m := range []openwebuitest.Memory{
		{ID: "m-sister", Content: "Alice's sister Ana lives in Lisbon.", CreatedAt: 1735725600, UpdatedAt: 1738404000},
		{ID: "m-coffee", Content: "  Alice takes her coffee black.\n", CreatedAt: 1735812000, UpdatedAt: 1735812000},
		{ID: "m-empty", Content: "   ", CreatedAt: 1735812000, UpdatedAt: 1735812000},
		{ID: "m-mail", Content: "Alice's email is alice@example.com.", CreatedAt: 1735898400, UpdatedAt: 1735898400},
		{ID: "m-tea", Content: "alice likes   TEA.", CreatedAt: 1735984800, UpdatedAt: 1735984800},
	} {
		m.UserID = aliceID
		owui.Add(m)
	}
	owui.Add(openwebuitest.Memory{ID: "m-bob", UserID: "bob-id", Content: "Bob rides a bike.", CreatedAt: 1735725600, UpdatedAt: 1735725600})
	return owui
}

type importedMemory struct {
	ID, Namespace, Type, Text string
	Timestamp                 time.Time
	Metadata                  map[string]any
}

// curatedOf lists the curated memories of ns, by text.
func curatedOf(t *testing.T, p *veratest.InProcess, token, ns string) map[string]importedMemory {
	t.Helper()
	var list struct{ Memories []importedMemory }
	require.Equal(t, http.StatusOK, veratest.AdminCall(t, p, token, "GET", "/memories?namespace="+ns+"&type=curated&limit=100", "", &list))
	out := map[string]importedMemory{}
	for _, m := range list.Memories {
		out[m.Text] = m
	}
	return out
}

// Alice's memories in Open WebUI become curated memories of her
// namespace in a running vera, dated as there, saying where they came
// from; the next chat recalls them. Run again, the import adds only what
// is new: an edit made in vera meanwhile stays, an erased memory does
// not come back.
func TestOpenWebUIImportIntoRunningVera(t *testing.T) {
	up := ollamatest.New(t)
	p := veratest.Start(t, "VERA_OLLAMA_URL="+up.URL, "VERA_ADMIN_TOKEN=s3cret")
	admTok := "Bearer s3cret"
	env := map[string]string{"VERA_CONFIG_DIR": t.TempDir(), "VERA_ADMIN_TOKEN": "s3cret"}
	owui := aliceOpenWebUI(t)
	// Alice told vera about her tea already.
	require.Equal(t, http.StatusCreated, veratest.AdminCall(t, p, admTok, "POST", "/memories", `{"namespace":"`+aliceID+`","text":"Alice likes tea."}`, nil))

	rep, _, err := owuiImport(t, env, "--from-open-webui", owui.URL, "--token", owuiToken, "--url", "http://"+p.Addr)
	require.NoError(t, err)
	assert.Equal(t, openwebui.Report{From: owui.URL, Namespace: aliceID, Read: 5, Imported: 3,
		Skipped: map[string]int{"already there": 1, "empty": 1}}, rep)

	got := curatedOf(t, p, admTok, aliceID)
	require.Len(t, got, 4, "her three memories and the one vera had")
	sister := got["Alice's sister Ana lives in Lisbon."]
	assert.Equal(t, "curated", sister.Type)
	assert.Equal(t, time.Date(2025, 2, 1, 10, 0, 0, 0, time.UTC), sister.Timestamp.UTC(), "dated when Open WebUI last changed it")
	src, _ := sister.Metadata["source"].(map[string]any)
	assert.Equal(t, "import", src["via"])
	assert.Equal(t, "open-webui", src["client"])
	assert.Equal(t, owui.URL, src["url"])
	assert.Equal(t, "m-sister", src["memory_id"])
	assert.Equal(t, aliceID, src["user_id"])
	assert.Equal(t, "2025-01-01T10:00:00Z", src["created_at"])
	assert.Equal(t, "open-webui", sister.Metadata["imported_from"])
	assert.Contains(t, got, "Alice takes her coffee black.", "trimmed")
	mail := got["Alice's email is alice@example.com."]
	assert.Equal(t, true, mail.Metadata["private"], "the detectors ran, as on every import")
	assert.Contains(t, mail.Metadata["private_why"], "email")
	var h struct{ History []memory.Entry }
	require.Equal(t, http.StatusOK, veratest.AdminCall(t, p, admTok, "GET", "/memories/"+sister.ID+"/history", "", &h))
	require.Len(t, h.History, 1)
	assert.Equal(t, memory.Created, h.History[0].Action)
	assert.Equal(t, memory.ViaImport, h.History[0].Actor)

	// Open WebUI's user id is vera's namespace for her chats through it.
	veratest.RecallsEventually(t, p, up, aliceID, "Where does Alice's sister Ana live?", "Ana lives in Lisbon")

	// Meanwhile: she corrects one in vera, erases another, and Open WebUI
	// learns something new.
	require.Equal(t, http.StatusOK, veratest.AdminCall(t, p, admTok, "PATCH", "/memories/"+sister.ID, `{"text":"Alice's sister Ana lives in Porto now."}`, nil))
	require.Equal(t, http.StatusNoContent, veratest.AdminCall(t, p, admTok, "DELETE", "/memories/"+got["Alice takes her coffee black."].ID, "", nil))
	owui.Add(openwebuitest.Memory{ID: "m-cat", UserID: aliceID, Content: "Alice's cat is called Miso.", CreatedAt: 1738490400, UpdatedAt: 1738490400})

	rep, _, err = owuiImport(t, env, "--from-open-webui", owui.URL+"/", "--token", "Bearer "+owuiToken, "--url", "http://"+p.Addr)
	require.NoError(t, err)
	assert.Equal(t, openwebui.Report{From: owui.URL, Namespace: aliceID, Read: 6, Imported: 1,
		Skipped: map[string]int{"already there": 3, "removed in vera": 1, "empty": 1}}, rep)
	got = curatedOf(t, p, admTok, aliceID)
	assert.Contains(t, got, "Alice's sister Ana lives in Porto now.", "her edit stays")
	assert.NotContains(t, got, "Alice's sister Ana lives in Lisbon.")
	assert.NotContains(t, got, "Alice takes her coffee black.", "erased stays erased")
	assert.Contains(t, got, "Alice's cat is called Miso.")

	rep, _, err = owuiImport(t, env, "--from-open-webui", owui.URL, "--token", owuiToken, "--url", "http://"+p.Addr)
	require.NoError(t, err)
	assert.Equal(t, 0, rep.Imported, "nothing new: nothing imported")

	// --namespace puts them elsewhere: all of them, as new there.
	rep, _, err = owuiImport(t, env, "--from-open-webui", owui.URL, "--token", owuiToken, "--namespace", " alice ", "--url", "http://"+p.Addr)
	require.NoError(t, err)
	assert.Equal(t, "alice", rep.Namespace)
	assert.Equal(t, 5, rep.Imported)
	assert.Len(t, curatedOf(t, p, admTok, "alice"), 5)
	assert.Len(t, curatedOf(t, p, admTok, aliceID), 4, "her own namespace is as it was")

	// Bob's token brings Bob's memories, into his namespace.
	rep, _, err = owuiImport(t, env, "--from-open-webui", owui.URL, "--token", "sk-bob-0123456789abcdef", "--url", "http://"+p.Addr)
	require.NoError(t, err)
	assert.Equal(t, "bob-id", rep.Namespace)
	assert.Contains(t, curatedOf(t, p, admTok, "bob-id"), "Bob rides a bike.")

	// Without vera's admin token, vera refuses, and says what to set.
	_, _, err = owuiImport(t, map[string]string{"VERA_CONFIG_DIR": t.TempDir()}, "--from-open-webui", owui.URL, "--token", owuiToken, "--url", "http://"+p.Addr)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "VERA_ADMIN_TOKEN")
}

// The same import with no vera running: it works on the store, and a
// second run adds nothing.
func TestOpenWebUIImportIntoTheStore(t *testing.T) {
	up := ollamatest.New(t)
	data := t.TempDir()
	env := map[string]string{"VERA_CONFIG_DIR": t.TempDir(), "VERA_DATA_DIR": data, "VERA_OLLAMA_URL": up.URL, "VERA_LISTEN": ollamatest.DeadAddr(t)}
	owui := aliceOpenWebUI(t)

	rep, _, err := owuiImport(t, env, "--from-open-webui", owui.URL, "--token", owuiToken)
	require.NoError(t, err)
	assert.Equal(t, openwebui.Report{From: owui.URL, Namespace: aliceID, Read: 5, Imported: 4, Skipped: map[string]int{"empty": 1}}, rep)
	rep, _, err = owuiImport(t, env, "--from-open-webui", owui.URL, "--token", owuiToken)
	require.NoError(t, err)
	assert.Equal(t, openwebui.Report{From: owui.URL, Namespace: aliceID, Read: 5, Imported: 0, Skipped: map[string]int{"already there": 4, "empty": 1}}, rep)

	db := veratest.OpenStore(t, data)
	ms, err := db.Latest(context.Background(), memory.Filter{Namespace: aliceID}, 100)
	require.NoError(t, err)
	require.Len(t, ms, 4)
	for _, m := range ms {
		assert.Equal(t, memory.Curated, m.Type)
		assert.Equal(t, memory.ViaImport, memory.SourceVia(m))
		if m.Text == "Alice's sister Ana lives in Lisbon." {
			assert.Equal(t, time.Date(2025, 2, 1, 10, 0, 0, 0, time.UTC), m.Time.UTC())
		}
	}
}

// Each way the import can fail says so, in words a person can act on,
// never with the token; vera is not touched.
func TestOpenWebUIImportFailures(t *testing.T) {
	up := ollamatest.New(t)
	p := veratest.Start(t, "VERA_OLLAMA_URL="+up.URL)
	env := map[string]string{"VERA_CONFIG_DIR": t.TempDir()}
	owui := aliceOpenWebUI(t)
	owui.Forbid(aliceID)
	off := aliceOpenWebUI(t)
	off.TurnOff()
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	answering := func(ctype, body string) string {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", ctype)
			w.Write([]byte(body))
		}))
		t.Cleanup(s.Close)
		return s.URL
	}

	tests := []struct {
		name, url, token string
		want             []string
	}{
		{"unreachable", dead.URL, owuiToken, []string{"Open WebUI at " + dead.URL + " does not answer", "connection refused"}},
		{"a bad token (401)", owui.URL, "sk-not-a-key-0123456789", []string{"Open WebUI at " + owui.URL + " refused the token (401", "create an API key under Settings → Account"}},
		{"no permission (403)", owui.URL, owuiToken, []string{"this user may not use memories on Open WebUI at " + owui.URL + " (403", "Features → Memories"}},
		{"memories off (404)", off.URL, owuiToken, []string{"memories are turned off on Open WebUI at " + off.URL + " (404", "Admin Panel → Settings → General → Memories"}},
		{"an HTML page", answering("text/html", "<!doctype html><title>Sign in</title>"), owuiToken, []string{"with a web page, not the JSON of its memories API"}},
		{"malformed JSON", answering("application/json", `[{"id":"m1",`), owuiToken, []string{"the answer is not valid JSON"}},
		{"an object", answering("application/json", `{"items":[],"total":0}`), owuiToken, []string{`the answer is a JSON object (with "items", "total"), not the list of memories`}},
		{"a memory without content", answering("application/json", `[{"id":"m1","user_id":"u","updated_at":1735725600,"created_at":1735725600}]`), owuiToken, []string{`memory "m1": "content" is missing`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := owuiImport(t, env, "--from-open-webui", tt.url, "--token", tt.token, "--url", "http://"+p.Addr)
			require.Error(t, err)
			for _, w := range tt.want {
				assert.Contains(t, err.Error(), w)
			}
			assert.NotContains(t, err.Error(), tt.token)
			var ue app.UsageError
			assert.False(t, errors.As(err, &ue), "not a usage error: exit status 1")
		})
	}
	var list struct{ Memories []importedMemory }
	require.Equal(t, http.StatusOK, veratest.AdminCall(t, p, "", "GET", "/memories?namespace="+aliceID, "", &list))
	assert.Empty(t, list.Memories, "nothing reached vera")

	// A user without memories: nothing to import, said so.
	empty := openwebuitest.New(t)
	empty.AddUser(owuiToken, "carol-id", "user")
	rep, stderr, err := owuiImport(t, env, "--from-open-webui", empty.URL, "--token", owuiToken, "--url", "http://"+p.Addr)
	require.NoError(t, err)
	assert.Equal(t, 0, rep.Read)
	assert.Contains(t, stderr, "holds no memories of that user: nothing to import")

	// Command lines it does not understand: exit status 2, and Open WebUI
	// is not asked.
	for _, args := range [][]string{
		{"--from-open-webui", empty.URL},
		{"--from-open-webui", empty.URL, "--token", "  "},
		{"--from-open-webui", "owui.example:3000", "--token", owuiToken},
		{"--from-open-webui=", "--token", owuiToken},
		{"--from-open-webui", empty.URL, "--token", owuiToken, "--namespace", " "},
		{"--from-open-webui", empty.URL, "--token", owuiToken, "extra"},
	} {
		_, _, err := owuiImport(t, env, args...)
		var ue app.UsageError
		assert.True(t, errors.As(err, &ue), "%v: %v", args, err)
	}
	assert.Equal(t, 1, empty.Gets(), "a command line refused asks nothing")
}

// What vera refuses (here a memory longer than memory.max_turn_tokens)
// is listed by its Open WebUI id; the others are imported, and the
// command fails as an import of a file with bad lines does.
func TestOpenWebUIImportRefusedByVera(t *testing.T) {
	up := ollamatest.New(t)
	conf := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(conf, "config.toml"), []byte("[memory]\nmax_turn_tokens = 64\n"), 0o600))
	env := map[string]string{"VERA_CONFIG_DIR": conf, "VERA_DATA_DIR": t.TempDir(), "VERA_OLLAMA_URL": up.URL, "VERA_LISTEN": ollamatest.DeadAddr(t)}
	owui := aliceOpenWebUI(t)
	owui.Add(openwebuitest.Memory{ID: "m-long", UserID: aliceID, Content: strings.Repeat("Alice remembers a very long story. ", 40), CreatedAt: 1735725600, UpdatedAt: 1735725600})

	rep, _, err := owuiImport(t, env, "--from-open-webui", owui.URL, "--token", owuiToken)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "1 memories were not imported (the others were)")
	assert.Equal(t, 4, rep.Imported)
	assert.Equal(t, 1, rep.ErrorCount)
	require.Len(t, rep.Errors, 1)
	assert.Equal(t, "m-long", rep.Errors[0].ID)
	assert.Contains(t, rep.Errors[0].Error, "text:")
}
