package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/memory"
	"github.com/vera-proxy/vera/memory/conversation"
)

// A client that opens more chats than vera keeps conversations for, all
// in its own namespace, never costs another namespace its plan: bob's
// next turn still forwards the layers of his first, byte for byte.
func TestChatFloodKeepsOtherNamespacesPlans(t *testing.T) {
	const kept = 16 // the table's size here; 2048 by default
	cases := []struct {
		name  string
		flood func(i int) (body string, hdr []string)
	}{
		{"chat ids", func(i int) (string, []string) {
			return `{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
				[]string{"X-OpenWebUI-User-Id", "mallory", "X-OpenWebUI-Chat-Id", fmt.Sprint("flood-", i)}
		}},
		{"first messages", func(i int) (string, []string) {
			return fmt.Sprintf(`{"model":"m","messages":[{"role":"user","content":"question %d"}]}`, i),
				[]string{"X-OpenWebUI-User-Id", "mallory"}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			up := newFakeOllama(t)
			base := startVera(t, up.srv.URL, func(s *Server) {
				s.Memory, s.Conversations = &countingMemory{}, conversation.New(kept)
			})
			bob := []string{"X-OpenWebUI-User-Id", "bob", "X-OpenWebUI-Chat-Id", "bob-1"}
			res, _ := postChat(t, base, "/api/chat", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, bob...)
			require.Equal(t, http.StatusOK, res.StatusCode)
			_, _, first := up.last()
			require.Contains(t, string(first), "Memories (recall 1).")

			for i := range 2*kept + 8 {
				body, hdr := tc.flood(i)
				res, _ := postChat(t, base, "/api/chat", body, hdr...)
				require.Equal(t, http.StatusOK, res.StatusCode)
			}

			res, _ = postChat(t, base, "/api/chat", `{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"Hello there."},{"role":"user","content":"and then?"}]}`, bob...)
			require.Equal(t, http.StatusOK, res.StatusCode)
			_, _, next := up.last()
			assert.Contains(t, string(next), "Memories (recall 1).", "bob's plan was kept: his next turn starts as his first did")
		})
	}
}

// logSignal sends on ch each time msg is logged.
type logSignal struct {
	msg string
	ch  chan<- struct{}
}

func (h logSignal) Enabled(context.Context, slog.Level) bool { return true }

func (h logSignal) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		h.ch <- struct{}{}
	}
	return nil
}

func (h logSignal) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h logSignal) WithGroup(string) slog.Handler      { return h }

// Summaries that hang, all of them mallory's (the model never answers
// the summary requests of mallory's conversations), never keep bob's long
// conversation from being compacted: bob's summary is written while
// mallory's still hang, and his next turn carries it.
func TestHungSummariesLeaveOtherNamespacesCompaction(t *testing.T) {
	for _, hung := range []int{2, 4} {
		t.Run(fmt.Sprint(hung, " of mallory's chats"), func(t *testing.T) {
			up := newFakeOllama(t)
			orig := up.srv.Config.Handler
			var mu sync.Mutex
			var chats []string // the chats forwarded, summaries aside
			up.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/api/chat" {
					orig.ServeHTTP(w, r)
					return
				}
				b, _ := io.ReadAll(r.Body)
				switch {
				case !strings.Contains(string(b), "Summarize the conversation above"):
					mu.Lock()
					chats = append(chats, string(b))
					mu.Unlock()
					r.Body = io.NopCloser(bytes.NewReader(b))
					orig.ServeHTTP(w, r)
				case strings.Contains(string(b), "MALLORY"):
					<-r.Context().Done() // never answers
				default:
					writeJSON(w, http.StatusOK, map[string]any{"model": "m", "done": true,
						"message": map[string]string{"role": "assistant", "content": "BOB-SUMMARY: Bob spoke of his garden."}})
				}
			})
			cs := conversation.New(0)
			cs.CompactAt = 0.75
			t.Cleanup(cs.Close) // ends the summaries that hang, before the fake Ollama closes
			summarised := make(chan struct{}, 8)
			s := New(mustURL(t, up.srv.URL), NewTransport(time.Minute), slog.New(logSignal{msg: "a long conversation was summarised", ch: summarised}))
			s.Memory, s.Conversations = &countingMemory{}, cs
			srv := httptest.NewServer(s.Handler())
			t.Cleanup(srv.Close)

			// turn sends the n-th turn of a chat of ns whose every message
			// takes about a third of a 512-token window: the second turn
			// is due a summary.
			turn := func(ns, chat string, n int) string {
				t.Helper()
				var msgs []map[string]string
				for k := range n {
					if k > 0 {
						msgs = append(msgs, map[string]string{"role": "assistant", "content": "Hello there."})
					}
					text := fmt.Sprintf("%s %s message %d: %s", strings.ToUpper(ns), chat, k, strings.Repeat("words about the garden ", 22))
					msgs = append(msgs, map[string]string{"role": "user", "content": text})
				}
				body, err := json.Marshal(map[string]any{"model": "m", "messages": msgs, "options": map[string]int{"num_ctx": 512}})
				require.NoError(t, err)
				res, _ := postChat(t, srv.URL, "/api/chat", string(body), "X-OpenWebUI-User-Id", ns, "X-OpenWebUI-Chat-Id", chat)
				require.Equal(t, http.StatusOK, res.StatusCode)
				mu.Lock()
				defer mu.Unlock()
				return chats[len(chats)-1]
			}
			for i := range hung {
				chat := fmt.Sprint("m", i)
				turn("mallory", chat, 1)
				turn("mallory", chat, 2)
			}
			turn("bob", "b", 1)
			turn("bob", "b", 2)
			select {
			case <-summarised:
			case <-time.After(10 * time.Second):
				t.Fatal("bob's summary was never written: mallory's hung summaries hold every slot")
			}
			next := turn("bob", "b", 3)
			assert.Contains(t, next, "Summary of the earlier part of this conversation")
			assert.Contains(t, next, "BOB-SUMMARY")
			assert.NotContains(t, next, "BOB b message 0", "the summary stands for the oldest turn")

			last := turn("mallory", "m0", 3)
			assert.NotContains(t, last, "Summary of the earlier part", "mallory's conversation goes on without one")
		})
	}
}

// seenStore keeps a directory's rows in memory.
type seenStore struct{}

func (seenStore) SaveSeen(context.Context, ...memory.Seen) error  { return nil }
func (seenStore) LoadSeen(context.Context) ([]memory.Seen, error) { return nil, nil }
func (seenStore) DeleteSeen(context.Context, string) error        { return nil }
