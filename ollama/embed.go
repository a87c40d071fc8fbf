package ollama

import (
	"context"
	"fmt"
	"net/http"
)

// Embed returns one vector per text, embedded by model in one request
// (POST /api/embed). A text longer than the model's window is truncated to
// it.
func (c *Client) Embed(ctx context.Context, model string, texts []string) ([][]float32, error) {
	if len(texts) == 0 {
		return nil, nil
	}
	var out struct {
		Embeddings [][]float32 `json:"embeddings"`
	}
	body := map[string]any{"model": model, "input": texts, "truncate": true}
	if err := c.do(ctx, http.MethodPost, "/api/embed", body, &out); err != nil {
		return nil, err
	}
	if len(out.Embeddings) != len(texts) {
		return nil, fmt.Errorf("POST /api/embed: %d vectors for %d texts", len(out.Embeddings), len(texts))
	}
	return out.Embeddings, nil
}
