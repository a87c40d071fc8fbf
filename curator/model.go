package curator

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/vera-proxy/vera/ollama"
)

// Model answers the curator's requests.
type Model interface {
	// Complete sends the system prompt and the batch and returns the
	// model's answer text, which schema (a JSON schema) describes.
	Complete(ctx context.Context, system, user string, schema json.RawMessage) (string, error)
}

var _ Model = (*OllamaModel)(nil)

// OllamaModel is curator_model on Ollama's /api/chat, with the answer
// constrained to the schema asked (Ollama structured outputs) at low temperature.
type OllamaModel struct {
	client *ollama.Client
	name   string
	// NumCtx is the context window asked of Ollama; 0 leaves Ollama's.
	NumCtx int
}

// NewOllamaModel returns the curator model name on the Ollama behind
// client.
func NewOllamaModel(client *ollama.Client, name string) *OllamaModel {
	return &OllamaModel{client: client, name: name}
}

// Complete implements Model.
func (m *OllamaModel) Complete(ctx context.Context, system, user string, schema json.RawMessage) (string, error) {
	opts := ollama.Options{"temperature": 0.1}
	if m.NumCtx > 0 {
		opts["num_ctx"] = m.NumCtx
	}
	res, err := m.client.Chat(ctx, ollama.ChatRequest{
		Model:    m.name,
		Messages: []ollama.Message{{Role: "system", Content: system}, {Role: "user", Content: user}},
		Format:   schema,
		Options:  opts,
	})
	if ollama.IsNotFound(err) {
		return "", fmt.Errorf("curator model %s: %w (ollama pull %s)", m.name, err, m.name)
	}
	if err != nil {
		return "", fmt.Errorf("curator model %s: %w", m.name, err)
	}
	return res.Message.Content, nil
}
