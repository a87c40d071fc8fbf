package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/ollama/ollama/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/memory"
	"github.com/vera-proxy/vera/ollama/ollamatest"
	"github.com/vera-proxy/vera/tests/veratest"
)

// uiCurate answers the curator: one curated memory per raw turn and a rule.
func uiCurate(req api.ChatRequest) string {
	var in struct {
		Raw []struct{ ID, Text string } `json:"raw_turns"`
	}
	if len(req.Messages) > 1 {
		_ = json.Unmarshal([]byte(req.Messages[1].Content), &in)
	}
	curated := []map[string]any{}
	for _, r := range in.Raw {
		curated = append(curated, map[string]any{"content": "User: Where does my sister live?\nAssistant: Ana lives in Porto.", "source_ids": []string{r.ID}})
	}
	b, _ := json.Marshal(map[string]any{
		"new_curated_turns": curated,
		"permanent_rules":   []map[string]string{{"rule": "Keep answers short.", "target_file": "systemprompt.md"}},
		"deletions":         []string{},
		"summary":           fmt.Sprintf("%d turns curated", len(in.Raw)),
	})
	return string(b)
}

// The admin page in a real browser: it asks for the token, lists,
// searches, edits, deletes and adds memories, and what it did is what the
// next chat gets; a dry run shows its preview; health shows; the markup
// of a memory stays text; no CSP violation; no horizontal scroll on a
// phone.
func TestUIInBrowser(t *testing.T) {
	bin := chromiumPath()
	if bin == "" {
		t.Skip("no Chromium (/usr/bin/chromium, or chromium, chromium-browser or google-chrome on PATH): .ci/run installs Debian's chromium package")
	}
	up := ollamatest.New(t)
	up.Curate = uiCurate
	const token = "ui-s3cret"
	p := veratest.Start(t, "VERA_OLLAMA_URL="+up.URL, "VERA_ADMIN_TOKEN="+token)
	auth := "Bearer " + token
	var sister, cat veratest.AdminMemory
	require.Equal(t, http.StatusCreated, veratest.AdminCall(t, p, auth, "POST", "/memories", `{"namespace":"alice","text":"Alice's sister Ana lives in Lisbon."}`, &sister))
	require.Equal(t, http.StatusCreated, veratest.AdminCall(t, p, auth, "POST", "/memories", `{"namespace":"alice","text":"Alice's cat <b>Miso</b> sleeps on the sofa."}`, &cat))

	b := newBrowser(t, bin)
	b.do("load the page", chromedp.EmulateViewport(1280, 900), chromedp.Navigate("http://"+p.Addr+"/ui/"))

	// The API answers 401: the page asks for the token, once, in its form.
	b.do("the token form", chromedp.WaitVisible(chromedp.ID("token-input")))
	b.do("give the token", chromedp.SendKeys(chromedp.ID("token-input"), token+"\r"))
	b.do("the token form closes", chromedp.WaitNotVisible(chromedp.ID("token-section")))
	b.until("the first list loads", `+document.getElementById('memory-list').dataset.loads >= 1`)
	assert.Equal(t, token, evalJS[string](b, `sessionStorage.getItem('vera.adminToken')`))

	// Browse: both memories, the markup in one shown as text.
	b.show("alice", "")
	assert.Equal(t, sister.Text, b.memText(sister.ID))
	assert.Equal(t, cat.Text, b.memText(cat.ID), "the markup is shown as text")
	assert.Zero(t, evalJS[int](b, `document.querySelectorAll('#memory-list b').length`), "no element made from a memory's text")

	// Search.
	b.show("alice", "sister")
	assert.Equal(t, sister.Text, b.memText(sister.ID))
	assert.Empty(t, b.memText(cat.ID), "the cat is not about a sister")

	// Edit through the page.
	const edited = "Alice's sister Ana lives in Porto now."
	b.do("edit", chromedp.Click(chromedp.CSS(memSel(sister.ID, `button[data-action=edit]`))))
	b.do("the edit form", chromedp.WaitVisible(chromedp.CSS(memSel(sister.ID, `textarea`))))
	b.do("type the new text",
		chromedp.SetValue(chromedp.CSS(memSel(sister.ID, `textarea`)), edited),
		chromedp.Click(chromedp.CSS(memSel(sister.ID, `button[data-action=save]`))))
	b.until("the edit shows", fmt.Sprintf(`%s?.querySelector('[data-role=text]')?.textContent === %q`, memJS(sister.ID), edited))

	// Delete through the page, confirmed on the page.
	b.show("alice", "")
	b.do("delete", chromedp.Click(chromedp.CSS(memSel(cat.ID, `button[data-action=delete]`))))
	b.until("it says the memory is erased, not hidden", fmt.Sprintf(`%s?.textContent.includes('Nothing of it is kept')`, memJS(cat.ID)))
	b.do("confirm", chromedp.Click(chromedp.CSS(memSel(cat.ID, `button[data-action=confirm-delete]`))))
	b.do("the memory goes", chromedp.WaitNotPresent(chromedp.CSS(memSel(cat.ID, ""))))

	// Add a rule through the page.
	const rule = "Answer in French."
	b.do("add a rule",
		chromedp.SetValue(chromedp.ID("add-type"), "rule"),
		chromedp.SetValue(chromedp.ID("add-text"), rule),
		chromedp.Click(chromedp.ID("add")))
	b.until("the rule shows", fmt.Sprintf(`[...document.querySelectorAll('#memory-list li[data-type=rule] [data-role=text]')].some((e) => e.textContent === %q)`, rule))

	// A fresh list from vera: the edit, the rule, and not the deleted one.
	b.show("alice", "")
	assert.Equal(t, edited, b.memText(sister.ID))
	assert.Empty(t, b.memText(cat.ID), "the deleted memory is gone")
	assert.Equal(t, 2, evalJS[int](b, `document.querySelectorAll('#memory-list li').length`))

	// The next chat gets what the page did.
	veratest.Chat(t, p, "alice", false, veratest.User("Where does my sister live?"))
	sys := veratest.SystemOf(up.LastChat(t))
	assert.Contains(t, sys, edited)
	assert.Contains(t, sys, rule)
	assert.NotContains(t, sys, "Lisbon")
	assert.NotContains(t, sys, "Miso")

	// A dry run from the page, once the chat's turn is in the store.
	var raw struct{ Memories []veratest.AdminMemory }
	require.Eventually(t, func() bool {
		return veratest.AdminCall(t, p, auth, "GET", "/memories?namespace=alice&type=raw", "", &raw) == http.StatusOK && len(raw.Memories) > 0
	}, 10*time.Second, 20*time.Millisecond)
	b.do("dry run",
		chromedp.SetValue(chromedp.ID("dry-ns"), "alice"),
		chromedp.Click(chromedp.ID("dry-run")))
	b.until("the preview shows", `document.getElementById('preview').dataset.state === 'ok'`)
	assert.Contains(t, evalJS[string](b, `document.querySelector('[data-role=preview-curated]').textContent`), "Ana lives in Porto.")
	assert.Contains(t, evalJS[string](b, `document.querySelector('[data-role=preview-rules]').textContent`), "Keep answers short.")
	// The distilled raw turn, with its id and its text.
	deleted := evalJS[string](b, `document.querySelector('[data-role=preview-deleted]').textContent`)
	assert.Contains(t, deleted, raw.Memories[0].ID)
	assert.Contains(t, deleted, "Where does my sister live?")
	var curated struct{ Memories []veratest.AdminMemory }
	require.Equal(t, http.StatusOK, veratest.AdminCall(t, p, auth, "GET", "/memories?namespace=alice&type=curated", "", &curated))
	assert.Len(t, curated.Memories, 1, "a dry run writes nothing")
	b.do("refresh the curator", chromedp.Click(chromedp.ID("curator-refresh")))

	// The rule, marked private from the page: the screenshot shows a lock.
	b.do("mark the rule private", chromedp.Click(chromedp.CSS(`#memory-list li[data-type=rule] button[data-action=mark-private]`)))
	b.until("the rule shows private", `!!document.querySelector('#memory-list li[data-type=rule][data-private=true] [data-role=lock]')`)

	// Health.
	b.until("health shows", `!!document.querySelector('#health-body [data-role=health-status]')`)
	assert.Equal(t, "ok", evalJS[string](b, `document.querySelector('#health-body [data-role=health-status]').textContent`))
	assert.Equal(t, "health: ok", evalJS[string](b, `document.getElementById('health-badge').textContent`))

	shot, err := func() ([]byte, error) {
		ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
		defer cancel()
		return chromedp.Run(ctx, chromedp.FullScreenshot(100))
	}()
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "screenshot.png")
	if os.Getenv("VERA_UI_SCREENSHOT") == "1" {
		path = filepath.Join("..", "admin", "ui", "screenshot.png")
	}
	require.NoError(t, os.WriteFile(path, shot, 0o644))

	// A phone: no horizontal scroll, with an edit form open too.
	noScroll := `document.documentElement.scrollWidth <= document.documentElement.clientWidth`
	b.do("phone width", chromedp.EmulateViewport(375, 812))
	assert.True(t, evalJS[bool](b, noScroll), "no horizontal scroll at 375 px: %d > %d",
		evalJS[int](b, `document.documentElement.scrollWidth`), evalJS[int](b, `document.documentElement.clientWidth`))
	b.do("edit on a phone", chromedp.Click(chromedp.CSS(memSel(sister.ID, `button[data-action=edit]`))))
	b.do("the edit form", chromedp.WaitVisible(chromedp.CSS(memSel(sister.ID, `textarea`))))
	assert.True(t, evalJS[bool](b, noScroll), "no horizontal scroll at 375 px with a form open")

	assert.Empty(t, evalJS[[]string](b, `window.__veraProblems`), "no CSP violation and no script error")
}

// The page opens on the people vera knows, by name and email, most
// recently seen first, and a pick shows that person's memories: an admin
// never needs to know Open WebUI's user ids.
func TestUIPeoplePicker(t *testing.T) {
	bin := chromiumPath()
	if bin == "" {
		t.Skip("no Chromium (/usr/bin/chromium, or chromium, chromium-browser or google-chrome on PATH): .ci/run installs Debian's chromium package")
	}
	up := ollamatest.New(t)
	p := veratest.Start(t, "VERA_OLLAMA_URL="+up.URL)
	alice, bob := "6f1c2a9e-0d4b-4c51-9a57-3e2f1b7c8d90", "0b9d7c1e-5a2f-4e8b-8c6d-2f4a1e9b3c70"
	for _, u := range []struct{ ns, name, email, text string }{
		{bob, "Bob Stone", "bob@example.com", "My bike is a red Peugeot."},
		{alice, "Alice Martin", "alice@example.com", "My sister Ana lives in Lisbon."},
	} {
		h := http.Header{"X-Openwebui-User-Id": {u.ns}, "X-Openwebui-User-Name": {u.name}, "X-Openwebui-User-Email": {u.email}}
		c := veratest.OllamaClientWith(t, p, h)
		require.NoError(t, c.Chat(context.Background(), &api.ChatRequest{Model: "llama3.2", Messages: []api.Message{veratest.User(u.text)}}, func(api.ChatResponse) error { return nil }))
	}
	veratest.Settled(t, p)

	b := newBrowser(t, bin)
	b.do("load the page", chromedp.EmulateViewport(1280, 900), chromedp.Navigate("http://"+p.Addr+"/ui/"))
	b.until("the people load", `+(document.getElementById('people-list').dataset.loads || 0) >= 1`)
	b.until("the first list loads", `+(document.getElementById('memory-list').dataset.loads || 0) >= 1`)
	people := evalJS[[]string](b, `[...document.querySelectorAll('#people-list [data-role=who]')].map((e) => e.textContent)`)
	assert.Equal(t, []string{"Alice Martin <alice@example.com>", "Bob Stone <bob@example.com>"}, people, "most recently seen first")
	assert.Equal(t, alice, evalJS[string](b, `document.getElementById('ns').value`), "it opens on the latest person")
	assert.Contains(t, evalJS[string](b, `document.getElementById('memory-list').textContent`), "Lisbon")

	b.do("pick Bob", chromedp.SetValue(chromedp.ID("ns-pick"), bob), chromedp.Evaluate[chromedp.Void](`document.getElementById("ns-pick").dispatchEvent(new Event("change"))`))
	b.until("Bob's memories show", `document.getElementById('memory-list').textContent.includes('Peugeot')`)
	assert.NotContains(t, evalJS[string](b, `document.getElementById('memory-list').textContent`), "Lisbon")
	assert.Equal(t, bob, evalJS[string](b, `document.getElementById('ns').value`))

	b.do("show Alice from her card", chromedp.Click(chromedp.CSS(fmt.Sprintf(`#people-list button[data-ns=%q]`, alice))))
	b.until("Alice's memories show", `document.getElementById('memory-list').textContent.includes('Lisbon')`)
	assert.NotContains(t, evalJS[string](b, `document.getElementById('memory-list').textContent`), "Peugeot")
	assert.Equal(t, alice, evalJS[string](b, `document.getElementById('ns-pick').value`))
}

// The page says where each memory came from, how often it shaped an
// answer and what happened to it; Forget is undone by Restore; Erase asks
// first and leaves nothing; "Erase everything of this person" refuses
// until the namespace is typed exactly, then erases, shows the receipt,
// and another person's memories stay.
func TestUIProvenanceHistoryAndErase(t *testing.T) {
	bin := chromiumPath()
	if bin == "" {
		t.Skip("no Chromium (/usr/bin/chromium, or chromium, chromium-browser or google-chrome on PATH): .ci/run installs Debian's chromium package")
	}
	// A memory written before vera kept where memories came from, or their
	// history: put in the store before vera starts on it.
	data := t.TempDir()
	db := veratest.OpenStore(t, data)
	old := memory.Memory{ID: memory.NewID(), Namespace: "alice", Type: memory.Curated, Text: "Alice's first flat was on Oldzz street.", Time: time.Now().Add(-48 * time.Hour).UTC()}
	require.NoError(t, db.Upsert(context.Background(), old))
	require.NoError(t, db.Close())
	up := ollamatest.NewDialects(t)
	numberedReplies(up)
	p := conversationVera(t, up, data, t.TempDir())

	// Told in a chat through the OpenAI client, recalled in the next.
	sendOpenAI(t, p, "alice", "trip-1", []msg{{"user", "My sister Ana lives in Lisbonzz."}}, "")
	veratest.Settled(t, p)
	told := memoryIDWith(t, p, "alice", "Lisbonzz")
	sendOllama(t, p, "alice", "trip-2", []msg{{"user", "Where does my sister Ana live?"}}, "")
	veratest.Settled(t, p)
	var m veratest.AdminMemory
	require.Eventually(t, func() bool {
		return veratest.AdminCall(t, p, "", "GET", "/memories/"+told, "", &m) == http.StatusOK && m.UsedCount > 0
	}, 10*time.Second, 50*time.Millisecond, "the second chat used the first one's turn")
	// What the curator distilled, as an export keeps it; one added by hand;
	// another person's.
	curated := `{"id":"imp-1","namespace":"alice","type":"curated","text":"Ana moved to Curatorzz last spring.",` +
		`"metadata":{"source":{"via":"curator","chats":["trip-1","trip-2"],"from":"2026-11-20T12:00:00Z","until":"2026-11-22T12:00:00Z"}}}` + "\n"
	require.Equal(t, http.StatusOK, veratest.AdminCall(t, p, "", "POST", "/memories/import", curated, nil))
	var kite, bob veratest.AdminMemory
	require.Equal(t, http.StatusCreated, veratest.AdminCall(t, p, "", "POST", "/memories", `{"namespace":"alice","text":"Alice's kite is <i>Kitezz</i>."}`, &kite))
	require.Equal(t, http.StatusCreated, veratest.AdminCall(t, p, "", "POST", "/memories", `{"namespace":"bob","text":"Bob's bike is Bobzz."}`, &bob))
	require.Equal(t, http.StatusOK, veratest.AdminCall(t, p, "", "GET", "/memories/"+told, "", &m))

	b := newBrowser(t, bin)
	b.do("load the page", chromedp.EmulateViewport(1280, 900), chromedp.Navigate("http://"+p.Addr+"/ui/"))
	b.until("the first list loads", `+(document.getElementById('memory-list').dataset.loads || 0) >= 1`)
	b.show("alice", "")
	fact := func(id, role string) string {
		return evalJS[string](b, fmt.Sprintf(`(%s?.querySelector('[data-role=%s]')?.textContent) ?? ''`, memJS(id), role))
	}

	// Where each came from, and its use.
	src := fact(told, "source")
	assert.True(t, strings.HasPrefix(src, "From a chat (openai-chat, chat trip-1, OpenAI/Go"), src)
	assert.True(t, strings.HasSuffix(src, ", llama3.2)"), src)
	when := `, last on \d{4}-\d\d-\d\d \d\d:\d\d$`
	if m.UsedCount == 1 {
		assert.Regexp(t, `^Used in 1 answer`+when, fact(told, "usage"))
	} else {
		assert.Regexp(t, fmt.Sprintf(`^Used in %d answers`, m.UsedCount)+when, fact(told, "usage"))
	}
	assert.Equal(t, "Distilled by the curator from 2 chats, 2026-11-20 to 2026-11-22", fact("imp-1", "source"))
	assert.Equal(t, "Added by hand (admin, Go-http-client/1.1)", fact(kite.ID, "source"))
	assert.Equal(t, "Never used yet", fact(kite.ID, "usage"))
	assert.Contains(t, fact(old.ID, "source"), "unknown")
	assert.Zero(t, evalJS[int](b, `document.querySelectorAll('#memory-list i').length`), "no element made from a memory's text")

	// History, on demand: read when opened, each time.
	history := func(id string) []string {
		n := evalJS[int](b, fmt.Sprintf(`+(%s.querySelector('[data-role=history]').dataset.loads || 0)`, memJS(id)))
		b.do("open the history", chromedp.Click(chromedp.CSS(memSel(id, `[data-role=history] summary`))))
		b.until("the history loads", fmt.Sprintf(`+(%s.querySelector('[data-role=history]').dataset.loads || 0) > %d`, memJS(id), n))
		out := evalJS[[]string](b, fmt.Sprintf(`[...%s.querySelectorAll('[data-role=history-body] li, [data-role=history-body] p')].map((e) => e.textContent)`, memJS(id)))
		b.do("close the history", chromedp.Click(chromedp.CSS(memSel(id, `[data-role=history] summary`))))
		return out
	}
	h := history(told)
	require.Len(t, h, 1)
	assert.Regexp(t, `^\d{4}-\d\d-\d\d \d\d:\d\d — created by chat$`, h[0])
	assert.Equal(t, []string{"No history: written before vera kept one."}, history(old.ID))

	// Forget hides it, restorably; Restore brings it back.
	b.do("forget", chromedp.Click(chromedp.CSS(memSel(kite.ID, `button[data-action=forget]`))))
	b.until("it shows forgotten", fmt.Sprintf(`%s?.dataset.type === 'forgotten'`, memJS(kite.ID)))
	assert.Regexp(t, `^Forgotten on \d{4}-\d\d-\d\d: restorable until \d{4}-\d\d-\d\d$`, fact(kite.ID, "forgotten"))
	var got veratest.AdminMemory
	require.Equal(t, http.StatusOK, veratest.AdminCall(t, p, "", "GET", "/memories/"+kite.ID, "", &got))
	assert.Equal(t, "forgotten", got.Type)
	b.do("restore", chromedp.Click(chromedp.CSS(memSel(kite.ID, `button[data-action=restore]`))))
	b.until("it shows restored", fmt.Sprintf(`%s?.dataset.type === 'curated'`, memJS(kite.ID)))
	h = history(kite.ID)
	for i, w := range []string{"created by admin", "forgotten by admin", "restored by admin"} {
		if assert.Len(t, h, 3) {
			assert.True(t, strings.HasSuffix(h[i], " — "+w), h[i])
		}
	}

	// Erase, confirmed on the page: gone from the list and from vera.
	b.do("erase", chromedp.Click(chromedp.CSS(memSel(kite.ID, `button[data-action=delete]`))))
	assert.Contains(t, fact(kite.ID, "confirm"), "Erase this memory? Nothing of it is kept, on disk either.")
	b.do("confirm", chromedp.Click(chromedp.CSS(memSel(kite.ID, `button[data-action=confirm-delete]`))))
	b.do("the memory goes", chromedp.WaitNotPresent(chromedp.CSS(memSel(kite.ID, ""))))
	assert.Equal(t, http.StatusNotFound, veratest.AdminCall(t, p, "", "GET", "/memories/"+kite.ID, "", nil))

	// Erase everything of alice: refused until "alice" is typed exactly.
	var spaces struct {
		Namespaces []struct {
			Namespace string
			Counts    map[string]int
		}
	}
	require.Equal(t, http.StatusOK, veratest.AdminCall(t, p, "", "GET", "/namespaces", "", &spaces))
	var counts map[string]int
	for _, n := range spaces.Namespaces {
		if n.Namespace == "alice" {
			counts = n.Counts
		}
	}
	require.Equal(t, 2, counts["raw"], "a turn a chat")
	require.Equal(t, 2, counts["curated"], "the old one and the curator's")
	assert.Equal(t, "alice", evalJS[string](b, `document.getElementById('erase-ns').textContent`))
	disabled := func() bool { return evalJS[bool](b, `document.getElementById('erase-all').disabled`) }
	assert.True(t, disabled(), "nothing typed")
	for _, typed := range []string{"alic", "Alice", "alice ", " alice", "bob"} {
		b.set("#erase-confirm", "")
		b.do("type "+typed, chromedp.SendKeys(chromedp.ID("erase-confirm"), typed))
		assert.True(t, disabled(), "%q is not the namespace", typed)
	}
	b.do("submit anyway", chromedp.Evaluate[chromedp.Void](`document.getElementById('erase-form').requestSubmit()`))
	assert.Contains(t, evalJS[string](b, `document.getElementById('status').textContent`), "Nothing erased")
	assert.Equal(t, http.StatusOK, veratest.AdminCall(t, p, "", "GET", "/memories/"+told, "", nil), "still there")

	b.set("#erase-confirm", "")
	b.do("type alice", chromedp.SendKeys(chromedp.ID("erase-confirm"), "alice"))
	assert.False(t, disabled())
	b.do("erase everything", chromedp.Click(chromedp.ID("erase-all")))
	b.until("the receipt shows", `!!document.querySelector('#erase-receipt [data-role=receipt]')`)
	receipt := evalJS[string](b, `document.querySelector('#erase-receipt [data-role=receipt]').textContent`)
	assert.Regexp(t, `^Erased 2 chat turns, 2 curated memories(, \d+ conversation plans?)? of “alice” at \d{4}-\d\d-\d\d \d\d:\d\d\.$`, receipt)
	assert.Zero(t, evalJS[int](b, `document.querySelectorAll('#memory-list > li').length`), "the list is empty")
	assert.Equal(t, "0 memories in “alice”.", evalJS[string](b, `document.getElementById('list-info').textContent`))
	b.until("alice leaves the people", `document.querySelectorAll('#people-list [data-ns=alice]').length === 0 && !!document.querySelector('#people-list [data-ns=bob]')`)

	var left struct{ Memories []veratest.AdminMemory }
	require.Equal(t, http.StatusOK, veratest.AdminCall(t, p, "", "GET", "/memories?namespace=alice", "", &left))
	assert.Empty(t, left.Memories)
	assert.Equal(t, http.StatusNotFound, veratest.AdminCall(t, p, "", "GET", "/memories/"+told, "", nil))
	require.Equal(t, http.StatusOK, veratest.AdminCall(t, p, "", "GET", "/memories?namespace=bob", "", &left))
	require.Len(t, left.Memories, 1, "bob's memory stays")
	assert.Equal(t, bob.ID, left.Memories[0].ID)

	// A phone: no horizontal scroll with a history open.
	b.show("bob", "")
	b.do("phone width", chromedp.EmulateViewport(375, 812))
	history(bob.ID)
	assert.True(t, evalJS[bool](b, `document.documentElement.scrollWidth <= document.documentElement.clientWidth`), "no horizontal scroll at 375 px")
	assert.Empty(t, evalJS[[]string](b, `window.__veraProblems`), "no CSP violation and no script error")
}

// Private memories on the page: a private one shows its lock, why in
// words and that it never goes to cloud models; the filter lists the
// private ones or the others; the page marks a memory private and
// unmarks it, with the keyboard too, and vera records the person's say.
func TestUIPrivateMemories(t *testing.T) {
	bin := chromiumPath()
	if bin == "" {
		t.Skip("no Chromium (/usr/bin/chromium, or chromium, chromium-browser or google-chrome on PATH): .ci/run installs Debian's chromium package")
	}
	up := ollamatest.New(t)
	p := veratest.Start(t, "VERA_OLLAMA_URL="+up.URL)
	var secret, kite veratest.AdminMemory
	require.Equal(t, http.StatusCreated, veratest.AdminCall(t, p, "", "POST", "/memories", `{"namespace":"alice","text":"Alice sees Dr <b>Privzz</b> on Tuesdays.","metadata":{"private":true}}`, &secret))
	require.Equal(t, http.StatusCreated, veratest.AdminCall(t, p, "", "POST", "/memories", `{"namespace":"alice","text":"Alice's kite is red."}`, &kite))
	// As an export keeps one the detectors and the curator marked.
	const found = "imp-private"
	require.Equal(t, http.StatusOK, veratest.AdminCall(t, p, "", "POST", "/memories/import",
		`{"id":"`+found+`","namespace":"alice","type":"curated","text":"Alice's doctor is Dr Importzz.","metadata":{"private":true,"private_why":["phone","password","curator"]}}`+"\n", nil))
	privacy := func(id string) (any, []any) {
		var m struct{ Metadata map[string]any }
		require.Equal(t, http.StatusOK, veratest.AdminCall(t, p, "", "GET", "/memories/"+id, "", &m))
		why, _ := m.Metadata["private_why"].([]any)
		return m.Metadata["private"], why
	}
	priv, why := privacy(kite.ID)
	require.Nil(t, priv, "the kite is not private")
	require.Empty(t, why)

	b := newBrowser(t, bin)
	b.do("load the page", chromedp.EmulateViewport(1280, 900), chromedp.Navigate("http://"+p.Addr+"/ui/"))
	b.until("the first list loads", `+(document.getElementById('memory-list').dataset.loads || 0) >= 1`)
	b.show("alice", "")
	fact := func(id, role string) string {
		return evalJS[string](b, fmt.Sprintf(`(%s?.querySelector('[data-role=%s]')?.textContent) ?? ''`, memJS(id), role))
	}
	has := func(id, sel string) bool {
		sj, _ := json.Marshal(sel)
		return evalJS[bool](b, fmt.Sprintf(`!!%s?.querySelector(%s)`, memJS(id), sj))
	}

	// The lock, why, and where it never goes.
	assert.Equal(t, "private", strings.TrimSpace(fact(secret.ID, "lock")))
	assert.Equal(t, "Never sent to cloud models", evalJS[string](b, fmt.Sprintf(`%s.querySelector('[data-role=lock]').title`, memJS(secret.ID))))
	assert.Equal(t, "Private: marked by you. Never sent to cloud models.", fact(secret.ID, "private"))
	assert.True(t, has(secret.ID, `button[data-action=unmark-private]`))
	assert.Equal(t, "Private: phone number, password, marked by the curator. Never sent to cloud models.", fact(found, "private"))
	assert.Empty(t, fact(kite.ID, "lock"))
	assert.Empty(t, fact(kite.ID, "private"))
	assert.True(t, has(kite.ID, `button[data-action=mark-private]`))
	assert.Equal(t, "Alice sees Dr <b>Privzz</b> on Tuesdays.", b.memText(secret.ID))
	assert.Zero(t, evalJS[int](b, `document.querySelectorAll('#memory-list b').length`), "no element made from a memory's text")

	// The filter, with the type filter and a search.
	listed := func(private, q string) []string {
		b.set("#private", private)
		b.show("alice", q)
		return evalJS[[]string](b, `[...document.querySelectorAll('#memory-list > li')].map((e) => e.dataset.id)`)
	}
	info := func() string { return evalJS[string](b, `document.getElementById('list-info').textContent`) }
	assert.ElementsMatch(t, []string{secret.ID, found}, listed("true", ""))
	assert.Equal(t, "2 private memories in “alice”.", info())
	assert.Equal(t, []string{kite.ID}, listed("false", ""))
	assert.Equal(t, "1 memory not private in “alice”.", info())
	assert.Equal(t, []string{kite.ID}, listed("false", "kite"))
	assert.Empty(t, listed("true", "kite"))
	assert.Equal(t, []string{found}, listed("true", "Importzz"))
	b.set("#type", "curated")
	assert.ElementsMatch(t, []string{secret.ID, found}, listed("true", ""))
	assert.Equal(t, "2 private curated memories in “alice”.", info())
	b.set("#type", "rule")
	assert.Empty(t, listed("true", ""))
	b.set("#type", "")
	assert.ElementsMatch(t, []string{secret.ID, kite.ID, found}, listed("", ""))

	// Marked private with the keyboard: Tab from Forget, Enter.
	active := `document.activeElement?.dataset.action ?? ''`
	b.do("focus Forget", chromedp.Focus(chromedp.CSS(memSel(kite.ID, `button[data-action=forget]`))))
	b.do("Tab", chromedp.KeyEvent(kb.Tab))
	require.Equal(t, "mark-private", evalJS[string](b, active))
	b.do("Enter", chromedp.KeyEvent(kb.Enter))
	b.until("the kite shows private", fmt.Sprintf(`%s?.dataset.private === 'true'`, memJS(kite.ID)))
	priv, why = privacy(kite.ID)
	assert.Equal(t, true, priv)
	assert.Contains(t, why, "user")
	assert.Equal(t, "Private: marked by you. Never sent to cloud models.", fact(kite.ID, "private"))
	assert.Equal(t, "unmark-private", evalJS[string](b, active), "focus stays on the toggle")
	assert.Contains(t, evalJS[string](b, `document.getElementById('status').textContent`), "never sent to cloud models")

	// Unmarked in the list of private ones: it leaves the list.
	assert.ElementsMatch(t, []string{secret.ID, kite.ID, found}, listed("true", ""))
	b.do("unmark", chromedp.Click(chromedp.CSS(memSel(kite.ID, `button[data-action=unmark-private]`))))
	b.do("the kite leaves the list", chromedp.WaitNotPresent(chromedp.CSS(memSel(kite.ID, ""))))
	priv, why = privacy(kite.ID)
	assert.Equal(t, false, priv, "a person's unmark stays recorded")
	assert.Empty(t, why)
	assert.Equal(t, "2 private memories in “alice”.", info())
	assert.Equal(t, []string{kite.ID}, listed("false", ""))
	assert.Empty(t, fact(kite.ID, "lock"))
	assert.True(t, has(kite.ID, `button[data-action=mark-private]`))

	// A phone: no horizontal scroll.
	listed("", "")
	b.do("phone width", chromedp.EmulateViewport(375, 812))
	assert.True(t, evalJS[bool](b, `document.documentElement.scrollWidth <= document.documentElement.clientWidth`), "no horizontal scroll at 375 px")
	assert.Empty(t, evalJS[[]string](b, `window.__veraProblems`), "no CSP violation and no script error")
}

// The page opens on the newest memories, newest first, and More goes on
// in that order; the sort control turns the list oldest first, from the
// oldest, More going on the same way; a memory added on the page then
// comes last, and first again once the list is newest first.
func TestUISortsByTime(t *testing.T) {
	bin := chromiumPath()
	if bin == "" {
		t.Skip("no Chromium (/usr/bin/chromium, or chromium, chromium-browser or google-chrome on PATH): .ci/run installs Debian's chromium package")
	}
	up := ollamatest.New(t)
	p := veratest.Start(t, "VERA_OLLAMA_URL="+up.URL)
	// More than a page (50), written in no order of time; two of one time,
	// which come by id.
	t0 := time.Now().UTC().Add(-72 * time.Hour).Truncate(time.Second)
	type dated struct {
		id string
		at time.Time
	}
	var ms []dated
	var jsonl strings.Builder
	for i := range 55 {
		at := t0.Add(time.Duration((i*23)%55) * time.Minute)
		if i == 54 {
			at = ms[0].at
		}
		d := dated{memory.NewID(), at}
		ms = append(ms, d)
		fmt.Fprintf(&jsonl, `{"id":%q,"namespace":"alice","type":"curated","text":"Memory %d.","timestamp":%q}`+"\n", d.id, i, at.Format(time.RFC3339))
	}
	require.Equal(t, http.StatusOK, veratest.AdminCall(t, p, "", "POST", "/memories/import", jsonl.String(), nil))
	slices.SortFunc(ms, func(a, b dated) int {
		if c := b.at.Compare(a.at); c != 0 {
			return c
		}
		return strings.Compare(b.id, a.id)
	})
	newest := make([]string, len(ms))
	for i, d := range ms {
		newest[i] = d.id
	}
	oldest := slices.Clone(newest)
	slices.Reverse(oldest)

	b := newBrowser(t, bin)
	b.do("load the page", chromedp.EmulateViewport(1280, 900), chromedp.Navigate("http://"+p.Addr+"/ui/"))
	b.until("the first list loads", `+(document.getElementById('memory-list').dataset.loads || 0) >= 1 && document.getElementById('ns').value === 'alice'`)
	listed := func() []string {
		return evalJS[[]string](b, `[...document.querySelectorAll('#memory-list > li')].map((e) => e.dataset.id)`)
	}
	more := func() {
		n := b.loads()
		b.do("More", chromedp.Click(chromedp.ID("more")))
		b.until("the next page loads", fmt.Sprintf(`+document.getElementById('memory-list').dataset.loads > %d`, n))
	}
	moreShown := func() bool { return !evalJS[bool](b, `document.getElementById('more').hidden`) }

	assert.Equal(t, "newest", evalJS[string](b, `document.getElementById('order').value`))
	assert.Equal(t, "Newest first", evalJS[string](b, `document.getElementById('order').selectedOptions[0].textContent`))
	assert.Equal(t, newest[:50], listed(), "it opens on the newest, newest first")
	require.True(t, moreShown())
	more()
	assert.Equal(t, newest, listed(), "More goes on newest first")
	assert.False(t, moreShown())

	sortBy := func(order string) {
		n := b.loads()
		b.set("#order", order)
		b.do("sort "+order+" first", chromedp.Evaluate[chromedp.Void](`document.getElementById('order').dispatchEvent(new Event('change'))`))
		b.until("the list loads again", fmt.Sprintf(`+document.getElementById('memory-list').dataset.loads > %d`, n))
	}
	sortBy("oldest")
	assert.Equal(t, oldest[:50], listed(), "from the oldest")
	require.True(t, moreShown())
	more()
	assert.Equal(t, oldest, listed(), "More goes on oldest first")

	// Added on the page: the newest, so the last of the whole list.
	b.do("add a memory",
		chromedp.SetValue(chromedp.ID("add-text"), "Alice moved to Porto."),
		chromedp.Click(chromedp.ID("add")))
	b.until("it shows last", `document.querySelector('#memory-list > li:last-child [data-role=text]')?.textContent === 'Alice moved to Porto.'`)
	sortBy("newest")
	b.until("it shows first", `document.querySelector('#memory-list > li:first-child [data-role=text]')?.textContent === 'Alice moved to Porto.'`)
	assert.Equal(t, newest[:49], listed()[1:])

	// A search lists the best matches first: the sort waits.
	b.show("alice", "Porto")
	assert.True(t, evalJS[bool](b, `document.getElementById('order').disabled`))
	assert.Contains(t, evalJS[string](b, `document.getElementById('list-info').textContent`), "best matches first")
	b.show("alice", "")
	assert.False(t, evalJS[bool](b, `document.getElementById('order').disabled`))
	assert.Equal(t, newest[:49], listed()[1:])

	// The filters stay on one line on a desktop, the sort above the list.
	assert.True(t, evalJS[bool](b, `document.getElementById('search').getBoundingClientRect().bottom === document.getElementById('ns-pick').getBoundingClientRect().bottom`), "the filters on one line")
	assert.True(t, evalJS[bool](b, `document.getElementById('order').getBoundingClientRect().bottom <= document.getElementById('memory-list').getBoundingClientRect().top`), "the sort above the list")
	b.do("phone width", chromedp.EmulateViewport(375, 812))
	assert.True(t, evalJS[bool](b, `document.documentElement.scrollWidth <= document.documentElement.clientWidth`), "no horizontal scroll at 375 px")
	assert.Empty(t, evalJS[[]string](b, `window.__veraProblems`), "no CSP violation and no script error")
}
