package proxy

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/vera-proxy/vera/memory/conversation"
)

// temporaryChat opens the chat id of every temporary chat of Open WebUI.
const temporaryChat = "local:"

// chatIDOf reads the chat id a request carries in header.
func chatIDOf(r *http.Request, header string) string {
	return strings.TrimSpace(r.Header.Get(header))
}

// threadOf reads a request's thread, given its chat id.
func threadOf(chatID string, req chatRequest) conversation.Thread {
	if strings.HasPrefix(chatID, temporaryChat) {
		// Open WebUI's temporary chats are all "local:" + the browser
		// tab's socket id: it names a tab, not a conversation.
		chatID = ""
	}
	return conversation.Thread{
		ChatID:             chatID,
		PreviousResponseID: req.previousResponseID(),
		FirstUser:          req.firstUser(),
		ToolLoop:           req.toolLoop(),
	}
}

func (r *ChatRequest) firstUser() string {
	for _, m := range r.Messages {
		if m.Role == "user" {
			return m.Content
		}
	}
	return ""
}

// Only the Responses API links a request to an earlier answer by id.
func (r *ChatRequest) previousResponseID() string     { return "" }
func (r *OpenAIRequest) previousResponseID() string   { return "" }
func (r *GenerateRequest) previousResponseID() string { return "" }
func (r *MessagesRequest) previousResponseID() string { return "" }

func (r *ChatRequest) toolLoop() bool {
	return len(r.Messages) > 0 && r.Messages[len(r.Messages)-1].Role == "tool"
}

func (r *OpenAIRequest) firstUser() string {
	for _, m := range r.Messages {
		if m.Role == "user" {
			return m.Text()
		}
	}
	return ""
}

func (r *OpenAIRequest) toolLoop() bool {
	return len(r.Messages) > 0 && r.Messages[len(r.Messages)-1].Role == "tool"
}

// generate has no history: its prompt is the whole conversation.
func (r *GenerateRequest) firstUser() string { return r.Prompt }
func (r *GenerateRequest) toolLoop() bool    { return false }

func (r *ResponsesRequest) firstUser() string {
	for _, it := range r.items {
		if it.Role == "user" {
			return it.text
		}
	}
	return ""
}

// toolLoop: the last input item is a function call's output.
func (r *ResponsesRequest) toolLoop() bool {
	return len(r.items) > 0 && r.items[len(r.items)-1].Type == "function_call_output"
}

func (r *ResponsesRequest) previousResponseID() string {
	var id string
	if raw, ok := r.Extra["previous_response_id"]; ok {
		_ = json.Unmarshal(raw, &id)
	}
	return id
}

func (r *MessagesRequest) firstUser() string {
	for _, m := range r.Messages {
		if m.Role == "user" && !m.results {
			return m.text
		}
	}
	return ""
}

// toolLoop: the last message is the user's, and carries tool results.
func (r *MessagesRequest) toolLoop() bool {
	return len(r.Messages) > 0 && r.Messages[len(r.Messages)-1].results
}

// hasToolResult reports whether an Anthropic message content holds a
// tool_result block.
func hasToolResult(content json.RawMessage) bool {
	var blocks []struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(content, &blocks) != nil {
		return false
	}
	for _, b := range blocks {
		if b.Type == "tool_result" {
			return true
		}
	}
	return false
}
