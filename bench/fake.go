package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// fakeOllama answers Ollama's API at once, so that what is measured is
// the path to it: version, tags, show, embed (constant time, reported
// apart), and chat, whole or streamed. A streamed chat sends `chunks`
// records `gap` apart; each carries the time it was sent (ns), so the
// client can tell what the path added to each.
type fakeOllama struct {
	chunks int
	gap    time.Duration
	embed  time.Duration // how long an embedding takes

	mu   sync.Mutex
	last []byte // the last /api/chat body, served at /bench/last
}

func (f *fakeOllama) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/api/version":
		writeJSON(w, map[string]string{"version": "0.24.0"})
	case "/api/tags":
		writeJSON(w, map[string]any{"models": []map[string]any{
			{"name": "llama3.2:latest", "model": "llama3.2:latest", "size": 2019393189, "digest": "a80c4f17acd5", "details": map[string]any{"family": "llama", "parameter_size": "3.2B"}},
			{"name": "nomic-embed-text:latest", "model": "nomic-embed-text:latest", "size": 274302450, "digest": "0a109f422b47", "details": map[string]any{"family": "nomic-bert"}},
		}})
	case "/api/show":
		io.Copy(io.Discard, r.Body)
		writeJSON(w, map[string]any{"modelfile": "FROM llama3.2", "template": "{{ .Prompt }}", "details": map[string]any{"family": "llama"},
			"model_info": map[string]any{"llama.context_length": 131072}, "capabilities": []string{"completion", "tools"}})
	case "/api/embed":
		var req struct {
			Input any `json:"input"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		n := 1
		if in, ok := req.Input.([]any); ok {
			n = len(in)
		}
		time.Sleep(f.embed)
		vecs := make([][]float32, n)
		for i := range vecs {
			vecs[i] = make([]float32, 64)
			vecs[i][i%64] = 1
		}
		writeJSON(w, map[string]any{"model": "nomic-embed-text", "embeddings": vecs})
	case "/bench/last":
		f.mu.Lock()
		defer f.mu.Unlock()
		w.Write(f.last)
	case "/api/generate", "/v1/chat/completions", "/v1/responses", "/v1/messages":
		// The other dialects, answered whole: memory's figures through
		// each of them.
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.last = body
		f.mu.Unlock()
		writeJSON(w, wholeAnswer(r.URL.Path))
	case "/api/chat":
		var req struct {
			Stream *bool `json:"stream"`
		}
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.last = body
		f.mu.Unlock()
		json.Unmarshal(body, &req)
		if req.Stream != nil && !*req.Stream {
			writeJSON(w, map[string]any{"model": "llama3.2", "created_at": time.Now().UTC(), "message": map[string]string{"role": "assistant", "content": "Fine, thanks."},
				"done": true, "done_reason": "stop", "eval_count": 3, "prompt_eval_count": 20})
			return
		}
		w.Header().Set("Content-Type", "application/x-ndjson")
		fl, _ := w.(http.Flusher)
		for i := range f.chunks {
			if i > 0 && f.gap > 0 {
				time.Sleep(f.gap)
			}
			fmt.Fprintf(w, `{"model":"llama3.2","message":{"role":"assistant","content":"t%d "},"done":false,"sent":%s}`+"\n", i, strconv.FormatInt(time.Now().UnixNano(), 10))
			if fl != nil {
				fl.Flush()
			}
		}
		fmt.Fprintf(w, `{"model":"llama3.2","message":{"role":"assistant","content":""},"done":true,"done_reason":"stop","eval_count":%d,"sent":%d}`+"\n", f.chunks, time.Now().UnixNano())
	default:
		http.NotFound(w, r)
	}
}

// wholeAnswer is a short non-streamed answer in the shape of the dialect
// served at path.
func wholeAnswer(path string) any {
	const text = "Fine, thanks."
	switch path {
	case "/api/generate":
		return map[string]any{"model": "llama3.2", "created_at": time.Now().UTC(), "response": text, "done": true, "done_reason": "stop", "eval_count": 3, "prompt_eval_count": 20}
	case "/v1/chat/completions":
		return map[string]any{"id": "chatcmpl-1", "object": "chat.completion", "created": time.Now().Unix(), "model": "llama3.2",
			"choices": []any{map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": text}, "finish_reason": "stop"}},
			"usage":   map[string]int{"prompt_tokens": 20, "completion_tokens": 3, "total_tokens": 23}}
	case "/v1/responses":
		return map[string]any{"id": "resp_1", "object": "response", "created_at": time.Now().Unix(), "status": "completed", "model": "llama3.2",
			"output": []any{map[string]any{"type": "message", "id": "msg_1", "status": "completed", "role": "assistant",
				"content": []any{map[string]any{"type": "output_text", "text": text, "annotations": []any{}}}}}}
	default: // /v1/messages
		return map[string]any{"id": "msg_1", "type": "message", "role": "assistant", "model": "llama3.2",
			"content": []any{map[string]any{"type": "text", "text": text}}, "stop_reason": "end_turn",
			"usage": map[string]int{"input_tokens": 20, "output_tokens": 3}}
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	json.NewEncoder(w).Encode(v)
}
