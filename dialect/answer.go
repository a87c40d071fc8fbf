package dialect

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
)

// Answer is what a dialect reads of an answer as it streams past: the
// assistant's text, whether it calls tools, and how it ended. The reading
// never alters the answer; a record that cannot be read marks it failed.
type Answer struct {
	Content strings.Builder
	// ToolCalls: the answer calls tools, so an agent's tool loop goes on
	// and its turn is stored with the answer that ends the loop.
	ToolCalls bool
	// Done: the answer's end was read (done:true, [DONE],
	// response.completed, message_stop, or a whole object).
	Done bool
	// Final: the record that ends the answer has been seen, possibly
	// before the event it ends is complete.
	Final  bool
	Failed bool
	// ResponseID is the Responses API's id of the answer.
	ResponseID string
	// PromptTokens is the prompt's size in the model's own tokens, as the
	// upstream reports it (Ollama's prompt_eval_count, OpenAI's
	// usage.prompt_tokens, the Responses API's and Anthropic's
	// usage.input_tokens); 0 when it reports none.
	PromptTokens int
}

// record takes one Ollama NDJSON record, chat or generate: the answer's
// text is message.content (chat) or response (generate); thinking is
// never part of it. It reads the record in place (jsonscan.go): no
// allocation per record.
func (a *Answer) record(line []byte) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 || a.Failed {
		return
	}
	if a.Done || !json.Valid(line) {
		// Anything after done, or garbage: not a clean answer.
		a.Failed = true
		return
	}
	bad, done := false, false
	ok := members(line, func(key, val []byte) {
		switch string(key) {
		case "message":
			if jsonNull(val) {
				return
			}
			bad = bad || !a.message(val)
		case "response":
			bad = bad || !appendJSONString(&a.Content, val)
		case "done":
			switch string(val) {
			case "true":
				done = true
			case "false", "null":
			default:
				bad = true
			}
		case "error":
			// An error record ends the answer in failure.
			bad = bad || !jsonNull(val) && string(val) != `""`
		case "prompt_eval_count":
			a.PromptTokens = jsonCount(val)
		}
	})
	if !ok || bad {
		a.Failed = true
		return
	}
	a.Done = done
	a.Final = a.Final || done
}

// message takes a message object (Ollama's message, OpenAI's delta): its
// content is the answer's, its tool calls go on a tool loop. It reports
// false when msg is not such an object.
func (a *Answer) message(msg []byte) bool {
	ok := true
	return members(msg, func(key, val []byte) {
		switch string(key) {
		case "content":
			ok = ok && appendJSONString(&a.Content, val)
		case "tool_calls":
			a.ToolCalls = a.ToolCalls || present(val)
		}
	}) && ok
}

// ReadWhole takes the body of an answer that was not streamed: one
// record.
func (ndjson) ReadWhole(a *Answer, body []byte) {
	if len(bytes.TrimSpace(body)) > 0 {
		a.record(body)
	}
}

// Read takes one NDJSON record.
func (ndjson) Read(a *Answer, line []byte) { a.record(line) }

// ReadWhole takes a chat completion that was not streamed.
func (OpenAIChat) ReadWhole(a *Answer, body []byte) {
	var res openAIRecord
	if json.Unmarshal(body, &res) != nil || res.Error != nil || len(res.Choices) == 0 || res.Choices[0].Message == nil {
		a.Failed = true
		return
	}
	a.Content.WriteString(res.Choices[0].Message.Content)
	a.ToolCalls = present(res.Choices[0].Message.ToolCalls)
	a.PromptTokens = res.Usage.PromptTokens
	a.Done, a.Final = true, true
}

// present reports whether a JSON value is there and not empty: not
// absent, null, [] or {}.
func present(raw json.RawMessage) bool {
	switch string(bytes.TrimSpace(raw)) {
	case "", "null", "[]", "{}":
		return false
	}
	return true
}

// openAIRecord is the part of an OpenAI chat completion, or of one chunk of
// a streamed one, that the answer needs. Only the first choice is recorded.
type openAIRecord struct {
	Choices []struct {
		Index   int `json:"index"`
		Message *struct {
			Content   string          `json:"content"`
			ToolCalls json.RawMessage `json:"tool_calls"`
		} `json:"message"`
		Delta *struct {
			Content   string          `json:"content"`
			ToolCalls json.RawMessage `json:"tool_calls"`
		} `json:"delta"`
	} `json:"choices"`
	Error any `json:"error"`
	Usage struct {
		PromptTokens int `json:"prompt_tokens"`
	} `json:"usage"`
}

// Read takes the data of one event of a chat completions stream: a
// chunk, or [DONE].
func (OpenAIChat) Read(a *Answer, data []byte) {
	if string(bytes.TrimSpace(data)) == "[DONE]" {
		a.Done = true
		return
	}
	if !json.Valid(data) {
		a.Failed = true
		return
	}
	// A chunk: the first choice's delta, read in place.
	bad := false
	ok := members(data, func(key, val []byte) {
		switch string(key) {
		case "error":
			bad = bad || !jsonNull(val)
		case "usage":
			// The last chunk's, with stream_options.include_usage.
			if n := jsonCount(field(val, "prompt_tokens")); n > 0 {
				a.PromptTokens = n
			}
		case "choices":
			if jsonNull(val) {
				return
			}
			// (A closure that sets bad runs inside each call: the calls
			// come first, then bad is set from what they return.)
			if !elements(val, func(choice []byte) {
				first, delta := true, []byte(nil)
				if !members(choice, func(key, val []byte) {
					switch string(key) {
					case "index":
						// null decodes to 0, and so does -0.
						first = jsonNull(val) || string(bytes.TrimPrefix(val, []byte{'-'})) == "0"
						bad = bad || !jsonInt(val)
					case "delta":
						delta = val
					}
				}) {
					bad = true
				}
				if !first || delta == nil || jsonNull(delta) {
					return
				}
				bad = bad || !a.message(delta)
			}) {
				bad = true
			}
		}
	})
	if !ok || bad {
		a.Failed = true
	}
}

// The Messages API's answer: a stream of typed events ending in
// message_stop, or one message object. Only text blocks are the answer:
// thinking and tool use are never stored.

// Read takes one event of a Messages stream.
func (AnthropicMessages) Read(a *Answer, data []byte) {
	if !json.Valid(data) {
		a.Failed = true
		return
	}
	// Read in place (jsonscan.go): no allocation per event.
	var typ, delta, block, message, usage []byte
	if !members(data, func(key, val []byte) {
		switch string(key) {
		case "type":
			typ = val
		case "usage":
			usage = val
		case "delta":
			delta = val
		case "content_block":
			block = val
		case "message":
			message = val
		}
	}) {
		a.Failed = true
		return
	}
	switch {
	case jsonIs(typ, "content_block_delta"):
		if jsonIs(field(delta, "type"), "text_delta") {
			a.Failed = a.Failed || !appendJSONString(&a.Content, field(delta, "text"))
		}
	case jsonIs(typ, "content_block_start"):
		a.ToolCalls = a.ToolCalls || jsonIs(field(block, "type"), "tool_use")
	case jsonIs(typ, "message_delta"):
		a.ToolCalls = a.ToolCalls || jsonIs(field(delta, "stop_reason"), "tool_use")
		// Ollama's message_start carries an estimate (a quarter of the
		// request's bytes) when the count is not known yet; the final
		// count comes here.
		if n := jsonCount(field(usage, "input_tokens")); n > 0 {
			a.PromptTokens = n
		}
	case jsonIs(typ, "message_start"):
		a.PromptTokens = jsonCount(field(field(message, "usage"), "input_tokens"))
	case jsonIs(typ, "message_stop"):
		a.Done = true
	case jsonIs(typ, "error"):
		a.Failed = true
	}
}

// ReadWhole takes a Messages answer that was not streamed.
func (AnthropicMessages) ReadWhole(a *Answer, body []byte) {
	var res struct {
		Type    string `json:"type"`
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		Usage struct {
			InputTokens int `json:"input_tokens"`
		} `json:"usage"`
	}
	if json.Unmarshal(body, &res) != nil || res.Type == "error" {
		a.Failed = true
		return
	}
	for _, c := range res.Content {
		switch c.Type {
		case "text":
			a.Content.WriteString(c.Text)
		case "tool_use":
			a.ToolCalls = true
		}
	}
	a.PromptTokens = res.Usage.InputTokens
	a.Done, a.Final = true, true
}

// The Responses API's answer: a stream of typed events ending in
// response.completed, or one response object.

// Read takes one event of a Responses stream.
func (OpenAIResponses) Read(a *Answer, data []byte) {
	if !json.Valid(data) {
		a.Failed = true
		return
	}
	// Read in place (jsonscan.go): no allocation per event.
	var typ, delta, item, response []byte
	if !members(data, func(key, val []byte) {
		switch string(key) {
		case "type":
			typ = val
		case "delta":
			delta = val
		case "item":
			item = val
		case "response":
			response = val
		}
	}) {
		a.Failed = true
		return
	}
	switch {
	case jsonIs(typ, "response.output_text.delta"):
		a.Failed = a.Failed || !appendJSONString(&a.Content, delta)
	case jsonIs(typ, "response.output_item.added"), jsonIs(typ, "response.output_item.done"):
		a.ToolCalls = a.ToolCalls || jsonIs(field(item, "type"), "function_call")
	case jsonIs(typ, "response.created"), jsonIs(typ, "response.in_progress"):
		a.ResponseID = jsonText(field(response, "id"))
	case jsonIs(typ, "response.completed"):
		a.Done = true
		a.PromptTokens = jsonCount(field(field(response, "usage"), "input_tokens"))
		if id := jsonText(field(response, "id")); id != "" {
			a.ResponseID = id
		}
	case jsonIs(typ, "error"), jsonIs(typ, "response.failed"), jsonIs(typ, "response.incomplete"):
		a.Failed = true
	}
}

// ReadWhole takes a Responses answer that was not streamed.
func (OpenAIResponses) ReadWhole(a *Answer, body []byte) {
	var res struct {
		ID     string `json:"id"`
		Status string `json:"status"`
		Error  any    `json:"error"`
		Usage  struct {
			InputTokens int `json:"input_tokens"`
		} `json:"usage"`
		Output []struct {
			Type    string `json:"type"`
			Content []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"content"`
		} `json:"output"`
	}
	if json.Unmarshal(body, &res) != nil || res.Error != nil || (res.Status != "" && res.Status != "completed") {
		a.Failed = true
		return
	}
	a.ResponseID = res.ID
	a.PromptTokens = res.Usage.InputTokens
	for _, o := range res.Output {
		a.ToolCalls = a.ToolCalls || o.Type == "function_call"
		if o.Type != "message" {
			continue // reasoning and function calls are not stored
		}
		for _, c := range o.Content {
			if c.Type == "output_text" {
				a.Content.WriteString(c.Text)
			}
		}
	}
	a.Done, a.Final = true, true
}

// jsonCount reads a JSON number as a count: 0 when it is not a
// non-negative integer.
func jsonCount(val []byte) int {
	n, err := strconv.Atoi(string(bytes.TrimSpace(val)))
	if err != nil || n < 0 {
		return 0
	}
	return n
}
