package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/ollama/ollama/api"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/ollama/ollamatest"
	"github.com/vera-proxy/vera/tests/veratest"
)

// msg is a chat message as a test client keeps its history.
type msg struct{ role, text string }

// convo is one conversation through one dialect's official client.
type convo struct {
	name string
	path string // the route the fake receives the chat on
	// send sends history (and the answer before, for chaining by
	// previous_response_id) as ns in the chat chatID ("" : none) and
	// returns the answer text and its Responses id.
	send func(t *testing.T, p *veratest.InProcess, ns, chatID string, history []msg, prevID string) (string, string)
	// chained: only the new message goes out, linked by
	// previous_response_id.
	chained bool
}

var conversationDialects = []convo{
	{name: "ollama chat", path: "/api/chat", send: sendOllama},
	{name: "openai chat", path: "/v1/chat/completions", send: sendOpenAI},
	{name: "responses", path: "/v1/responses", send: sendResponses},
	{name: "anthropic messages", path: "/v1/messages", send: sendAnthropic},
}

func sendOllama(t *testing.T, p *veratest.InProcess, ns, chatID string, history []msg, _ string) (string, string) {
	var msgs []api.Message
	for _, m := range history {
		msgs = append(msgs, api.Message{Role: m.role, Content: m.text})
	}
	return ollamatest.ChatWith(t, p.Addr, veratest.HeadersFor(ns, chatID), msgs...), ""
}

func sendOpenAI(t *testing.T, p *veratest.InProcess, ns, chatID string, history []msg, _ string) (string, string) {
	c := openai.NewClient(veratest.OpenAIOptions(p, ns, chatID)...)
	res, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "llama3.2", Messages: openAIMessages(history)})
	require.NoError(t, err)
	return res.Choices[0].Message.Content, ""
}

func openAIMessages(history []msg) []openai.ChatCompletionMessageParamUnion {
	var msgs []openai.ChatCompletionMessageParamUnion
	for _, m := range history {
		if m.role == "user" {
			msgs = append(msgs, openai.UserMessage(m.text))
		} else {
			msgs = append(msgs, openai.AssistantMessage(m.text))
		}
	}
	return msgs
}

func sendResponses(t *testing.T, p *veratest.InProcess, ns, chatID string, history []msg, prevID string) (string, string) {
	c := openai.NewClient(veratest.OpenAIOptions(p, ns, chatID)...)
	params := responses.ResponseNewParams{Model: "llama3.2"}
	var items responses.ResponseInputParam
	for _, m := range history {
		role := responses.EasyInputMessageRoleUser
		if m.role == "assistant" {
			role = responses.EasyInputMessageRoleAssistant
		}
		items = append(items, responses.ResponseInputItemParamOfMessage(m.text, role))
	}
	params.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: items}
	if prevID != "" {
		params.PreviousResponseID = openai.String(prevID)
	}
	res, err := c.Responses.New(context.Background(), params)
	require.NoError(t, err)
	return res.OutputText(), res.ID
}

func sendAnthropic(t *testing.T, p *veratest.InProcess, ns, chatID string, history []msg, _ string) (string, string) {
	opts := []aoption.RequestOption{aoption.WithBaseURL("http://" + p.Addr + "/"), aoption.WithAPIKey("ollama"), aoption.WithMaxRetries(0)}
	for k, v := range veratest.HeadersFor(ns, chatID) {
		opts = append(opts, aoption.WithHeader(k, v[0]))
	}
	c := anthropic.NewClient(opts...)
	var msgs []anthropic.MessageParam
	for _, m := range history {
		if m.role == "user" {
			msgs = append(msgs, anthropic.NewUserMessage(anthropic.NewTextBlock(m.text)))
		} else {
			msgs = append(msgs, anthropic.NewAssistantMessage(anthropic.NewTextBlock(m.text)))
		}
	}
	res, err := c.Messages.New(context.Background(), anthropic.MessageNewParams{Model: "llama3.2", MaxTokens: 256, Messages: msgs})
	require.NoError(t, err)
	var out strings.Builder
	for _, b := range res.Content {
		if b.Type == "text" {
			out.WriteString(b.Text)
		}
	}
	return out.String(), ""
}

// render lays out a forwarded chat body as a template would: each message
// in order, its role then its text.
func render(t *testing.T, path string, body []byte) string {
	t.Helper()
	var msgs []msg
	var req struct {
		System       json.RawMessage `json:"system"`
		Instructions string          `json:"instructions"`
		Input        json.RawMessage `json:"input"`
		Messages     []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	require.NoError(t, json.Unmarshal(body, &req))
	switch path {
	case "/v1/responses":
		if req.Instructions != "" {
			msgs = append(msgs, msg{"system", req.Instructions})
		}
		var s string
		if json.Unmarshal(req.Input, &s) == nil {
			msgs = append(msgs, msg{"user", s})
			break
		}
		var items []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		}
		require.NoError(t, json.Unmarshal(req.Input, &items))
		for _, it := range items {
			msgs = append(msgs, msg{it.Role, contentText(t, it.Content)})
		}
	case "/v1/messages":
		if len(req.System) > 0 {
			msgs = append(msgs, msg{"system", contentText(t, req.System)})
		}
		fallthrough
	default:
		for _, m := range req.Messages {
			msgs = append(msgs, msg{m.Role, contentText(t, m.Content)})
		}
	}
	var b strings.Builder
	for _, m := range msgs {
		fmt.Fprintf(&b, "<|%s|>%s<|end|>", m.role, m.text)
	}
	return b.String()
}

// contentText reads a content that is a string or an array of text parts.
func contentText(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var s string
	if len(raw) == 0 || string(raw) == "null" || json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	require.NoError(t, json.Unmarshal(raw, &parts), string(raw))
	var out []string
	for _, p := range parts {
		out = append(out, p.Text)
	}
	return strings.Join(out, "\n\n")
}
