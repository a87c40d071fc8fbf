package memory

import (
	"context"
	"errors"
	"fmt"

	"github.com/vera-proxy/vera/ollama"
)

// Embedder turns texts into vectors, one per text, all of one dimension.
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

var _ Embedder = (*OllamaEmbedder)(nil)

// OllamaEmbedder embeds with one model on Ollama, batching all texts of a
// call into one request.
type OllamaEmbedder struct {
	client *ollama.Client
	model  string
}

// NewEmbedder embeds with model on the Ollama behind client.
func NewEmbedder(client *ollama.Client, model string) *OllamaEmbedder {
	return &OllamaEmbedder{client: client, model: model}
}

// Model returns the embedding model's name.
func (e *OllamaEmbedder) Model() string { return e.model }

// Embed returns one vector per text. Every failure wraps ErrUnavailable:
// the caller degrades to lexical memory and retries later.
func (e *OllamaEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if len(texts) == 0 {
		return nil, nil
	}
	vs, err := e.client.Embed(ctx, e.model, texts)
	if ollama.IsNotFound(err) {
		return nil, fmt.Errorf("%w: embedding model %q not found on Ollama (ollama pull %s): %w", ErrUnavailable, e.model, e.model, err)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: embedder: %w", ErrUnavailable, err)
	}
	dim := len(vs[0])
	for _, v := range vs {
		if len(v) == 0 || len(v) != dim {
			return nil, fmt.Errorf("%w: embedder: vectors of unequal or zero size", ErrUnavailable)
		}
	}
	return vs, nil
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
