package qdranttest

import (
	"math"
	"slices"

	"github.com/qdrant/go-client/qdrant"
)

// A point's vectors: checked against the collection's, normalised for
// cosine, and selected for an answer.

// checkVectors validates a point's vectors against the collection.
func (c *collection) checkVectors(dense map[string][]float32, sparse map[string]*qdrant.SparseVector) error {
	for name, v := range dense {
		p, ok := c.dense[name]
		if !ok {
			// RULE: only configured vector names exist.
			// https://qdrant.tech/documentation/concepts/vectors/#named-vectors
			return bad("Not existing vector name error: %s", name)
		}
		if uint64(len(v)) != p.GetSize() {
			// RULE: a vector has the collection's size.
			// https://qdrant.tech/documentation/concepts/collections/#create-a-collection
			return bad("Vector dimension error: expected dim: %d, got %d", p.GetSize(), len(v))
		}
	}
	for name, v := range sparse {
		if _, ok := c.sparse[name]; !ok {
			return bad("Not existing vector name error: %s", name)
		}
		// RULE: a sparse vector has as many values as indices, each index
		// once. https://qdrant.tech/documentation/concepts/vectors/#sparse-vectors
		if len(v.GetIndices()) != len(v.GetValues()) {
			return bad("Sparse vector indices and values must have the same length")
		}
		seen := map[uint32]bool{}
		for _, i := range v.GetIndices() {
			if seen[i] {
				return bad("Sparse vector must have unique indices")
			}
			seen[i] = true
		}
	}
	return nil
}

// vectorsOf splits a point's input vectors into dense and sparse ones.
// RULE: with the Cosine distance, Qdrant stores vectors normalised, and
// returns them so. https://qdrant.tech/documentation/concepts/search/#metrics
func (c *collection) vectorsOf(vs *qdrant.Vectors) (map[string][]float32, map[string]*qdrant.SparseVector) {
	dense, sparse := map[string][]float32{}, map[string]*qdrant.SparseVector{}
	put := func(name string, v *qdrant.Vector) {
		switch {
		case v.GetSparse() != nil:
			sparse[name] = v.GetSparse()
		case v.GetDense() != nil:
			dense[name] = v.GetDense().GetData()
		case len(v.GetData()) > 0 && v.GetIndices() != nil:
			sparse[name] = &qdrant.SparseVector{Indices: v.GetIndices().GetData(), Values: v.GetData()}
		case len(v.GetData()) > 0:
			dense[name] = v.GetData()
		}
	}
	if v := vs.GetVector(); v != nil {
		put("", v)
	}
	for name, v := range vs.GetVectors().GetVectors() {
		put(name, v)
	}
	return dense, sparse
}

func (c *collection) normalise(dense map[string][]float32) {
	for name, v := range dense {
		if c.dense[name].GetDistance() == qdrant.Distance_Cosine {
			dense[name] = unit(v)
		}
	}
}

func unit(v []float32) []float32 {
	var ss float64
	for _, x := range v {
		ss += float64(x) * float64(x)
	}
	out := slices.Clone(v)
	if ss == 0 {
		return out
	}
	inv := 1 / math.Sqrt(ss)
	for i := range out {
		out[i] = float32(float64(out[i]) * inv)
	}
	return out
}

func (p *point) selectVectors(wv *qdrant.WithVectorsSelector) *qdrant.VectorsOutput {
	if wv == nil || !wv.GetEnable() && wv.GetInclude() == nil {
		return nil
	}
	named := map[string]*qdrant.VectorOutput{}
	want := func(n string) bool { return wv.GetEnable() || slices.Contains(wv.GetInclude().GetNames(), n) }
	for n, v := range p.dense {
		if want(n) {
			named[n] = &qdrant.VectorOutput{Vector: &qdrant.VectorOutput_Dense{Dense: &qdrant.DenseVector{Data: v}}}
		}
	}
	for n, v := range p.sparse {
		if want(n) {
			named[n] = &qdrant.VectorOutput{Vector: &qdrant.VectorOutput_Sparse{Sparse: v}}
		}
	}
	return &qdrant.VectorsOutput{VectorsOptions: &qdrant.VectorsOutput_Vectors{Vectors: &qdrant.NamedVectorsOutput{Vectors: named}}}
}
