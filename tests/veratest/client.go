package veratest

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/ollama/ollama/api"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/ollama/ollamatest"
)

// Chat sends one conversation to vera with the official Ollama client, as
// namespace ns (none: ""), with memory off when off, and returns the
// answer.
func Chat(t *testing.T, v Vera, ns string, off bool, msgs ...api.Message) string {
	t.Helper()
	return ollamatest.Chat(t, v.Address(), ns, off, msgs...)
}

// User is a user message.
func User(s string) api.Message { return ollamatest.User(s) }

// SystemOf returns the system message vera forwarded, or "".
func SystemOf(r api.ChatRequest) string { return ollamatest.SystemOf(r) }

// RecallsEventually asks vera question as ns, in new conversations, until
// the system message it forwards to up holds want.
func RecallsEventually(t *testing.T, v Vera, up *ollamatest.Server, ns, question, want string) {
	t.Helper()
	up.RecallsEventually(t, v.Address(), ns, question, want)
}

// HeadersFor are the headers Open WebUI sends for its user ns in its chat
// chatID ("": none).
func HeadersFor(ns, chatID string) http.Header {
	h := http.Header{"X-Openwebui-User-Id": {ns}}
	if chatID != "" {
		h.Set("X-OpenWebUI-Chat-Id", chatID)
	}
	return h
}

// OllamaClient is the official Ollama client on vera, as namespace ns.
func OllamaClient(t *testing.T, v Vera, ns string) *api.Client {
	return OllamaClientWith(t, v, http.Header{"X-Openwebui-User-Id": {ns}})
}

// OllamaClientWith is the official Ollama client on vera, sending h with
// every request.
func OllamaClientWith(t *testing.T, v Vera, h http.Header) *api.Client {
	return api.NewClient(MustParse(t, "http://"+v.Address()), &http.Client{Transport: ollamatest.HeaderTransport{Header: h}})
}

// OpenAIOptions are openai-go's options to reach vera's /v1 as ns, in the
// chat chatID ("": none).
func OpenAIOptions(v Vera, ns, chatID string) []option.RequestOption {
	opts := []option.RequestOption{option.WithBaseURL("http://" + v.Address() + "/v1/"), option.WithAPIKey("ollama"), option.WithMaxRetries(0)}
	for k, vs := range HeadersFor(ns, chatID) {
		opts = append(opts, option.WithHeader(k, vs[0]))
	}
	return opts
}

// ChatWhole sends one question as ns to model, non-streamed, on
// /api/chat, requires a 200, and returns the answer's headers and text.
func ChatWhole(t *testing.T, v Vera, ns, model, question string) (http.Header, string) {
	t.Helper()
	body, err := json.Marshal(map[string]any{"model": model, "stream": false,
		"messages": []map[string]string{{"role": "user", "content": question}}})
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, "http://"+v.Address()+"/api/chat", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("X-OpenWebUI-User-Id", ns)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	var out struct{ Message struct{ Content string } }
	require.NoError(t, json.NewDecoder(res.Body).Decode(&out))
	return res.Header, out.Message.Content
}

// MCPSession connects the official Go SDK's client to vera's /mcp,
// sending h with every request.
func MCPSession(t *testing.T, v Vera, h http.Header) *sdk.ClientSession {
	t.Helper()
	c := sdk.NewClient(&sdk.Implementation{Name: "vera-test", Version: "1"}, nil)
	tr := &sdk.StreamableClientTransport{Endpoint: "http://" + v.Address() + "/mcp", DisableStandaloneSSE: true, MaxRetries: -1,
		HTTPClient: &http.Client{Transport: ollamatest.HeaderTransport{Header: h}}}
	s, err := c.Connect(context.Background(), tr, nil)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

// Call calls a tool and decodes its structured content into out.
func Call(t *testing.T, s *sdk.ClientSession, tool string, args map[string]any, out any) *sdk.CallToolResult {
	t.Helper()
	res, err := s.CallTool(context.Background(), &sdk.CallToolParams{Name: tool, Arguments: args})
	require.NoError(t, err, "a tool's failure is a tool error, never a protocol error")
	if out != nil && !res.IsError {
		b, err := json.Marshal(res.StructuredContent)
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(b, out))
	}
	return res
}

// CallOK is Call, requiring the tool to succeed.
func CallOK(t *testing.T, s *sdk.ClientSession, tool string, args map[string]any, out any) {
	t.Helper()
	res := Call(t, s, tool, args, out)
	require.False(t, res.IsError, ToolText(res))
}

// ToolText is the text a tool answered.
func ToolText(res *sdk.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// MustParse parses a URL.
func MustParse(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	require.NoError(t, err)
	return u
}
