package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vera-proxy/vera/memory"
)

// How long answers of /api/show (a model's settings change only when it is
// re-created) and /api/ps (what is loaded, and with which window) are
// trusted.
const (
	showTTL = 5 * time.Minute
	psTTL   = 10 * time.Second
)

// contextWindows finds the context window Ollama will give a model, so
// injected memory never pushes a prompt past it. Ollama picks, in order:
// the request's options.num_ctx, the model's own num_ctx parameter, the
// server's OLLAMA_CONTEXT_LENGTH or its VRAM-based default, capped by what
// the model was trained for. vera sees the first two directly (the request
// and /api/show), and the running window of a loaded model in /api/ps;
// otherwise it assumes 4096 (Ollama's default below 24 GiB of VRAM), capped
// by the model's trained length.
type contextWindows struct {
	client *http.Client
	base   func(path string) string

	mu   sync.Mutex
	show map[string]showInfo
	ps   map[string]int
	psAt time.Time
}

type showInfo struct {
	numCtx, trained int
	// system is the Modelfile's SYSTEM prompt.
	system string
	at     time.Time
}

func (w *contextWindows) lookup(ctx context.Context, model string) int {
	show := w.showInfo(ctx, model)
	if show.numCtx > 0 {
		return show.numCtx
	}
	if n := w.running(ctx, model); n > 0 {
		return n
	}
	n := memory.DefaultContextLength
	if show.trained > 0 {
		n = min(n, show.trained)
	}
	return n
}

func (w *contextWindows) post(ctx context.Context, method, path string, body any, out any) bool {
	var rd *bytes.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	} else {
		rd = bytes.NewReader(nil)
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, w.base(path), rd)
	if err != nil {
		return false
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := w.client.Do(req)
	if err != nil {
		return false
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return false
	}
	return json.NewDecoder(res.Body).Decode(out) == nil
}

func (w *contextWindows) showInfo(ctx context.Context, model string) showInfo {
	w.mu.Lock()
	if w.show == nil {
		w.show = map[string]showInfo{}
	}
	if s, ok := w.show[model]; ok && time.Since(s.at) < showTTL {
		w.mu.Unlock()
		return s
	}
	w.mu.Unlock()
	var out struct {
		Parameters string                     `json:"parameters"`
		ModelInfo  map[string]json.RawMessage `json:"model_info"`
		System     string                     `json:"system"`
	}
	s := showInfo{at: time.Now()}
	if w.post(ctx, http.MethodPost, "/api/show", map[string]string{"model": model}, &out) {
		s.numCtx = parseNumCtx(out.Parameters)
		s.system = out.System
		for k, v := range out.ModelInfo {
			if strings.HasSuffix(k, ".context_length") {
				n, _ := strconv.Atoi(string(v))
				s.trained = n
			}
		}
	} else {
		s.at = time.Now().Add(-showTTL + 30*time.Second) // retry soon
	}
	w.mu.Lock()
	w.show[model] = s
	w.mu.Unlock()
	return s
}

// parseNumCtx reads "num_ctx N" from /api/show's parameters text.
func parseNumCtx(params string) int {
	for _, line := range strings.Split(params, "\n") {
		f := strings.Fields(line)
		if len(f) == 2 && f[0] == "num_ctx" {
			n, err := strconv.Atoi(f[1])
			if err == nil && n > 0 {
				return n
			}
		}
	}
	return 0
}

func (w *contextWindows) running(ctx context.Context, model string) int {
	w.mu.Lock()
	if time.Since(w.psAt) < psTTL {
		n := lookupTag(w.ps, model)
		w.mu.Unlock()
		return n
	}
	w.mu.Unlock()
	var out struct {
		Models []struct {
			Name          string `json:"name"`
			Model         string `json:"model"`
			ContextLength int    `json:"context_length"`
		} `json:"models"`
	}
	ps := map[string]int{}
	if w.post(ctx, http.MethodGet, "/api/ps", nil, &out) {
		for _, m := range out.Models {
			ps[m.Name], ps[m.Model] = m.ContextLength, m.ContextLength
		}
	}
	w.mu.Lock()
	w.ps, w.psAt = ps, time.Now()
	w.mu.Unlock()
	return lookupTag(ps, model)
}

// lookupTag finds model in m, also as "model:latest", which is how Ollama
// names an untagged model.
func lookupTag(m map[string]int, model string) int {
	if n, ok := m[model]; ok {
		return n
	}
	if !strings.Contains(model, ":") {
		return m[model+":latest"]
	}
	return 0
}

// requestOptions reads what the builder needs from a request's options.
func requestOptions(extra map[string]json.RawMessage) (numCtx, numPredict int) {
	var o struct {
		NumCtx     int `json:"num_ctx"`
		NumPredict int `json:"num_predict"`
	}
	if raw, ok := extra["options"]; ok {
		_ = json.Unmarshal(raw, &o)
	}
	return o.NumCtx, o.NumPredict
}
