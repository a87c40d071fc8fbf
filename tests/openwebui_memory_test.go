package tests

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/ollama/ollama/api"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/ollama/ollamatest"
	"github.com/vera-proxy/vera/tests/veratest"
)

// owuiSystem is a system message as Open WebUI's chat_memory_handler
// leaves it (backend/open_webui/utils/middleware.py): the user's system
// prompt, a newline, then f"User Context:\n{lines}\n" with one
// f"{i}. [{date}] {memory}\n" line per memory.
const owuiSystem = "You are a kind assistant.\nUser Context:\n" +
	"1. [2025-03-14] Lives in Viennazz\n" +
	"2. [Unknown Date] User prefers green teazz\n" +
	"3. [2025-04-02] Owns a sailing boat called Zephyrzz\n\n"

const owuiQuestion = "Where do I live, what do I drink, and what is my dog called?"

// seedOWUI gives alice vera's own memories: two that say what Open WebUI's
// block says, one it does not hold.
func seedOWUI(t *testing.T, p *veratest.InProcess) {
	t.Helper()
	for _, m := range []string{
		`{"namespace":"alice","text":"The user lives in Viennazz."}`,
		`{"namespace":"alice","text":"User prefers green teazz."}`,
		`{"namespace":"alice","text":"Alice's dog is called Rexzz."}`,
	} {
		require.Equal(t, http.StatusCreated, veratest.AdminCall(t, p, "", "POST", "/memories", m, nil), m)
	}
}

// owuiChat sends owuiSystem and the question through an official client
// of the dialect Open WebUI speaks to its connection (its Ollama
// connection posts /api/chat, an OpenAI one /v1/chat/completions), and
// returns vera's X-Vera-Context.
func owuiChat(t *testing.T, p *veratest.InProcess, path, model, chatID string) string {
	t.Helper()
	var header string
	switch path {
	case "/api/chat":
		u, err := url.Parse("http://" + p.Addr)
		require.NoError(t, err)
		tr := &contextHeader{HeaderTransport: ollamatest.HeaderTransport{Header: veratest.HeadersFor("alice", chatID)}}
		c := api.NewClient(u, &http.Client{Transport: tr})
		err = c.Chat(context.Background(), &api.ChatRequest{Model: model, Messages: []api.Message{
			{Role: "system", Content: owuiSystem}, {Role: "user", Content: owuiQuestion},
		}}, func(api.ChatResponse) error { return nil })
		require.NoError(t, err)
		header = tr.seen
	default:
		var res *http.Response
		opts := append(veratest.OpenAIOptions(p, "alice", chatID), option.WithResponseInto(&res))
		c := openai.NewClient(opts...)
		_, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: model,
			Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage(owuiSystem), openai.UserMessage(owuiQuestion)}})
		require.NoError(t, err)
		header = res.Header.Get("X-Vera-Context")
	}
	return header
}

// contextHeader keeps the X-Vera-Context of the answer.
type contextHeader struct {
	ollamatest.HeaderTransport
	seen string
}

func (c *contextHeader) RoundTrip(r *http.Request) (*http.Response, error) {
	res, err := c.HeaderTransport.RoundTrip(r)
	if err == nil {
		c.seen = res.Header.Get("X-Vera-Context")
	}
	return res, err
}

// Open WebUI's memory beside vera's: its facts are counted (owui=N), none
// of vera's memories that say the same is injected again while one it
// lacks is, the block is never stored, and "drop" removes it, giving the
// model vera's memories in its place.
func TestOpenWebUIMemorySideBySide(t *testing.T) {
	for _, path := range []string{"/api/chat", "/v1/chat/completions"} {
		t.Run(strings.TrimPrefix(path, "/"), func(t *testing.T) {
			up := ollamatest.NewDialects(t)
			numberedReplies(up)
			data := t.TempDir()
			p := conversationVeraWith(t, up, data, t.TempDir(), "")
			seedOWUI(t, p)

			vc := owuiChat(t, p, path, "llama3.2", "chat-1")
			assert.Contains(t, vc, "owui=3")
			sent := up.LastRaw(path)
			assert.Equal(t, 1, strings.Count(sent, "Viennazz"), "Open WebUI's fact, and not vera's that says the same")
			assert.Equal(t, 1, strings.Count(strings.ToLower(sent), "green teazz"))
			assert.Contains(t, sent, "Rexzz", "vera's memory that Open WebUI lacks")
			assert.Contains(t, sent, "User Context:", "kept: the block goes as Open WebUI sent it")
			assert.Contains(t, sent, "Zephyrzz")

			// A second turn, and the next conversation's first.
			owuiChat(t, p, path, "llama3.2", "chat-1")
			owuiChat(t, p, path, "llama3.2", "chat-2")
			veratest.Settled(t, p)
			var list struct{ Memories []veratest.AdminMemory }
			require.Equal(t, 200, veratest.AdminCall(t, p, "", "GET", "/memories?namespace=alice&limit=100", "", &list))
			for _, m := range list.Memories {
				assert.NotContains(t, m.Text, "User Context", "never stored as part of a turn")
			}
			p.Stop(t)
			assert.Empty(t, veratest.Holding(t, data, "Zephyrzz"), "no byte of Open WebUI's block is kept")
		})
	}
}

// memory.open_webui_memory = "drop": the block leaves the system message
// (the user's own prompt stays), for every policy, and vera's own memories
// are the ones the model gets.
func TestOpenWebUIMemoryDropped(t *testing.T) {
	for _, path := range []string{"/api/chat", "/v1/chat/completions"} {
		t.Run(strings.TrimPrefix(path, "/"), func(t *testing.T) {
			up := ollamatest.NewDialects(t)
			numberedReplies(up)
			p := conversationVeraWith(t, up, t.TempDir(), t.TempDir(),
				"[memory]\nopen_webui_memory = \"drop\"\n[memory.models]\n\"guest*\" = \"none\"\n")
			seedOWUI(t, p)
			for _, model := range []string{"llama3.2", "guest:1b"} {
				vc := owuiChat(t, p, path, model, "")
				sent := up.LastRaw(path)
				assert.NotContains(t, sent, "User Context", model)
				assert.NotContains(t, sent, "Zephyrzz", model)
				assert.Contains(t, sent, "You are a kind assistant.", model)
				if model == "llama3.2" {
					assert.Contains(t, vc, "owui=3")
					assert.Contains(t, sent, "Viennazz", "vera tells what Open WebUI no longer does")
					assert.Contains(t, sent, "Rexzz")
				}
			}
		})
	}
}
