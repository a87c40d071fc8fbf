package ollamatest

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/ollama/ollama/api"
	"github.com/stretchr/testify/require"
)

// HeaderTransport adds headers to every request, as Open WebUI adds its
// user's id.
type HeaderTransport struct{ Header http.Header }

// RoundTrip implements http.RoundTripper.
func (t HeaderTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range t.Header {
		r.Header[k] = v
	}
	return http.DefaultTransport.RoundTrip(r)
}

// Chat sends one conversation to the vera at addr (host:port) with the
// official client, as namespace ns (none: ""), with memory off when off,
// and returns the answer.
func Chat(t testing.TB, addr, ns string, off bool, msgs ...api.Message) string {
	t.Helper()
	h := http.Header{}
	if ns != "" {
		h.Set("X-OpenWebUI-User-Id", ns)
	}
	if off {
		h.Set("X-Vera-Memory", "off")
	}
	return ChatWith(t, addr, h, msgs...)
}

// ChatWith sends one conversation with the headers h, as Chat does.
func ChatWith(t testing.TB, addr string, h http.Header, msgs ...api.Message) string {
	t.Helper()
	u, err := url.Parse("http://" + addr)
	require.NoError(t, err)
	c := api.NewClient(u, &http.Client{Transport: HeaderTransport{h}})
	var answer strings.Builder
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = c.Chat(ctx, &api.ChatRequest{Model: "llama3.2", Messages: msgs}, func(r api.ChatResponse) error {
		answer.WriteString(r.Message.Content)
		return nil
	})
	require.NoError(t, err)
	return answer.String()
}

// User is a user message.
func User(s string) api.Message { return api.Message{Role: "user", Content: s} }

// SystemOf returns the system message vera forwarded, or "".
func SystemOf(r api.ChatRequest) string {
	if len(r.Messages) > 0 && r.Messages[0].Role == "system" {
		return r.Messages[0].Content
	}
	return ""
}

// RecallsEventually asks question as ns through the vera at addr until the
// system message forwarded to s contains want (turns are stored in the
// background). Each try is a new chat of its own (Open WebUI's chat id),
// so that no try is taken for a regenerate of the one before.
func (s *Server) RecallsEventually(t testing.TB, addr, ns, question, want string) {
	t.Helper()
	try := 0
	require.Eventually(t, func() bool {
		try++
		h := http.Header{"X-Openwebui-Chat-Id": {fmt.Sprintf("recall-%d-%d", time.Now().UnixNano(), try)}}
		if ns != "" {
			h.Set("X-OpenWebUI-User-Id", ns)
		}
		ChatWith(t, addr, h, User(question))
		return strings.Contains(SystemOf(s.LastChat(t)), want)
	}, 15*time.Second, 50*time.Millisecond, "%q never injected for %q", want, question)
}
