package embedded

import (
	"container/heap"
	"math"
	"math/bits"
	"runtime"
	"slices"
	"sort"
	"sync"
	"sync/atomic"

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
	oversample = 4
	minRescore = 200
	// parallelAbove: namespaces with at least this many slots scan on
	// every core, and run the vector and lexical sides side by side.
	parallelAbove = 32768
)

// index is the in-memory search side of one namespace: an inverted index
// for BM25 and the normalised vectors with their sign bits. SQLite is the
// source of truth; the index is rebuilt from it at open.
type index struct {
	docs  []doc
	meta  []slotMeta       // per slot, typ 0 when removed
	slot  map[string]int32 // id → slot
	live  int
	terms map[string]int32 // term → term id
	post  [][]posting      // term id → postings, by ascending slot
	total int64            // sum of live doc lengths, in terms
	// unordered is set once a memory arrives older than one before it:
	// until then slots are in time order and latest reads from the end.
	unordered bool
	newest    int64 // the latest time added, removed or not
	// pruned counts the lexical searches MaxScore cut short (for tests).
	pruned atomic.Int64

	dim   int
	words int       // uint64 words of sign bits per vector
	vecs  []float32 // slot*dim, normalised
	signs []uint64  // slot*words
	nvec  int

	// room is how many vectors vecs and signs get room for once the
	// dimension is known (loading sets it; newIndexFor).
	room int
	tf   map[int32]int32 // scratch for add
}

type doc struct {
	mem   memory.Memory // Vector is nil here; it lives in vecs
	terms []int32       // distinct term ids, for removal
}

// slotMeta is what scans read per slot, kept apart from doc in a small
// dense array so a scan of 100k slots stays in cache.
type slotMeta struct {
	ts     int64
	length float32
	typ    uint8 // typeBit; 0 for a removed slot
	vec    bool
}

func typeBit(t memory.Type) uint8 {
	switch t {
	case memory.Raw:
		return 1
	case memory.Curated:
		return 2
	case memory.Rule:
		return 4
	case memory.Forgotten:
		return 8
	case memory.Profile:
		return 16
	}
	return 0
}

// slotFilter is a memory.Filter compiled for slotMeta (the namespace is
// the index's own).
type slotFilter struct {
	types        uint8
	since, until int64
	noVector     bool
}

func compile(f *memory.Filter) slotFilter {
	sf := slotFilter{types: 0xff, since: -1 << 63, until: 1<<63 - 1, noVector: f.NoVector}
	if len(f.Types) > 0 {
		sf.types = 0
		for _, t := range f.Types {
			sf.types |= typeBit(t)
		}
	}
	if !f.Since.IsZero() {
		sf.since = f.Since.UnixNano()
	}
	if !f.Until.IsZero() {
		sf.until = f.Until.UnixNano()
	}
	return sf
}

func (sf *slotFilter) ok(m *slotMeta) bool {
	return m.typ&sf.types != 0 && m.ts >= sf.since && m.ts < sf.until && !(sf.noVector && m.vec)
}

type posting struct {
	slot int32
	tf   int32
}

func newIndex() *index {
	return &index{slot: map[string]int32{}, terms: map[string]int32{}}
}

// newIndexFor returns an index with room for n memories and some more:
// loading a large store then grows no array (each growth copies it whole),
// and neither do the first turns written after it (a growth of the arrays
// of a million memories holds the index for half a second). The vectors,
// the largest array, get less headroom than the rest: the garbage
// collector counts what is reserved.
func newIndexFor(n int) *index {
	room := n + n/4 + 64
	return &index{slot: make(map[string]int32, room), terms: map[string]int32{},
		docs: make([]doc, 0, room), meta: make([]slotMeta, 0, room), room: n + n/16 + 64}
}

// add indexes m (replacing any memory with the same id). vec is the
// normalised vector or nil.
func (ix *index) add(m memory.Memory, vec []float32) {
	ix.addTerms(m, vec, memory.Terms(m.Text))
}

// addTerms is add with m's terms already found (memory.Terms(m.Text)):
// loading finds them on every core.
func (ix *index) addTerms(m memory.Memory, vec []float32, terms []string) {
	ix.remove(m.ID)
	m.Vector = nil
	s := int32(len(ix.docs))
	if ix.tf == nil || len(ix.tf) > 1024 {
		// clear costs as much as the map's largest size: one huge
		// memory must not slow every later add.
		ix.tf = map[int32]int32{}
	}
	tf := ix.tf
	clear(tf)
	n := int32(0)
	for _, t := range terms {
		id, ok := ix.terms[t]
		if !ok {
			id = int32(len(ix.post))
			ix.terms[t] = id
			ix.post = append(ix.post, nil)
		}
		tf[id]++
		n++
	}
	d := doc{mem: m, terms: make([]int32, 0, len(tf))}
	for id, c := range tf {
		ix.post[id] = append(ix.post[id], posting{slot: s, tf: c})
		d.terms = append(d.terms, id)
	}
	ix.total += int64(n)
	ix.live++
	hasVec := vec != nil && (ix.dim == 0 || len(vec) == ix.dim)
	if hasVec {
		if ix.dim == 0 {
			ix.dim = len(vec)
			ix.words = (ix.dim + 63) / 64
			room := max(ix.room, len(ix.docs)+1)
			ix.vecs = make([]float32, len(ix.docs)*ix.dim, room*ix.dim)
			ix.signs = make([]uint64, len(ix.docs)*ix.words, room*ix.words)
		}
		ix.nvec++
	}
	if ts := m.Time.UnixNano(); len(ix.meta) > 0 && ts < ix.newest {
		ix.unordered = true
	} else {
		ix.newest = ts
	}
	ix.docs = append(ix.docs, d)
	ix.meta = append(ix.meta, slotMeta{ts: m.Time.UnixNano(), length: float32(n), typ: typeBit(m.Type), vec: hasVec})
	ix.slot[m.ID] = s
	if ix.dim > 0 {
		if hasVec {
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
	ix.total -= int64(ix.meta[s].length)
	ix.live--
	if ix.meta[s].vec {
		ix.nvec--
	}
	*d = doc{}
	// The time stays: slots stay in time order for latest's binary
	// search; type 0 marks the slot removed.
	ix.meta[s] = slotMeta{ts: ix.meta[s].ts}
	delete(ix.slot, id)
	if dead := len(ix.docs) - ix.live; dead > 1024 && dead > ix.live {
		ix.compact()
	}
}

// dropVectors forgets every vector (the embedding model changed): the
// memories stay, searchable lexically, until they are embedded again.
func (ix *index) dropVectors() {
	ix.dim, ix.words, ix.nvec = 0, 0, 0
	ix.vecs, ix.signs = nil, nil
	for s := range ix.meta {
		ix.meta[s].vec = false
	}
}

// compact renumbers slots to drop removed documents.
func (ix *index) compact() {
	remap := make([]int32, len(ix.docs))
	docs := make([]doc, 0, ix.live)
	meta := make([]slotMeta, 0, ix.live)
	var vecs []float32
	var signs []uint64
	for s, d := range ix.docs {
		if ix.meta[s].typ == 0 {
			remap[s] = -1
			continue
		}
		remap[s] = int32(len(docs))
		docs = append(docs, d)
		meta = append(meta, ix.meta[s])
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
	ix.docs, ix.meta, ix.vecs, ix.signs = docs, meta, vecs, signs
}

// latest returns the newest memories passing f, newest first (equal
// times: the later indexed first).
func (ix *index) latest(f *memory.Filter, limit int) []memory.Memory {
	sf := compile(f)
	var slots []int32
	if !ix.unordered {
		// Slots are in time order: start at the last one before until,
		// and stop at since (the turns around a hit are looked up so).
		end := sort.Search(len(ix.meta), func(i int) bool { return ix.meta[i].ts >= sf.until })
		for s := end - 1; s >= 0 && len(slots) < limit && ix.meta[s].ts >= sf.since; s-- {
			if sf.ok(&ix.meta[s]) {
				slots = append(slots, int32(s))
			}
		}
	} else {
		h := &newest{meta: ix.meta}
		for s := range ix.meta {
			if !sf.ok(&ix.meta[s]) {
				continue
			}
			if len(h.slots) < limit {
				heap.Push(h, int32(s))
			} else if limit > 0 && h.older(h.slots[0], int32(s)) {
				h.slots[0] = int32(s)
				heap.Fix(h, 0)
			}
		}
		slots = h.slots
		slices.SortFunc(slots, func(a, b int32) int {
			if h.older(a, b) {
				return 1
			}
			return -1
		})
	}
	out := make([]memory.Memory, len(slots))
	for i, s := range slots {
		out[i] = ix.docs[s].mem
	}
	return out
}

// vector ranks the documents passing f by cosine similarity to q (already
// normalised), keeping those at or above threshold.
func (ix *index) vector(f *memory.Filter, q []float32, threshold float64, limit int) []scored {
	if ix.nvec == 0 || len(q) != ix.dim {
		return nil
	}
	sf := compile(f)
	meta := ix.meta
	if ix.nvec < exactBelow {
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
	// Coarse pass on sign bits: fewer differing bits ≈ smaller angle.
	// Large namespaces are scanned in parallel chunks.
	qs := signBits(q, ix.words)
	k := max(limit*oversample, minRescore)
	chunks := 1
	if len(meta) >= parallelAbove {
		chunks = runtime.GOMAXPROCS(0)
	}
	parts := make([]topK, chunks)
	var wg sync.WaitGroup
	step := (len(meta) + chunks - 1) / chunks
	for c := range chunks {
		lo, hi := c*step, min((c+1)*step, len(meta))
		wg.Go(func() { parts[c] = ix.hamming(&sf, qs, lo, hi, k) })
	}
	wg.Wait()
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

// hamming returns the k slots in [lo, hi) whose sign bits differ least
// from qs (score = -distance).
func (ix *index) hamming(sf *slotFilter, qs []uint64, lo, hi, k int) topK {
	meta, signs, words := ix.meta, ix.signs, ix.words
	cand := topK{k: k}
	// The k-th best distance so far: most slots are rejected on it without
	// touching the heap.
	worst := words*64 + 1
	for s := lo; s < hi; s++ {
		if m := &meta[s]; !m.vec || !sf.ok(m) {
			continue
		}
		sg := signs[s*words : (s+1)*words]
		sg = sg[:len(qs)]
		diff := 0
		for i, w := range qs {
			diff += bits.OnesCount64(w ^ sg[i])
		}
		if diff >= worst {
			continue
		}
		cand.offer(scored{slot: int32(s), score: float64(-diff)})
		if len(cand.h) == cand.k {
			worst = int(-cand.h[0].score)
		}
	}
	return cand
}

// search fuses the vector and lexical rankings with reciprocal rank fusion.
func (ix *index) search(q *memory.Query, qvec []float32) []memory.Hit {
	limit := q.Limit
	if limit <= 0 {
		limit = 10
	}
	// Each side looks a little deeper than the limit so fusion has
	// material.
	depth := limit + 10
	var vec, lex []scored
	var wg sync.WaitGroup
	if qvec != nil {
		if q.Text != "" && len(ix.meta) >= parallelAbove {
			wg.Go(func() { vec = ix.vector(&q.Filter, qvec, q.Threshold, depth) })
		} else {
			vec = ix.vector(&q.Filter, qvec, q.Threshold, depth)
		}
	}
	if q.Text != "" {
		lex = ix.lexical(&q.Filter, q.Text, depth)
	}
	wg.Wait()
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
