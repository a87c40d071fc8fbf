package curator

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
)

// Model answers the curator's requests.
type Model interface {
	// Complete sends the system prompt and the batch and returns the
	// model's answer text.
	Complete(ctx context.Context, system, user string) (string, error)
}

// OllamaModel is curator_model on Ollama's /api/chat, with the answer
// constrained to Schema (Ollama structured outputs) at low temperature.
type OllamaModel struct {
	base   *url.URL
	name   string
	client *http.Client
	// NumCtx is the context window asked of Ollama; 0 leaves Ollama's.
	NumCtx int
}

// NewOllamaModel returns the curator model name on the Ollama at base.
func NewOllamaModel(base *url.URL, name string, client *http.Client) *OllamaModel {
	return &OllamaModel{base: base, name: name, client: client}
}

// Complete implements Model.
func (m *OllamaModel) Complete(ctx context.Context, system, user string) (string, error) {
	opts := map[string]any{"temperature": 0.1}
	if m.NumCtx > 0 {
		opts["num_ctx"] = m.NumCtx
	}
	body, err := json.Marshal(map[string]any{
		"model": m.name, "stream": false, "format": Schema, "options": opts,
		"messages": []map[string]string{{"role": "system", "content": system}, {"role": "user", "content": user}},
	})
	if err != nil {
		return "", err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, m.base.JoinPath("/api/chat").String(), bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := m.client.Do(req)
	if err != nil {
		return "", fmt.Errorf("curator model %s: %w", m.name, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, 16<<20))
	if err != nil {
		return "", fmt.Errorf("curator model %s: reading the answer: %w", m.name, err)
	}
	var out struct {
		Message struct {
			Content string `json:"content"`
		} `json:"message"`
		Error string `json:"error"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return "", fmt.Errorf("curator model %s: %s: not an Ollama answer: %.200s", m.name, res.Status, b)
	}
	if res.StatusCode != http.StatusOK || out.Error != "" {
		msg := out.Error
		if res.StatusCode == http.StatusNotFound {
			msg += fmt.Sprintf(" (ollama pull %s)", m.name)
		}
		return "", fmt.Errorf("curator model %s: %s: %s", m.name, res.Status, msg)
	}
	return out.Message.Content, nil
}
