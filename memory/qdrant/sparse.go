package qdrant

import (
	"hash/fnv"
	"slices"

	"github.com/vera-proxy/vera/text"
)

// BM25 for the sparse side. Qdrant multiplies query and document values
// and, with the IDF modifier on the collection, the term's IDF over the
// whole collection: so a document carries each term's saturated,
// length-normalised frequency, and a query carries how often it asks for
// each term. Document length is normalised against a fixed average
// (Qdrant cannot know the average of one namespace at write time).
const (
	bm25K1     = 1.2
	bm25B      = 0.75
	bm25AvgLen = 40.0 // terms in a typical exchange
)

// termIndex maps a term to its sparse index (FNV-1a; collisions between
// two words are rare and only add a little noise to one side's ranking).
func termIndex(t string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(t))
	return h.Sum32()
}

// SparseDoc is a document's sparse BM25 vector, indices ascending.
func SparseDoc(content string) ([]uint32, []float32) {
	terms := text.Terms(content)
	tf := map[uint32]float64{}
	for _, t := range terms {
		tf[termIndex(t)]++
	}
	norm := bm25K1 * (1 - bm25B + bm25B*float64(len(terms))/bm25AvgLen)
	return sparse(tf, func(f float64) float32 { return float32(f * (bm25K1 + 1) / (f + norm)) })
}

// SparseQuery is a query's sparse vector: each term's count.
func SparseQuery(content string) ([]uint32, []float32) {
	tf := map[uint32]float64{}
	for _, t := range text.Terms(content) {
		tf[termIndex(t)]++
	}
	return sparse(tf, func(f float64) float32 { return float32(f) })
}

func sparse(tf map[uint32]float64, value func(float64) float32) ([]uint32, []float32) {
	idx := make([]uint32, 0, len(tf))
	for i := range tf {
		idx = append(idx, i)
	}
	slices.Sort(idx)
	vals := make([]float32, len(idx))
	for i, x := range idx {
		vals[i] = value(tf[x])
	}
	return idx, vals
}
