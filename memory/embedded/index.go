package embedded

import (
	"container/heap"
	"math"
	"math/bits"
	"slices"
	"sync"

	"github.com/vera-proxy/vera/memory"
)

// BM25 parameters (Robertson's usual values).
const (
	bm25K1 = 1.2
	bm25B  = 0.75
	// rrfK is the rank constant of reciprocal rank fusion, as in Qdrant's
	// and Elasticsearch's hybrid search.
	rrfK = 60
	// exactBelow: namespaces with fewer vectors than this are searched
	// exactly; larger ones are first ranked by the Hamming distance of
	// sign bits, then the best candidates are re-scored exactly.
	exactBelow = 4096
	// oversample is how many binary candidates are re-scored per result.
	oversample = 10
	minRescore = 400
)

// index is the in-memory search side of one namespace: an inverted index
// for BM25 and the normalised vectors with their sign bits. SQLite is the
// source of truth; the index is rebuilt from it at open.
type index struct {
	docs  []doc
	slot  map[string]int32 // id → slot
	live  int
	terms map[string]int32 // term → term id
	post  [][]posting      // term id → postings, by ascending slot
	total int64            // sum of live doc lengths, in terms

	dim   int
	words int       // uint64 words of sign bits per vector
	vecs  []float32 // slot*dim, normalised
	signs []uint64  // slot*words
	nvec  int
}

type doc struct {
	mem    memory.Memory // Vector is nil here; it lives in vecs
	alive  bool
	hasVec bool
	length int32
	terms  []int32 // distinct term ids, for removal
}

type posting struct {
	slot int32
	tf   int32
}

func newIndex() *index {
	return &index{slot: map[string]int32{}, terms: map[string]int32{}}
}

// add indexes m (replacing any memory with the same id). vec is the
// normalised vector or nil.
func (ix *index) add(m memory.Memory, vec []float32) {
	ix.remove(m.ID)
	m.Vector = nil
	s := int32(len(ix.docs))
	tf := map[int32]int32{}
	n := int32(0)
	for _, t := range memory.Terms(m.Text) {
		id, ok := ix.terms[t]
		if !ok {
			id = int32(len(ix.post))
			ix.terms[t] = id
			ix.post = append(ix.post, nil)
		}
		tf[id]++
		n++
	}
	d := doc{mem: m, alive: true, length: n, terms: make([]int32, 0, len(tf))}
	for id, c := range tf {
		ix.post[id] = append(ix.post[id], posting{slot: s, tf: c})
		d.terms = append(d.terms, id)
	}
	ix.total += int64(n)
	ix.live++
	if vec != nil && (ix.dim == 0 || len(vec) == ix.dim) {
		if ix.dim == 0 {
			ix.dim = len(vec)
			ix.words = (ix.dim + 63) / 64
			ix.vecs = make([]float32, len(ix.docs)*ix.dim)
			ix.signs = make([]uint64, len(ix.docs)*ix.words)
		}
		d.hasVec = true
		ix.nvec++
	}
	ix.docs = append(ix.docs, d)
	ix.slot[m.ID] = s
	if ix.dim > 0 {
		if d.hasVec {
			ix.vecs = append(ix.vecs, vec...)
			ix.signs = append(ix.signs, signBits(vec, ix.words)...)
		} else {
			ix.vecs = append(ix.vecs, make([]float32, ix.dim)...)
			ix.signs = append(ix.signs, make([]uint64, ix.words)...)
		}
	}
}

// remove drops the memory with that id, if indexed.
func (ix *index) remove(id string) {
	s, ok := ix.slot[id]
	if !ok {
		return
	}
	d := &ix.docs[s]
	for _, t := range d.terms {
		p := ix.post[t]
		i, found := slices.BinarySearchFunc(p, s, func(p posting, s int32) int { return int(p.slot - s) })
		if found {
			ix.post[t] = slices.Delete(p, i, i+1)
		}
	}
	ix.total -= int64(d.length)
	ix.live--
	if d.hasVec {
		ix.nvec--
	}
	*d = doc{}
	delete(ix.slot, id)
	if dead := len(ix.docs) - ix.live; dead > 1024 && dead > ix.live {
		ix.compact()
	}
}

// compact renumbers slots to drop removed documents.
func (ix *index) compact() {
	remap := make([]int32, len(ix.docs))
	docs := make([]doc, 0, ix.live)
	var vecs []float32
	var signs []uint64
	for s, d := range ix.docs {
		if !d.alive {
			remap[s] = -1
			continue
		}
		remap[s] = int32(len(docs))
		docs = append(docs, d)
		if ix.dim > 0 {
			vecs = append(vecs, ix.vecs[s*ix.dim:(s+1)*ix.dim]...)
			signs = append(signs, ix.signs[s*ix.words:(s+1)*ix.words]...)
		}
	}
	for t, p := range ix.post {
		q := p[:0]
		for _, e := range p {
			if r := remap[e.slot]; r >= 0 {
				q = append(q, posting{slot: r, tf: e.tf})
			}
		}
		ix.post[t] = q
	}
	for id, s := range ix.slot {
		ix.slot[id] = remap[s]
	}
	ix.docs, ix.vecs, ix.signs = docs, vecs, signs
}

// scored is a candidate with a score, for top-k selection.
type scored struct {
	slot  int32
	score float64
}

// topK keeps the k highest scores (a min-heap).
type topK struct {
	k int
	h []scored
}

func (t *topK) Len() int           { return len(t.h) }
func (t *topK) Less(i, j int) bool { return t.h[i].score < t.h[j].score }
func (t *topK) Swap(i, j int)      { t.h[i], t.h[j] = t.h[j], t.h[i] }
func (t *topK) Push(x any)         { t.h = append(t.h, x.(scored)) }
func (t *topK) Pop() any           { x := t.h[len(t.h)-1]; t.h = t.h[:len(t.h)-1]; return x }

func (t *topK) offer(s scored) {
	if len(t.h) < t.k {
		heap.Push(t, s)
	} else if s.score > t.h[0].score {
		t.h[0] = s
		heap.Fix(t, 0)
	}
}

// best returns the kept candidates, best first.
func (t *topK) best() []scored {
	out := slices.Clone(t.h)
	slices.SortFunc(out, func(a, b scored) int {
		switch {
		case a.score > b.score:
			return -1
		case a.score < b.score:
			return 1
		}
		return int(a.slot - b.slot)
	})
	return out
}

var scorePool = sync.Pool{New: func() any { return new([]float32) }}

// lexical ranks the documents passing f by BM25 over the query terms.
func (ix *index) lexical(f *memory.Filter, text string, limit int) []scored {
	qt := memory.Terms(text)
	if len(qt) == 0 || ix.live == 0 {
		return nil
	}
	weights := map[int32]float64{}
	for _, t := range qt {
		if id, ok := ix.terms[t]; ok && len(ix.post[id]) > 0 {
			weights[id]++
		}
	}
	if len(weights) == 0 {
		return nil
	}
	bufp := scorePool.Get().(*[]float32)
	defer scorePool.Put(bufp)
	acc := *bufp
	if cap(acc) < len(ix.docs) {
		acc = make([]float32, len(ix.docs))
		*bufp = acc
	}
	acc = acc[:len(ix.docs)]
	var touched []int32
	n := float64(ix.live)
	avg := float64(ix.total) / n
	if avg == 0 {
		avg = 1
	}
	for id, w := range weights {
		p := ix.post[id]
		df := float64(len(p))
		idf := math.Log(1 + (n-df+0.5)/(df+0.5))
		for _, e := range p {
			l := float64(ix.docs[e.slot].length)
			tf := float64(e.tf)
			s := w * idf * tf * (bm25K1 + 1) / (tf + bm25K1*(1-bm25B+bm25B*l/avg))
			if acc[e.slot] == 0 {
				touched = append(touched, e.slot)
			}
			acc[e.slot] += float32(s)
		}
	}
	top := topK{k: limit}
	for _, s := range touched {
		if f.Matches(&ix.docs[s].mem) {
			top.offer(scored{slot: s, score: float64(acc[s])})
		}
		acc[s] = 0
	}
	return top.best()
}

// vector ranks the documents passing f by cosine similarity to q (already
// normalised), keeping those at or above threshold.
func (ix *index) vector(f *memory.Filter, q []float32, threshold float64, limit int) []scored {
	if ix.nvec == 0 || len(q) != ix.dim {
		return nil
	}
	if ix.nvec < exactBelow {
		top := topK{k: limit}
		for s := range ix.docs {
			d := &ix.docs[s]
			if !d.hasVec || !f.Matches(&d.mem) {
				continue
			}
			c := dot(q, ix.vecs[s*ix.dim:(s+1)*ix.dim])
			if c >= threshold {
				top.offer(scored{slot: int32(s), score: c})
			}
		}
		return top.best()
	}
	// Coarse pass on sign bits: fewer differing bits ≈ smaller angle.
	qs := signBits(q, ix.words)
	cand := topK{k: max(limit*oversample, minRescore)}
	for s := range ix.docs {
		d := &ix.docs[s]
		if !d.hasVec || !f.Matches(&d.mem) {
			continue
		}
		sg := ix.signs[s*ix.words : (s+1)*ix.words]
		diff := 0
		for i, w := range qs {
			diff += bits.OnesCount64(w ^ sg[i])
		}
		cand.offer(scored{slot: int32(s), score: float64(-diff)})
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

// search fuses the vector and lexical rankings with reciprocal rank fusion.
func (ix *index) search(q *memory.Query, qvec []float32) []memory.Hit {
	limit := q.Limit
	if limit <= 0 {
		limit = 10
	}
	// Each side looks deeper than the limit so fusion has material.
	depth := limit * 2
	var vec, lex []scored
	if qvec != nil {
		vec = ix.vector(&q.Filter, qvec, q.Threshold, depth)
	}
	if q.Text != "" {
		lex = ix.lexical(&q.Filter, q.Text, depth)
	}
	type fused struct {
		slot           int32
		rrf, cos, bm25 float64
	}
	bySlot := map[int32]*fused{}
	var order []*fused
	get := func(s int32) *fused {
		f, ok := bySlot[s]
		if !ok {
			f = &fused{slot: s}
			bySlot[s] = f
			order = append(order, f)
		}
		return f
	}
	for r, c := range vec {
		f := get(c.slot)
		f.rrf += 1 / float64(rrfK+r+1)
		f.cos = c.score
	}
	for r, c := range lex {
		f := get(c.slot)
		f.rrf += 1 / float64(rrfK+r+1)
		f.bm25 = c.score
	}
	slices.SortStableFunc(order, func(a, b *fused) int {
		switch {
		case a.rrf > b.rrf:
			return -1
		case a.rrf < b.rrf:
			return 1
		}
		return 0
	})
	if len(order) > limit {
		order = order[:limit]
	}
	hits := make([]memory.Hit, len(order))
	for i, f := range order {
		hits[i] = memory.Hit{Memory: ix.docs[f.slot].mem, Score: f.rrf, Cosine: f.cos, Lexical: f.bm25}
	}
	return hits
}

// normalize returns v scaled to unit length (nil for a zero vector).
func normalize(v []float32) []float32 {
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
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return float64(s0 + s1 + s2 + s3)
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
