package tests

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ollama/ollama/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/ollama/ollamatest"
	"github.com/vera-proxy/vera/tests/veratest"
)

// historyEntry is an ENTRY of the history routes.
type historyEntry struct {
	At        time.Time `json:"at"`
	Action    string    `json:"action"`
	Actor     string    `json:"actor"`
	ID        string    `json:"id"`
	Namespace string    `json:"namespace"`
}

// historyOf is memory id's history, as "action by actor", oldest first.
func historyOf(t *testing.T, p *veratest.InProcess, id string) []string {
	t.Helper()
	var h struct{ History []historyEntry }
	require.Equal(t, 200, veratest.AdminCall(t, p, "", "GET", "/memories/"+id+"/history", "", &h))
	out := []string{}
	for _, e := range h.History {
		assert.Equal(t, id, e.ID)
		assert.Empty(t, e.Namespace, "a memory's own history does not repeat its namespace")
		assert.WithinDuration(t, time.Now(), e.At, time.Minute)
		out = append(out, e.Action+" by "+e.Actor)
	}
	return out
}

// memoryOfType is the id of ns's memory of type typ holding word.
func memoryOfType(t *testing.T, p *veratest.InProcess, ns, typ, word string) string {
	t.Helper()
	var list struct{ Memories []veratest.AdminMemory }
	require.Equal(t, 200, veratest.AdminCall(t, p, "", "GET", "/memories?namespace="+ns+"&type="+typ+"&limit=100", "", &list))
	for _, m := range list.Memories {
		if strings.Contains(m.Text, word) {
			return m.ID
		}
	}
	t.Fatalf("no %s memory of %s holds %q", typ, ns, word)
	return ""
}

// Every way a memory changes writes exactly one entry, with who made it:
// a chat, a "remember that" and a "forget that", the admin API, an agent
// over MCP, an import (once: the same line again changes nothing). No
// entry holds the memory's text; the audit pages through them newest
// first; erasing the namespace erases its history.
func TestEveryChangeWritesOneHistoryEntry(t *testing.T) {
	_, _, p := eraseVera(t)
	sendOllama(t, p, "alice", "c1", []msg{{"user", "My bike is called Bikezz."}}, "")
	veratest.Settled(t, p)
	first := memoryOfType(t, p, "alice", "raw", "Bikezz")
	sendOllama(t, p, "alice", "c1", []msg{{"user", "My bike is called Bikezz."}}, "") // a regenerate
	sendOllama(t, p, "alice", "c2", []msg{{"user", "Remember that my locker is Lockzz 12"}}, "")
	veratest.Settled(t, p)
	raw := memoryOfType(t, p, "alice", "raw", "Bikezz")
	require.NotEqual(t, first, raw, "the regenerate replaced the turn")
	cmd := memoryOfType(t, p, "alice", "curated", "Lockzz")
	sendOllama(t, p, "alice", "c3", []msg{{"user", "Forget that my locker is Lockzz 12"}}, "")

	var adm veratest.AdminMemory
	require.Equal(t, 201, veratest.AdminCall(t, p, "", "POST", "/memories", `{"namespace":"alice","text":"Alice's boat is Boatzz."}`, &adm))
	require.Equal(t, 200, veratest.AdminCall(t, p, "", "PATCH", "/memories/"+adm.ID, `{"text":"Alice's boat is Boatzz II."}`, nil))
	require.Equal(t, 200, veratest.AdminCall(t, p, "", "PATCH", "/memories/"+adm.ID, `{"type":"forgotten"}`, nil))
	require.Equal(t, 200, veratest.AdminCall(t, p, "", "POST", "/memories/"+adm.ID+"/restore", "", nil))
	require.Equal(t, 204, veratest.AdminCall(t, p, "", "DELETE", "/memories/"+adm.ID, "", nil))

	s := veratest.MCPSession(t, p, http.Header{"X-Openwebui-User-Id": {"alice"}})
	var added struct{ ID string }
	require.False(t, veratest.Call(t, s, "add_memory", map[string]any{"content": "Alice's kite is Kitezz."}, &added).IsError)
	require.False(t, veratest.Call(t, s, "update_memory", map[string]any{"id": added.ID, "content": "Alice's kite is Kitezz II."}, nil).IsError)
	require.False(t, veratest.Call(t, s, "forget_memory", map[string]any{"id": added.ID}, nil).IsError)

	line := `{"id":"imp-1","namespace":"alice","type":"curated","text":"Alice's car is Carzz."}` + "\n"
	for _, body := range []string{line, line, strings.Replace(line, "Carzz", "Carzz II", 1)} {
		require.Equal(t, 200, veratest.AdminCall(t, p, "", "POST", "/memories/import", body, nil))
	}
	require.Equal(t, 201, veratest.AdminCall(t, p, "", "POST", "/memories", `{"namespace":"bob","text":"Bob's bike is Bobzz."}`, nil))

	want := map[string][]string{
		first:    {"created by chat", "superseded by chat"},
		raw:      {"created by chat"},
		cmd:      {"created by command", "forgotten by command"},
		adm.ID:   {"created by admin", "edited by admin", "forgotten by admin", "restored by admin", "erased by admin"},
		added.ID: {"created by mcp", "edited by mcp", "forgotten by mcp"},
		"imp-1":  {"created by import", "edited by import"},
	}
	for id, w := range want {
		assert.Equal(t, w, historyOf(t, p, id), id)
	}

	// The audit: every entry of alice's, newest first, a page at a time,
	// and never a word of what the memories say.
	var all []historyEntry
	cursor := ""
	for page := 0; ; page++ {
		require.Less(t, page, 50)
		var r struct {
			History    []historyEntry `json:"history"`
			NextCursor string         `json:"next_cursor"`
		}
		require.Equal(t, 200, veratest.AdminCall(t, p, "", "GET", "/audit?namespace=alice&limit=3&cursor="+url.QueryEscape(cursor), "", &r))
		all = append(all, r.History...)
		b, _ := json.Marshal(r)
		for _, word := range []string{"Bikezz", "Lockzz", "Boatzz", "Kitezz", "Carzz", "Bobzz"} {
			assert.NotContains(t, string(b), word, "an entry holds no text")
		}
		if r.NextCursor == "" {
			break
		}
		cursor = r.NextCursor
	}
	seen := map[string]int{}
	for i, e := range all {
		assert.Equal(t, "alice", e.Namespace)
		if i > 0 {
			assert.False(t, e.At.After(all[i-1].At), "newest first")
		}
		seen[e.ID]++
	}
	for id, w := range want {
		assert.Equal(t, len(w), seen[id], id)
	}
	assert.Equal(t, 400, veratest.AdminCall(t, p, "", "GET", "/audit?cursor=nope", "", nil))
	assert.Equal(t, 400, veratest.AdminCall(t, p, "", "GET", "/audit?since=yesterday", "", nil))

	require.Equal(t, 200, veratest.AdminCall(t, p, "", "DELETE", "/namespaces/alice", "", nil))
	var r struct{ History []historyEntry }
	require.Equal(t, 200, veratest.AdminCall(t, p, "", "GET", "/audit?namespace=alice", "", &r))
	assert.Empty(t, r.History, "an erased person leaves no history")
	assert.Equal(t, 404, veratest.AdminCall(t, p, "", "GET", "/memories/"+adm.ID+"/history", "", nil))
	require.Equal(t, 200, veratest.AdminCall(t, p, "", "GET", "/audit", "", &r))
	require.Len(t, r.History, 1)
	assert.Equal(t, "bob", r.History[0].Namespace)
}

// A profile that states a fact is withheld from chats the moment that fact
// is erased, and comes back rewritten by the curator run that starts at
// once, told what was removed. What the curator did is in the history.
func TestDerivedTextFollowsItsSource(t *testing.T) {
	up := ollamatest.New(t)
	var mu sync.Mutex
	var rewrites []string
	up.Curate = func(req api.ChatRequest) string {
		user := req.Messages[1].Content
		if strings.Contains(string(req.Format), "rewritten") {
			mu.Lock()
			rewrites = append(rewrites, user)
			mu.Unlock()
			var in struct {
				Memories []struct{ ID, Text string } `json:"memories"`
			}
			require.NoError(t, json.Unmarshal([]byte(user), &in))
			var out []map[string]string
			for _, m := range in.Memories { // the fake drops the fact
				out = append(out, map[string]string{"id": m.ID, "text": strings.ReplaceAll(m.Text, "has diabetes Diabzz and ", "")})
			}
			b, _ := json.Marshal(map[string]any{"rewritten": out})
			return string(b)
		}
		var in struct {
			Raw []struct{ ID, Text string } `json:"raw_turns"`
		}
		_ = json.Unmarshal([]byte(user), &in)
		var curated []any
		for _, r := range in.Raw {
			for _, word := range []string{"Diabzz", "Hikezz"} {
				if strings.Contains(r.Text, word) {
					curated = append(curated, map[string]any{"content": "User: Remember " + word + ".\nAssistant: Noted.", "source_ids": []string{r.ID}})
				}
			}
		}
		b, _ := json.Marshal(map[string]any{"new_curated_turns": curated, "permanent_rules": []any{}, "deletions": []string{},
			"summary": "s", "profile": "Alice has diabetes Diabzz and likes hiking Hikezz."})
		return string(b)
	}
	p := veratest.Start(t, "VERA_OLLAMA_URL="+up.URL)
	ollamatest.ChatWith(t, p.Addr, veratest.HeadersFor("alice", "health"), api.Message{Role: "user", Content: "I have diabetes, Diabzz."})
	ollamatest.ChatWith(t, p.Addr, veratest.HeadersFor("alice", "trips"), api.Message{Role: "user", Content: "I like hiking, Hikezz."})
	veratest.Settled(t, p)
	var raws struct{ Memories []veratest.AdminMemory }
	require.Equal(t, 200, veratest.AdminCall(t, p, "", "GET", "/memories?namespace=alice&type=raw", "", &raws))
	require.Len(t, raws.Memories, 2)
	require.Equal(t, 200, veratest.AdminCall(t, p, "", "POST", "/curator/run", "", nil))
	for _, r := range raws.Memories {
		assert.Equal(t, []string{"created by chat", "curated by curator"}, historyOf(t, p, r.ID))
	}
	fact := memoryOfType(t, p, "alice", "curated", "Diabzz")
	profile := memoryOfType(t, p, "alice", "profile", "Diabzz")
	assert.Equal(t, []string{"created by curator"}, historyOf(t, p, fact))
	assert.Equal(t, []string{"created by curator"}, historyOf(t, p, profile))

	system := func() string {
		ollamatest.ChatWith(t, p.Addr, veratest.HeadersFor("alice", ""), api.Message{Role: "user", Content: "What do you know about me?"})
		return up.LastChat(t).Messages[0].Content
	}
	require.Contains(t, system(), "Diabzz", "the profile says it")

	require.Equal(t, 204, veratest.AdminCall(t, p, "", "DELETE", "/memories/"+fact, "", nil))
	assert.NotContains(t, system(), "Diabzz", "withheld the moment the fact is erased")

	var rewritten string
	require.Eventually(t, func() bool {
		var list struct{ Memories []veratest.AdminMemory }
		require.Equal(t, 200, veratest.AdminCall(t, p, "", "GET", "/memories?namespace=alice&type=profile", "", &list))
		for _, m := range list.Memories {
			if m.ID != profile {
				rewritten = m.Text
				return true
			}
		}
		return false
	}, 10*time.Second, 50*time.Millisecond, "the curator rewrites it at once")
	assert.Equal(t, "Alice likes hiking Hikezz.", rewritten)
	s := system()
	assert.Contains(t, s, "Alice likes hiking Hikezz.", "the rewritten profile is back")
	assert.NotContains(t, s, "Diabzz")
	mu.Lock()
	require.Len(t, rewrites, 1)
	assert.Contains(t, rewrites[0], "Diabzz", "told what was removed (from memory, never from disk)")
	mu.Unlock()
	assert.Equal(t, []string{"created by curator", "superseded by curator"}, historyOf(t, p, profile))
	assert.Equal(t, []string{"created by curator", "erased by admin"}, historyOf(t, p, fact))
}

// A PATCH of metadata merges (a null removes a key) and never changes
// where the memory came from, nor what a restore needs; its answer says
// how often the memory was used.
func TestPatchMetadataKeepsProvenance(t *testing.T) {
	_, _, p := eraseVera(t)
	var m struct {
		ID        string
		Metadata  map[string]any
		UsedCount int `json:"used_count"`
	}
	require.Equal(t, 201, veratest.AdminCall(t, p, "", "POST", "/memories", `{"namespace":"alice","text":"Alice's cat is Tomzz.","metadata":{"tag":"pets"}}`, &m))
	sendOllama(t, p, "alice", "", []msg{{"user", "What is my cat called, Tomzz?"}}, "")
	require.Eventually(t, func() bool {
		m.Metadata = nil // decoded afresh
		require.Equal(t, 200, veratest.AdminCall(t, p, "", "PATCH", "/memories/"+m.ID, `{"metadata":{"mood":"calm","tag":null}}`, &m))
		return m.UsedCount == 1
	}, 5*time.Second, 50*time.Millisecond, "the answer of a PATCH says how often it was used")
	assert.Equal(t, "calm", m.Metadata["mood"])
	assert.NotContains(t, m.Metadata, "tag", "a null removes a key")
	assert.Equal(t, "admin", m.Metadata["source"].(map[string]any)["via"], "kept")
	for _, body := range []string{`{"metadata":{"source":{"via":"chat"}}}`, `{"metadata":{"forgotten_from":"rule"}}`} {
		assert.Equal(t, 400, veratest.AdminCall(t, p, "", "PATCH", "/memories/"+m.ID, body, nil), body)
	}
}
