package tests

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/memory/qdrant/qdranttest"
	"github.com/vera-proxy/vera/ollama/ollamatest"
	"github.com/vera-proxy/vera/tests/veratest"
)

// Each conversation's plan is kept in the store: the first turn after a
// restart, or a turn answered by another instance on the same Qdrant,
// forwards the previous prompt plus its answer, byte for byte, so that
// Ollama's prompt cache evaluates only the new messages.

// factTurns runs the six fact questions through d, the k-th (from 0) on
// the vera via(k) returns, and checks that every turn after the first
// starts with the turn before and its answer.
func factTurns(t *testing.T, d convo, up *ollamatest.Dialects, chatID string, via func(k int) *veratest.InProcess) {
	t.Helper()
	var h []msg
	var log []turnLog
	blocks := 0
	for k, q := range factQuestions {
		log = append(log, converse(t, d, via(k), up, "alice", chatID, &h, fmt.Sprintf("%s (turn %d)", q, k+1))...)
		if k > 0 {
			assert.True(t, keeps(log[k-1], log[k]), "turn %d starts with turn %d's prompt and answer (reuse %.3f)",
				k+1, k, reuse(withAnswer(log[k-1].prompt, log[k-1].answer), log[k].prompt))
		}
		blocks = strings.Count(log[k].prompt, "<memories>")
	}
	assert.Positive(t, blocks, "later turns added blocks, and they were kept")
}

// A restart between two turns costs the next turn only its new messages,
// in every dialect, with and without a chat id.
func TestPlansSurviveARestart(t *testing.T) {
	for _, d := range conversationDialects {
		for _, chatID := range []string{"", "chat-r"} {
			t.Run(fmt.Sprintf("%s/chat id %q", d.name, chatID), func(t *testing.T) {
				up := ollamatest.NewDialects(t)
				numberedReplies(up)
				data, prompts := t.TempDir(), t.TempDir()
				p := conversationVera(t, up, data, prompts)
				tellFacts(t, p, "alice")
				factTurns(t, d, up, chatID, func(k int) *veratest.InProcess {
					if k == 3 {
						p.Stop(t)
						p = conversationVera(t, up, data, prompts)
					}
					return p
				})
			})
		}
	}
}

// Two instances on one Qdrant, the turns alternating between them (a
// load balancer without affinity): every turn keeps the prefix.
func TestPlansAreSharedByInstances(t *testing.T) {
	url := qdranttest.URL(t, os.Getenv("VERA_TEST_QDRANT_URL"))
	for _, d := range conversationDialects {
		t.Run(d.name, func(t *testing.T) {
			up := ollamatest.NewDialects(t)
			numberedReplies(up)
			env := []string{"VERA_QDRANT_URL=" + url, fmt.Sprintf("VERA_QDRANT_COLLECTION=plans_%d", time.Now().UnixNano())}
			prompts := t.TempDir()
			ps := []*veratest.InProcess{
				conversationVera(t, up, t.TempDir(), prompts, env...),
				conversationVera(t, up, t.TempDir(), prompts, env...),
			}
			tellFacts(t, ps[0], "alice")
			factTurns(t, d, up, "", func(k int) *veratest.InProcess { return ps[k%2] })
		})
	}
}

// Deleting a memory a kept plan carries withdraws the plan in the store
// too: the next turn after a restart does not forward it.
func TestDeletedMemoryLeavesTheKeptPlan(t *testing.T) {
	up := ollamatest.NewDialects(t)
	numberedReplies(up)
	data, prompts := t.TempDir(), t.TempDir()
	p := conversationVera(t, up, data, prompts)
	tellFacts(t, p, "alice")
	d := conversationDialects[0]
	var h []msg
	log := converse(t, d, p, up, "alice", "chat-del", &h, factQuestions[0], factQuestions[1])
	require.Contains(t, log[1].prompt, factWords[0])
	id := memoryIDWith(t, p, "alice", factWords[0])
	require.Equal(t, 204, veratest.AdminCall(t, p, "", "DELETE", "/memories/"+id, "", nil))
	p.Stop(t)
	p = conversationVera(t, up, data, prompts)
	log = append(log, converse(t, d, p, up, "alice", "chat-del", &h, "And what else do you know?")...)
	assert.NotContains(t, log[2].prompt[:strings.LastIndex(log[2].prompt, "<|user|>")], "My dog is called "+factWords[0],
		"the deleted memory is not forwarded from the kept plan")
}

// memoryIDWith returns the id of ns's memory whose text holds word.
func memoryIDWith(t *testing.T, p *veratest.InProcess, ns, word string) string {
	t.Helper()
	var list struct {
		Memories []struct {
			ID   string `json:"id"`
			Text string `json:"text"`
		} `json:"memories"`
	}
	require.Equal(t, 200, veratest.AdminCall(t, p, "", "GET", "/memories?namespace="+ns+"&limit=100", "", &list))
	for _, m := range list.Memories {
		if strings.Contains(m.Text, word) {
			return m.ID
		}
	}
	t.Fatalf("no memory of %s holds %q", ns, word)
	return ""
}
