package ollamatest

import (
	"math"
	"sync"

	"github.com/ollama/ollama/api"
	"github.com/vera-proxy/vera/text"
)

// A model's window, as Ollama keeps it. Ollama counts a prompt in the
// model's own tokens. A chat's messages that do not fit its window are
// dropped by the server, oldest first, its system messages and its last
// message kept (chatPrompt in server/prompt.go: "truncating input
// messages which exceed context length"); a prompt still too long is cut
// by the runner, which keeps its first tokens and its end ("truncating
// input prompt"), and then reports the window as prompt_eval_count.

// Cut is a prompt the fake cut: by the "server" (messages dropped) or the
// "runner" (tokens cut), with the prompt's size in the model's tokens.
type Cut struct {
	By     string
	Prompt int
	Window int
}

// cl100k is the tokenizer the fake's model counts from.
var cl100k = sync.OnceValues(text.NewTokenizer)

// defaultNumCtx is Ollama's window for a request without num_ctx.
const defaultNumCtx = 4096

// windowOf is the window req runs with: its num_ctx, else Ollama's
// default, at most what the model was trained for (ContextLength).
func (f *Server) windowOf(req api.ChatRequest) int {
	trained := f.ContextLength
	if trained == 0 {
		trained = 131072
	}
	n := defaultNumCtx
	if v, ok := req.Options["num_ctx"].(float64); ok && v > 0 {
		n = int(v)
	}
	return min(n, trained)
}

// promptTokens counts req's prompt as the model would (Scale times
// cl100k, and four tokens a message for the template), cuts it as Ollama
// would, records the cut, and returns what Ollama reports as
// prompt_eval_count; 0 when Scale is unset.
func (f *Server) promptTokens(req api.ChatRequest) int {
	if f.Scale <= 0 {
		return 0
	}
	tok, err := cl100k()
	if err != nil {
		return 0
	}
	size := func(m api.Message) int {
		return int(math.Ceil(float64(tok.Count(m.Content))*f.Scale)) + 4
	}
	window := f.windowOf(req)
	total := 0
	for _, m := range req.Messages {
		total += size(m)
	}
	if total <= window {
		return total
	}
	// The server: system messages and the last message stay; the others
	// go, oldest first, until the rest fits.
	kept := 0
	for i, m := range req.Messages {
		if m.Role == "system" || i == len(req.Messages)-1 {
			kept += size(m)
		}
	}
	for i := len(req.Messages) - 2; i >= 0; i-- {
		m := req.Messages[i]
		if m.Role == "system" {
			continue
		}
		if kept+size(m) > window {
			break
		}
		kept += size(m)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if kept < total {
		f.cuts = append(f.cuts, Cut{By: "server", Prompt: total, Window: window})
	}
	if kept > window {
		f.cuts = append(f.cuts, Cut{By: "runner", Prompt: kept, Window: window})
		return window
	}
	return kept
}

// Cuts returns the prompts the fake cut so far.
func (f *Server) Cuts() []Cut {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Cut(nil), f.cuts...)
}
