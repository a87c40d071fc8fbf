package index

import (
	"math"
	"math/bits"

	"github.com/vera-proxy/vera/memory"
)

// vector ranks the documents passing f by cosine similarity to q (already
// normalised), keeping those at or above threshold.
func (ix *Namespace) vector(f *memory.Filter, q []float32, threshold float64, limit int) []scored {
	if ix.nvec == 0 || len(q) != ix.dim {
		return nil
	}
	sf := compile(f)
	if ix.nvec < exactBelow {
		return ix.exactVector(&sf, q, threshold, limit)
	}
	// Coarse pass on sign bits: fewer differing bits ≈ smaller angle.
	// Large namespaces are scanned in parallel chunks.
	qs := signBits(q, ix.words)
	k := max(limit*oversample, minRescore)
	parts := make([]topK, ix.spreadWorkers())
	for w := range parts {
		parts[w].k = k
	}
	spread(len(ix.meta), hammingPiece, len(parts), nil, func(w, lo, hi int) { ix.hamming(&parts[w], &sf, qs, lo, hi) })
	cand := topK{k: k}
	for _, p := range parts {
		for _, c := range p.h {
			cand.offer(c)
		}
	}
	top := topK{k: limit}
	for _, c := range cand.h {
		s := int(c.slot)
		cs := dot(q, ix.vecs[s*ix.dim:(s+1)*ix.dim])
		if cs >= threshold {
			top.offer(scored{slot: c.slot, score: cs})
		}
	}
	return top.best()
}

// exactVector is vector for a namespace of few vectors: every one scored.
func (ix *Namespace) exactVector(sf *slotFilter, q []float32, threshold float64, limit int) []scored {
	meta := ix.meta
	top := topK{k: limit}
	for s := range meta {
		if m := &meta[s]; !m.vec || !sf.ok(m) {
			continue
		}
		c := dot(q, ix.vecs[s*ix.dim:(s+1)*ix.dim])
		if c >= threshold {
			top.offer(scored{slot: int32(s), score: c})
		}
	}
	return top.best()
}

// hamming offers cand the slots in [lo, hi) whose sign bits differ least
// from qs (score = -distance).
func (ix *Namespace) hamming(cand *topK, sf *slotFilter, qs []uint64, lo, hi int) {
	meta, scan, signs, words := ix.meta, ix.scan, ix.signs, ix.words
	timeless := sf.timeless()
	// The k-th best distance so far: most slots are rejected on it without
	// touching the heap.
	worst := words*64 + 1
	if len(cand.h) == cand.k {
		worst = int(-cand.h[0].score)
	}
	// The distance first: the sign bits are a quarter of the bytes of
	// the slot's meta, which only a close slot has read.
	near := func(s, diff int) {
		if b := scan[s]; b&hasVector == 0 || b&^hasVector&sf.types == 0 || sf.noVector {
			return
		}
		if !timeless && !sf.ok(&meta[s]) {
			return
		}
		cand.offer(scored{slot: int32(s), score: float64(-diff)})
		if len(cand.h) == cand.k {
			worst = int(-cand.h[0].score)
		}
	}
	if words == 1 {
		// Up to 64 dimensions: one word a slot, four slots at a time
		// (one branch for the four, which rarely has a slot to offer).
		q := qs[0]
		ws := signs[lo:hi]
		i := 0
		for ; i+4 <= len(ws); i += 4 {
			w := ws[i : i+4 : i+4]
			d0, d1 := bits.OnesCount64(q^w[0]), bits.OnesCount64(q^w[1])
			d2, d3 := bits.OnesCount64(q^w[2]), bits.OnesCount64(q^w[3])
			if min(d0, d1, d2, d3) < worst {
				for j, diff := range [4]int{d0, d1, d2, d3} {
					if diff < worst {
						near(lo+i+j, diff)
					}
				}
			}
		}
		for ; i < len(ws); i++ {
			if diff := bits.OnesCount64(q ^ ws[i]); diff < worst {
				near(lo+i, diff)
			}
		}
		return
	}
	for s := lo; s < hi; s++ {
		sg := signs[s*words : (s+1)*words]
		sg = sg[:len(qs)]
		diff := 0
		for i, w := range qs {
			diff += bits.OnesCount64(w ^ sg[i])
		}
		if diff < worst {
			near(s, diff)
		}
	}
}

// hammingPiece is how many slots a worker of the Hamming scan claims at
// a time.
const hammingPiece = 32768

// Normalize returns v scaled to unit length (nil for a zero vector): the
// index's vectors, and a query's, are normalised so.
func Normalize(v []float32) []float32 {
	var ss float64
	for _, x := range v {
		ss += float64(x) * float64(x)
	}
	if ss == 0 {
		return nil
	}
	inv := float32(1 / math.Sqrt(ss))
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = x * inv
	}
	return out
}

func dot(a, b []float32) float64 {
	b = b[:len(a)]
	var s0, s1, s2, s3, s4, s5, s6, s7 float32
	i := 0
	for ; i+8 <= len(a); i += 8 {
		x, y := a[i:i+8:i+8], b[i:i+8:i+8]
		s0 += x[0] * y[0]
		s1 += x[1] * y[1]
		s2 += x[2] * y[2]
		s3 += x[3] * y[3]
		s4 += x[4] * y[4]
		s5 += x[5] * y[5]
		s6 += x[6] * y[6]
		s7 += x[7] * y[7]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return float64((s0 + s1) + (s2 + s3) + (s4 + s5) + (s6 + s7))
}

func signBits(v []float32, words int) []uint64 {
	out := make([]uint64, words)
	for i, x := range v {
		if x > 0 {
			out[i/64] |= 1 << (i % 64)
		}
	}
	return out
}
