package tests

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/memory"
	"github.com/vera-proxy/vera/ollama/ollamatest"
	"github.com/vera-proxy/vera/tests/veratest"
)

func TestRunInProcessRecallsAndStopsGracefully(t *testing.T) {
	up := ollamatest.New(t)
	data := t.TempDir()
	p := veratest.Start(t, "VERA_OLLAMA_URL="+up.URL, "VERA_DATA_DIR="+data)

	assert.Equal(t, "Hello from Ollama", veratest.Chat(t, p, "alice", false, veratest.User("My sister Ana lives in Lisbon.")))
	// A new conversation: the turn is stored in the background, so ask
	// until the forwarded system message recalls it.
	veratest.RecallsEventually(t, p, up, "alice", "Where does my sister Ana live?", "Ana lives in Lisbon")

	// Another namespace sees nothing of alice's.
	veratest.Chat(t, p, "bob", false, veratest.User("Where does my sister Ana live?"))
	assert.NotContains(t, veratest.SystemOf(up.LastChat(t)), "Lisbon")

	// Cancelling Run's context is a graceful stop: Run returns nil and
	// the store is closed, with the turn in it.
	p.Stop(t)
	assert.Contains(t, p.Logs(), "msg=stopped")

	db := veratest.OpenStore(t, data)
	stored := func(ns string) string {
		ms, err := db.Latest(context.Background(), memory.Filter{Namespace: ns}, 100)
		require.NoError(t, err)
		var texts []string
		for _, m := range ms {
			texts = append(texts, m.Text)
		}
		return strings.Join(texts, "\n")
	}
	assert.Contains(t, stored("alice"), "My sister Ana lives in Lisbon.", "the turn is in the store")
	assert.NotContains(t, stored("bob"), "Lisbon", "bob's namespace holds none of alice's turns")
}
