package memory

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// Embedder turns texts into vectors, one per text, all of one dimension.
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// OllamaEmbedder embeds through Ollama's /api/embed, batching all texts of
// a call into one request.
type OllamaEmbedder struct {
	base   *url.URL
	model  string
	client *http.Client
}

// NewOllamaEmbedder embeds with model on the Ollama at base.
func NewOllamaEmbedder(base *url.URL, model string, client *http.Client) *OllamaEmbedder {
	return &OllamaEmbedder{base: base, model: model, client: client}
}

// Model returns the embedding model's name.
func (e *OllamaEmbedder) Model() string { return e.model }

// Embed returns one vector per text. Every failure wraps ErrUnavailable:
// the caller degrades to lexical memory and retries later.
func (e *OllamaEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if len(texts) == 0 {
		return nil, nil
	}
	body, err := json.Marshal(map[string]any{"model": e.model, "input": texts, "truncate": true})
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.base.JoinPath("/api/embed").String(), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := e.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: embedder: %v", ErrUnavailable, err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, 256<<20))
	if err != nil {
		return nil, fmt.Errorf("%w: embedder: reading answer: %v", ErrUnavailable, err)
	}
	if res.StatusCode != http.StatusOK {
		var e2 struct {
			Error string `json:"error"`
		}
		_ = json.Unmarshal(raw, &e2)
		msg := strings.TrimSpace(e2.Error)
		if msg == "" {
			msg = strings.TrimSpace(string(raw))
		}
		if res.StatusCode == http.StatusNotFound {
			return nil, fmt.Errorf("%w: embedding model %q not found on Ollama (ollama pull %s): %s", ErrUnavailable, e.model, e.model, msg)
		}
		return nil, fmt.Errorf("%w: embedder: %s: %s", ErrUnavailable, res.Status, msg)
	}
	var out struct {
		Embeddings [][]float32 `json:"embeddings"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, fmt.Errorf("%w: embedder: invalid answer: %v", ErrUnavailable, err)
	}
	if len(out.Embeddings) != len(texts) {
		return nil, fmt.Errorf("%w: embedder: %d vectors for %d texts", ErrUnavailable, len(out.Embeddings), len(texts))
	}
	dim := len(out.Embeddings[0])
	for _, v := range out.Embeddings {
		if len(v) == 0 || len(v) != dim {
			return nil, fmt.Errorf("%w: embedder: vectors of unequal or zero size", ErrUnavailable)
		}
	}
	return out.Embeddings, nil
}

// Probe asks the model for one vector and returns its dimension: the size
// is learnt from the model, not looked up in a table.
func Probe(ctx context.Context, e Embedder) (int, error) {
	v, err := e.Embed(ctx, []string{"dimension probe"})
	if err != nil {
		return 0, err
	}
	if len(v) != 1 {
		return 0, errors.New("embedder: no vector for the probe")
	}
	return len(v[0]), nil
}
