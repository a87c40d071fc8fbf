package text

import (
	"context"
	"hash/fnv"
)

// HashEmbedder is a deterministic, model-free embedder: each term of
// Terms(text) adds to one of Dim buckets. Texts sharing words point the
// same way. It stands in for a real model in tests and in `vera eval`
// runs that must not depend on Ollama; it is not used in production.
type HashEmbedder struct{ Dim int }

// Embed implements Embedder.
func (h HashEmbedder) Embed(_ context.Context, texts []string) ([][]float32, error) {
	dim := h.Dim
	if dim <= 0 {
		dim = 256
	}
	out := make([][]float32, len(texts))
	for i, t := range texts {
		v := make([]float32, dim)
		for _, term := range Terms(t) {
			f := fnv.New32a()
			_, _ = f.Write([]byte(term))
			x := f.Sum32()
			sign := float32(1)
			if x&1 == 1 {
				sign = -1
			}
			v[(x>>1)%uint32(dim)] += sign
		}
		v[0] += 0.01 // never the zero vector
		out[i] = v
	}
	return out, nil
}
