package dialect

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode"
)

// Tier routing sends a chat to another model: the request is rewritten
// for it, and a /think prefix is taken off the user's text.

// StripThinkPrefix takes "/think" and the space after it off a text.
func StripThinkPrefix(s string) string {
	t := strings.TrimLeftFunc(s, unicode.IsSpace)
	if rest, ok := strings.CutPrefix(t, "/think"); ok && (rest == "" || unicode.IsSpace(rune(rest[0]))) {
		return strings.TrimLeftFunc(rest, unicode.IsSpace)
	}
	return s
}

// retarget sets a request's model and, for a /think prefix (strip), takes
// the prefix off its last user text (through unprefix) and, with think,
// asks the model to think (Ollama's think: true, unless the client set
// think; askThink: the dialect has that field). It edits the decoded
// request, so no other text that happens to hold "/think" is touched.
func retarget(body []byte, model string, strip, think, askThink bool, unprefix func(m map[string]any)) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil || m == nil {
		return nil, fmt.Errorf("the request is not a JSON object")
	}
	m["model"] = model
	if strip {
		unprefix(m)
		if _, set := m["think"]; think && askThink && !set {
			m["think"] = true
		}
	}
	return Marshal(m)
}

// Retarget implements Dialect.
func (OllamaChat) Retarget(body []byte, model string, strip, think bool) ([]byte, error) {
	return retarget(body, model, strip, think, true, unprefixMessages)
}

// Retarget implements Dialect: the prompt is the user text.
func (OllamaGenerate) Retarget(body []byte, model string, strip, think bool) ([]byte, error) {
	return retarget(body, model, strip, think, true, func(m map[string]any) {
		if p, ok := m["prompt"].(string); ok {
			m["prompt"] = StripThinkPrefix(p)
		}
	})
}

// Retarget implements Dialect.
func (OpenAIChat) Retarget(body []byte, model string, strip, think bool) ([]byte, error) {
	return retarget(body, model, strip, think, false, unprefixMessages)
}

// Retarget implements Dialect.
func (AnthropicMessages) Retarget(body []byte, model string, strip, think bool) ([]byte, error) {
	return retarget(body, model, strip, think, false, unprefixMessages)
}

// Retarget implements Dialect: input is a string or a list of items.
func (OpenAIResponses) Retarget(body []byte, model string, strip, think bool) ([]byte, error) {
	return retarget(body, model, strip, think, false, func(m map[string]any) {
		if in, ok := m["input"].(string); ok {
			m["input"] = StripThinkPrefix(in)
		} else if items, ok := m["input"].([]any); ok {
			stripLastUser(items)
		}
	})
}

// unprefixMessages takes the prefix off the last user message of
// messages.
func unprefixMessages(m map[string]any) {
	if msgs, ok := m["messages"].([]any); ok {
		stripLastUser(msgs)
	}
}

// stripLastUser takes the /think prefix off the last user message's text:
// a string content, or its first text part.
func stripLastUser(msgs []any) {
	for i := len(msgs) - 1; i >= 0; i-- {
		msg, ok := msgs[i].(map[string]any)
		if !ok || msg["role"] != "user" {
			continue
		}
		switch c := msg["content"].(type) {
		case string:
			msg["content"] = StripThinkPrefix(c)
			return
		case []any:
			for _, part := range c {
				if p, ok := part.(map[string]any); ok {
					if text, ok := p["text"].(string); ok {
						p["text"] = StripThinkPrefix(text)
						return
					}
				}
			}
		}
	}
}
