package process

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/memory/qdrant/qdranttest"
	"github.com/vera-proxy/vera/ollama/ollamatest"
	"github.com/vera-proxy/vera/tests/veratest"
)

// cliMemory is a MEMORY as `vera memories ... --json` prints it.
type cliMemory struct {
	ID, Namespace, Type, Text string
}

// memoriesRoundTrip drives every `vera memories` command on the store env
// selects: add, list, search, show, edit, export, delete, import, forget a
// namespace; tables by default, JSON with --json; namespaces apart.
func memoriesRoundTrip(t *testing.T, env []string, via ...string) {
	t.Helper()
	vera := func(args ...string) string {
		t.Helper()
		code, out, stderr := veratest.RunCommand(t, env, append(append([]string{"memories"}, args...), via...)...)
		require.Equal(t, 0, code, "vera memories %v: %s%s", args, out, stderr)
		return out
	}
	var sister, rule, bob cliMemory
	require.NoError(t, json.Unmarshal([]byte(vera("add", "--namespace", "alice", "--json", "Alice's sister Ana lives in Lisbon.")), &sister))
	assert.Equal(t, "curated", sister.Type)
	require.NoError(t, json.Unmarshal([]byte(vera("add", "Answer in French.", "--type", "rule", "--namespace", "alice", "--json")), &rule))
	assert.Equal(t, "rule", rule.Type)
	require.NoError(t, json.Unmarshal([]byte(vera("add", "--namespace", "bob", "--json", "Bob's sister lives in Oslo.")), &bob))

	spaces := vera("namespaces")
	assert.Regexp(t, `NAMESPACE\s+NAME\s+EMAIL\s+RAW\s+CURATED\s+RULES\s+PROFILE\s+FORGOTTEN`, spaces)
	assert.Regexp(t, `(?m)^alice\s+0\s+1\s+1\s+0\s+0\s`, spaces, "alice: a curated memory and a rule")
	var listed struct {
		Namespaces []struct {
			Namespace string
			Counts    map[string]int
		}
	}
	require.NoError(t, json.Unmarshal([]byte(vera("namespaces", "--json")), &listed))
	require.Len(t, listed.Namespaces, 2)
	for _, n := range listed.Namespaces {
		assert.Contains(t, []string{"alice", "bob"}, n.Namespace)
		if n.Namespace == "bob" {
			assert.Equal(t, 1, n.Counts["curated"])
		}
	}

	table := vera("list", "--namespace", "alice")
	assert.Regexp(t, `ID\s+TYPE\s+TIME \(UTC\)\s+TEXT`, table)
	assert.Contains(t, table, sister.ID)
	assert.Contains(t, table, "Answer in French.")
	assert.NotContains(t, table, "Oslo", "bob's memory is not alice's")
	assert.Less(t, strings.Index(table, rule.ID), strings.Index(table, sister.ID), "newest first")
	oldest := vera("list", "--namespace", "alice", "--oldest")
	assert.Less(t, strings.Index(oldest, sister.ID), strings.Index(oldest, rule.ID), "--oldest: the other way")
	rules := vera("list", "--namespace", "alice", "--type", "rule")
	assert.NotContains(t, rules, "Lisbon")

	var found struct{ Memories []cliMemory }
	require.NoError(t, json.Unmarshal([]byte(vera("search", "where does my sister live", "--namespace", "alice", "--json")), &found))
	require.Len(t, found.Memories, 1)
	assert.Equal(t, sister.ID, found.Memories[0].ID)
	assert.Contains(t, vera("show", sister.ID), "namespace:  alice")

	assert.Contains(t, vera("edit", sister.ID, "Alice's sister Ana lives in Porto."), "Porto")
	export := filepath.Join(t.TempDir(), "export.jsonl")
	vera("export", "--output", export)
	b, err := os.ReadFile(export)
	require.NoError(t, err)
	assert.Contains(t, string(b), "Porto")
	assert.Contains(t, string(b), "Oslo", "without --namespace, every namespace")

	// Scoped by --namespace: bob cannot reach alice's memory.
	code, _, stderr := veratest.RunCommand(t, env, append([]string{"memories", "delete", sister.ID, "--namespace", "bob"}, via...)...)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "no memory")
	code, _, _ = veratest.RunCommand(t, env, append([]string{"memories", "delete", "--confirm"}, via...)...)
	assert.Equal(t, 2, code, "forgetting a namespace needs it named")
	assert.Contains(t, vera("delete", sister.ID, "--namespace", "alice"), "deleted "+sister.ID)
	code, _, stderr = veratest.RunCommand(t, env, append([]string{"memories", "show", sister.ID}, via...)...)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "no memory")

	assert.Contains(t, vera("delete", "--namespace", "alice", "--confirm"), `forgot namespace "alice"`)
	assert.Contains(t, vera("list", "--namespace", "alice"), `no memories in namespace "alice"`)
	assert.Contains(t, vera("import", export), "imported 3 memories")
	again := filepath.Join(t.TempDir(), "again.jsonl")
	vera("export", "--output", again)
	b2, err := os.ReadFile(again)
	require.NoError(t, err)
	assert.Equal(t, string(b), string(b2), "export → import reproduces the store")

	// Erase everything of one person: named and confirmed, with a receipt.
	code, _, _ = veratest.RunCommand(t, env, append([]string{"memories", "erase", "--namespace", "alice"}, via...)...)
	assert.Equal(t, 2, code, "erasing needs --yes")
	var receipt struct {
		Namespace string
		Erased    map[string]int
	}
	require.NoError(t, json.Unmarshal([]byte(vera("erase", "--namespace", "alice", "--yes", "--json")), &receipt))
	assert.Equal(t, "alice", receipt.Namespace)
	assert.Equal(t, 1, receipt.Erased["curated"])
	assert.Equal(t, 1, receipt.Erased["rule"])
	assert.Contains(t, vera("list", "--namespace", "alice"), `no memories in namespace "alice"`)
	assert.Contains(t, vera("list", "--namespace", "bob"), "Oslo", "bob's stay")

	bad := filepath.Join(t.TempDir(), "bad.jsonl")
	require.NoError(t, os.WriteFile(bad, []byte(`{"namespace":"carol","type":"curated","text":"Carol likes tea."}`+"\n{oops\n"), 0o644))
	code, out, stderr := veratest.RunCommand(t, env, append([]string{"memories", "import", bad}, via...)...)
	assert.Equal(t, 1, code, "a bad line fails the command")
	assert.Contains(t, out, "imported 1 memories")
	assert.Contains(t, out, "line 2:")
	assert.Contains(t, stderr, "1 lines were not imported")
}

// `vera memories` with no vera running works on the store directly, on
// both backends.
func TestMemoriesCommandOnTheStore(t *testing.T) {
	up := ollamatest.New(t)
	t.Run("embedded", func(t *testing.T) {
		memoriesRoundTrip(t, []string{"VERA_OLLAMA_URL=" + up.URL, "VERA_DATA_DIR=" + t.TempDir(), "VERA_LISTEN=" + ollamatest.DeadAddr(t)})
	})
	t.Run("qdrant", func(t *testing.T) {
		url := qdranttest.URL(t, os.Getenv("VERA_TEST_QDRANT_URL"))
		memoriesRoundTrip(t, []string{"VERA_OLLAMA_URL=" + up.URL, "VERA_DATA_DIR=" + t.TempDir(), "VERA_LISTEN=" + ollamatest.DeadAddr(t),
			"VERA_QDRANT_URL=" + url, fmt.Sprintf("VERA_QDRANT_COLLECTION=cli_%d", time.Now().UnixNano())})
	})
}

// `vera memories` against a running vera: its admin token is needed, a
// memory added is injected into the next chat, a deleted one never again;
// a vera that runs elsewhere on the same data dir is named, not corrupted.
func TestMemoriesCommandThroughRunningVera(t *testing.T) {
	up := ollamatest.New(t)
	data := t.TempDir()
	p := veratest.Launch(t, "VERA_OLLAMA_URL="+up.URL, "VERA_DATA_DIR="+data, "VERA_ADMIN_TOKEN=t0ken")
	env := []string{"VERA_OLLAMA_URL=" + up.URL, "VERA_DATA_DIR=" + data, "VERA_ADMIN_TOKEN=t0ken"}
	via := []string{"--url", "http://" + p.Addr}

	code, _, stderr := veratest.RunCommand(t, env[:2], "memories", "list", "--url", "http://"+p.Addr)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "VERA_ADMIN_TOKEN")

	memoriesRoundTrip(t, env, via...)

	_, out, _ := veratest.RunCommand(t, env, "memories", "add", "--namespace", "dave", "--json", "Dave's dog is called Biscuit.", "--url", "http://"+p.Addr)
	var dog cliMemory
	require.NoError(t, json.Unmarshal([]byte(out), &dog))
	veratest.Chat(t, p, "dave", false, veratest.User("What is my dog called?"))
	assert.Contains(t, veratest.SystemOf(up.LastChat(t)), "Biscuit")
	// Where it came from, what it shaped, who changed it.
	require.Eventually(t, func() bool {
		_, out, _ = veratest.RunCommand(t, env, "memories", "show", dog.ID, "--url", "http://"+p.Addr)
		return strings.Contains(out, "used:       in 1 answer,")
	}, 10*time.Second, 200*time.Millisecond, out)
	assert.Regexp(t, `from: +admin \(vera/`, out)
	assert.Regexp(t, `(?m)^\S+ \S+ +created +admin$`, out)
	code, _, _ = veratest.RunCommand(t, env, "memories", "delete", dog.ID, "--url", "http://"+p.Addr)
	require.Equal(t, 0, code)
	veratest.Chat(t, p, "dave", false, veratest.User("What is my dog called, again?"))
	assert.NotContains(t, veratest.SystemOf(up.LastChat(t)), "Biscuit")
	// Marked private by hand, listed as such, unmarked.
	code, out, _ = veratest.RunCommand(t, env, "memories", "add", "--namespace", "dave", "--json", "Dave's cat is Whiskers.", "--url", "http://"+p.Addr)
	require.Equal(t, 0, code)
	var cat cliMemory
	require.NoError(t, json.Unmarshal([]byte(out), &cat))
	code, _, _ = veratest.RunCommand(t, env, "memories", "edit", cat.ID, "--private=true", "--url", "http://"+p.Addr)
	require.Equal(t, 0, code)
	_, out, _ = veratest.RunCommand(t, env, "memories", "show", cat.ID, "--url", "http://"+p.Addr)
	assert.Contains(t, out, "private:    yes (user)")
	_, out, _ = veratest.RunCommand(t, env, "memories", "list", "--namespace", "dave", "--private=true", "--url", "http://"+p.Addr)
	assert.Contains(t, out, "Whiskers")
	code, _, stderr = veratest.RunCommand(t, env, "memories", "edit", cat.ID, "--private=maybe", "--url", "http://"+p.Addr)
	assert.Equal(t, 2, code, stderr)
	code, _, _ = veratest.RunCommand(t, env, "memories", "edit", cat.ID, "--private=false", "--url", "http://"+p.Addr)
	require.Equal(t, 0, code)
	_, out, _ = veratest.RunCommand(t, env, "memories", "list", "--namespace", "dave", "--private=true", "--url", "http://"+p.Addr)
	assert.NotContains(t, out, "Whiskers")
	_, out, _ = veratest.RunCommand(t, env, "memories", "history", dog.ID, "--url", "http://"+p.Addr)
	assert.Regexp(t, `(?s)created +admin.*erased +admin`, out, "an erased memory keeps its history")
	assert.NotContains(t, out, "Biscuit", "which holds no text")

	// The default address is not where this vera listens, and its store
	// is taken: the command says so rather than opening it twice.
	code, _, stderr = veratest.RunCommand(t, append(env, "VERA_LISTEN="+ollamatest.DeadAddr(t)), "memories", "list")
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "--url")
	code, _, stderr = veratest.RunCommand(t, env, "memories", "list", "--url", "http://"+ollamatest.DeadAddr(t))
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "no vera at")
}

// `vera memories import` of a file with more bad lines than vera lists:
// the listed ones, then how many more, and the exit message counts all.
func TestMemoriesImportReportsAtMost100BadLines(t *testing.T) {
	up := ollamatest.New(t)
	env := []string{"VERA_OLLAMA_URL=" + up.URL, "VERA_DATA_DIR=" + t.TempDir(), "VERA_LISTEN=" + ollamatest.DeadAddr(t)}
	file := filepath.Join(t.TempDir(), "bad.jsonl")
	body := `{"namespace":"carol","type":"curated","text":"Carol likes tea."}` + "\n" + strings.Repeat("{oops\n", 150)
	require.NoError(t, os.WriteFile(file, []byte(body), 0o644))

	code, out, stderr := veratest.RunCommand(t, env, "memories", "import", file)
	assert.Equal(t, 1, code, "a bad line fails the command")
	assert.Contains(t, out, "imported 1 memories")
	assert.Contains(t, out, "line 2: ")
	assert.Contains(t, out, "line 101: ")
	assert.NotContains(t, out, "line 102: ", "vera lists the first 100")
	assert.Contains(t, out, "... and 50 more bad lines")
	assert.Contains(t, stderr, "150 lines were not imported")

	code, out, _ = veratest.RunCommand(t, env, "memories", "import", file, "--json")
	assert.Equal(t, 1, code)
	var rep struct {
		Imported   int
		Errors     []struct{ Line int }
		ErrorCount int `json:"error_count"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &rep), out)
	assert.Equal(t, 1, rep.Imported, "importing again replaces")
	assert.Len(t, rep.Errors, 100)
	assert.Equal(t, 150, rep.ErrorCount)
}
