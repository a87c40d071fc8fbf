package process

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/ollama/ollamatest"
	"github.com/vera-proxy/vera/tests/veratest"
)

// eraseToken is the admin token of the kill -9 erase tests' vera, and
// eraseAuth the Authorization header that carries it.
const (
	eraseToken = "erase-t0ken"
	eraseAuth  = "Bearer " + eraseToken
)

// eraseTell tells secret as ns through /api/chat (the official Ollama
// client) and /v1/chat/completions (openai-go), each in a chat of its
// own, then asks for it in a new chat until vera recalls it (that chat's
// kept plan carries it), and waits until every turn is stored.
func eraseTell(t *testing.T, p *veratest.Proc, up *ollamatest.Server, ns, secret string) {
	t.Helper()
	ollamatest.ChatWith(t, p.Addr, veratest.HeadersFor(ns, ns+"-tell-ollama"), veratest.User("My locker code is "+secret+"."))
	c := openai.NewClient(veratest.OpenAIOptions(p, ns, ns+"-tell-openai")...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "llama3.2",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Note it well: my locker code is " + secret + ".")}})
	require.NoError(t, err)
	veratest.RecallsEventually(t, p, up, ns, "What is my locker code?", secret)
	veratest.Settled(t, p)
}

// eraseRestart starts vera again on env's data dir (what a restart after
// the kill does: the store opened, the queue written, the index loaded),
// waits until nothing is queued, checks that ns holds nothing of secret,
// and stops it gracefully.
func eraseRestart(t *testing.T, env []string, ns, secret string) {
	t.Helper()
	p := veratest.Launch(t, env...)
	veratest.Settled(t, p)
	assert.Empty(t, veratest.IDsHolding(t, p, eraseAuth, ns, secret), "no memory holds it after the restart")
	p.Stop(t)
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
		p := veratest.Launch(t, env...)
		eraseTell(t, p, up, ns, secret)
		// A stop and a start: the index snapshot holds its words too.
		p.Stop(t)
		p = veratest.Launch(t, env...)
		ids := veratest.IDsHolding(t, p, eraseAuth, ns, secret)
		require.Len(t, ids, 2, "a turn a chat that told it")
		before := veratest.Holding(t, data, secret)
		require.NotEmpty(t, before, "on disk before the erase")
		t.Logf("before the erase, %s is in %v", secret, before)

		for i, id := range ids {
			code, b := veratest.AdminDo(t, p, eraseAuth, http.MethodDelete, "/memories/"+id, "")
			if i == len(ids)-1 && code == http.StatusNoContent {
				require.NoError(t, p.Cmd.Process.Kill(), "SIGKILL the moment the last 204 arrived")
			}
			require.Equal(t, http.StatusNoContent, code, string(b))
		}
		select {
		case <-p.Exited:
		case <-time.After(10 * time.Second):
			t.Fatal("vera did not die of SIGKILL")
		}
		assert.Empty(t, veratest.Holding(t, data, secret), "nothing of it after kill -9")

		eraseRestart(t, env, ns, secret)
		assert.Empty(t, veratest.Holding(t, data, secret), "nor after a start on those files and a stop")
	})

	t.Run("erase namespace", func(t *testing.T) {
		const ns, secret = "carol", "SECRET62955138827104"
		data := t.TempDir()
		env := []string{"VERA_OLLAMA_URL=" + up.URL, "VERA_DATA_DIR=" + data, "VERA_ADMIN_TOKEN=" + eraseToken}
		p := veratest.Launch(t, env...)
		eraseTell(t, p, up, ns, secret)
		code, b := veratest.AdminDo(t, p, eraseAuth, http.MethodPost, "/memories", `{"namespace":"dave","text":"Dave's locker code is 1234."}`)
		require.Equal(t, http.StatusCreated, code, string(b))
		stored := map[string]int{}
		for _, m := range veratest.MemoriesOf(t, p, eraseAuth, ns, "") {
			stored[m.Type]++
		}
		require.Len(t, veratest.IDsHolding(t, p, eraseAuth, ns, secret), 2, "a turn a chat that told it")
		before := veratest.Holding(t, data, secret)
		require.NotEmpty(t, before, "on disk before the erase")
		t.Logf("before the erase, %s is in %v", secret, before)

		code, b = veratest.AdminDo(t, p, eraseAuth, http.MethodDelete, "/namespaces/"+ns, "")
		if code == http.StatusOK {
			require.NoError(t, p.Cmd.Process.Kill(), "SIGKILL the moment the receipt arrived")
		}
		require.Equal(t, http.StatusOK, code, string(b))
		select {
		case <-p.Exited:
		case <-time.After(10 * time.Second):
			t.Fatal("vera did not die of SIGKILL")
		}
		assert.Empty(t, veratest.Holding(t, data, secret), "nothing of it after kill -9")

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

		p = veratest.Launch(t, env...)
		veratest.Settled(t, p)
		assert.Empty(t, veratest.MemoriesOf(t, p, eraseAuth, ns, ""), "nothing of carol after the restart")
		assert.Len(t, veratest.MemoriesOf(t, p, eraseAuth, "dave", ""), 1, "another person's memory stays")
		code, b = veratest.AdminDo(t, p, eraseAuth, http.MethodGet, "/namespaces", "")
		require.Equal(t, http.StatusOK, code)
		assert.NotContains(t, string(b), `"`+ns+`"`, "carol is not listed")
		p.Stop(t)
		assert.Empty(t, veratest.Holding(t, data, secret), "nor after a start on those files and a stop")
	})
}
