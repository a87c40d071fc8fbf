package dialect

import "encoding/json"

// What a conversation needs of a request to place it: its first user
// text, whether it continues a tool loop, and the answer it chains to.

func (r *ChatRequest) FirstUser() string {
	for _, m := range r.Messages {
		if m.Role == "user" {
			return m.Content
		}
	}
	return ""
}

// Only the Responses API links a request to an earlier answer by id.
func (r *ChatRequest) PreviousResponseID() string     { return "" }
func (r *OpenAIRequest) PreviousResponseID() string   { return "" }
func (r *GenerateRequest) PreviousResponseID() string { return "" }
func (r *MessagesRequest) PreviousResponseID() string { return "" }

func (r *ChatRequest) ToolLoop() bool {
	return len(r.Messages) > 0 && r.Messages[len(r.Messages)-1].Role == "tool"
}

func (r *OpenAIRequest) FirstUser() string {
	for _, m := range r.Messages {
		if m.Role == "user" {
			return m.Text()
		}
	}
	return ""
}

func (r *OpenAIRequest) ToolLoop() bool {
	return len(r.Messages) > 0 && r.Messages[len(r.Messages)-1].Role == "tool"
}

// generate has no history: its prompt is the whole conversation.
func (r *GenerateRequest) FirstUser() string { return r.Prompt }
func (r *GenerateRequest) ToolLoop() bool    { return false }

func (r *ResponsesRequest) FirstUser() string {
	for _, it := range r.items {
		if it.Role == "user" {
			return it.text
		}
	}
	return ""
}

// toolLoop: the last input item is a function call's output.
func (r *ResponsesRequest) ToolLoop() bool {
	return len(r.items) > 0 && r.items[len(r.items)-1].Type == "function_call_output"
}

func (r *ResponsesRequest) PreviousResponseID() string {
	var id string
	if raw, ok := r.Extra["previous_response_id"]; ok {
		_ = json.Unmarshal(raw, &id)
	}
	return id
}

func (r *MessagesRequest) FirstUser() string {
	for _, m := range r.Messages {
		if m.Role == "user" && !m.results {
			return m.text
		}
	}
	return ""
}

// toolLoop: the last message is the user's, and carries tool results.
func (r *MessagesRequest) ToolLoop() bool {
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

// Only generate carries no history: its prompt is the whole conversation.
func (r *ChatRequest) History() bool      { return true }
func (r *OpenAIRequest) History() bool    { return true }
func (r *GenerateRequest) History() bool  { return false }
func (r *ResponsesRequest) History() bool { return true }
func (r *MessagesRequest) History() bool  { return true }

// Only the Responses API chains a request to an earlier answer by id,
// carrying none of the history before it.
func (r *ChatRequest) ChainsByID() bool      { return false }
func (r *OpenAIRequest) ChainsByID() bool    { return false }
func (r *GenerateRequest) ChainsByID() bool  { return false }
func (r *ResponsesRequest) ChainsByID() bool { return true }
func (r *MessagesRequest) ChainsByID() bool  { return false }
