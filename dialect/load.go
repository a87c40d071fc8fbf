package dialect

import "strings"

// LoadAnswer is Ollama's answer to a load or unload call (`ollama run`
// preloads with a chat of no messages or an empty prompt, `ollama stop`
// unloads with keep_alive 0), for a model vera answers for itself; reason
// is "load" or "unload" and now the answer's created_at. ok is false when
// r is not such a call.
func LoadAnswer(r Request, reason, now string) (answer map[string]any, ok bool) {
	switch r := r.(type) {
	case *ChatRequest:
		if len(r.Messages) > 0 {
			return nil, false
		}
		return map[string]any{"model": r.Model, "created_at": now, "message": map[string]any{"role": "assistant", "content": ""}, "done_reason": reason, "done": true}, true
	case *GenerateRequest:
		if strings.TrimSpace(r.Prompt) != "" {
			return nil, false
		}
		return map[string]any{"model": r.Model, "created_at": now, "response": "", "done_reason": reason, "done": true}, true
	}
	return nil, false
}
