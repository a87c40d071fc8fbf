// Package index is the embedded store's in-memory search index, one
// Namespace per namespace of memories: BM25 over text.Terms for the
// lexical side (compressed postings ranked by block-max MaxScore, or a
// window at a time for questions of common words), normalised float32
// vectors with sign-bit pre-ranking for the vector side, the two fused by
// reciprocal rank; the memories in time order with their neighbours; and
// the snapshot's encoding, which a start reads back instead of analysing
// every text again.
//
// It holds no text and touches no file: a slot names its memory's row in
// the store (its seq), and the store reads the hits' rows itself. Callers
// serialise changes against searches (the store's lock): a Namespace is
// safe for concurrent searches, not for a change beside them.
package index

import (
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
)

// Options tunes a Namespace; a zero field means the default. Tests set
// them low, so that a few hundred memories take the paths of a large
// namespace.
type Options struct {
	// CommonMin: a namespace of fewer slots keeps no arrays of its
	// common terms' frequencies, nor bits of its middling ones (4096).
	CommonMin int
	// ParallelAbove: a namespace of at least this many slots scans on
	// every core, and runs the vector and lexical sides side by side
	// (32768).
	ParallelAbove int
	// DensePiece is how many slots a worker of the dense ranking claims
	// at a time (8 windows).
	DensePiece int
}

// withDefaults is o with its zero fields set to the defaults.
func (o Options) withDefaults() Options {
	if o.CommonMin == 0 {
		o.CommonMin = 4096
	}
	if o.ParallelAbove == 0 {
		o.ParallelAbove = 32768
	}
	if o.DensePiece == 0 {
		o.DensePiece = 8 * window
	}
	return o
}

// Namespace is the in-memory search side of one namespace: compressed
// postings for BM25 and the normalised vectors with their sign bits, per
// slot. It holds no text: a slot names its memory's row in the file (its
// seq), and the hits of a search are read from the file. The file is the
// source of truth; the index is loaded from its snapshot or rebuilt from
// the file at start.
type Namespace struct {
	opts Options // with the defaults set

	meta []slotMeta // per slot, typ 0 when removed
	// scan is, per slot, what the vector scan's filter reads of meta
	// (scanByte): a slot near enough to enter the scan's heap is checked
	// on one byte, 16 times denser than meta, which a chat reads cold.
	scan []uint8
	// lens is each slot's length in terms, apart from meta: scoring
	// reads it for every posting, and a small array stays in cache.
	lens  []float32
	seqs  []int64         // per slot, the memory's row in the file
	bySeq map[int64]int32 // seq → slot, of live slots
	live  int
	terms map[string]int32 // term → term id
	post  []postings       // term id → postings
	// common holds the frequencies of the commonest terms by slot
	// (common.go).
	common map[int32][]uint8
	// champions are the common terms' champions (champions.go).
	champions map[int32]*champions
	// strongest are the common terms' strongest slots (strongest.go).
	strongest map[int32]*strongest
	// present holds a bit a slot for the terms in at least 1/midShare
	// of the slots but not common (common.go).
	present map[int32][]uint64
	// adding is the length of the slot being added, until lens has it.
	adding float32
	total  int64 // sum of live doc lengths, in terms
	// unordered is set once a memory arrives older than one before it:
	// until then slots are in time order and latest reads from the end.
	// From then on byTime holds the slots in time order.
	unordered bool
	byTime    []int32
	newest    int64 // the latest time added, removed or not
	// kinds lists the slots of each type but raw (by its typeBit's bit),
	// in slot order: the rules, the profile and the curated memories
	// are found without a walk past every turn.
	kinds [8][]int32
	// pruned counts the blocks of postings lexical skipped, unread the
	// candidates it dismissed without reading their length, and floors
	// the dense rankings that started from their champions' floor, and
	// marked those that took their candidates from the strongest cells
	// (for tests).
	pruned, unread, floors, marked atomic.Int64
	// removals counts the changes that drop or renumber slots (a
	// removal, an upsert of an indexed row, a compaction): a lexical
	// ranking made at one count holds at that count for the slots it saw.
	// Documents added since are not in it, nor, with Query.Around, the
	// share they would lend a ranked neighbour: it is the ranking of the
	// index as it was.
	removals uint64
	// changes counts every change of the index (an add, a removal, a
	// vector set or dropped, a compaction): a vector ranking holds only at
	// its count.
	changes uint64

	dim   int
	words int       // uint64 words of sign bits per vector
	vecs  []float32 // slot*dim, normalised
	signs []uint64  // slot*words
	nvec  int

	// room is how many vectors vecs and signs get room for once the
	// dimension is known (loading sets it; NewFor).
	room int
	tf   map[int32]uint32 // scratch for add

	// denseParts keeps the dense ranking's workers' state (*[]densePart)
	// and marks the arrays of strongest.mark's bitmaps (*[]uint64), from
	// one question to the next.
	denseParts, marks sync.Pool
}

// New returns an empty index.
func New(o Options) *Namespace {
	return &Namespace{opts: o.withDefaults(), bySeq: map[int64]int32{}, terms: map[string]int32{}}
}

// NewFor returns an index with room for n memories and some more:
// loading a large store then grows no array (each growth copies it whole),
// and neither do the first turns written after it (a growth of the arrays
// of a million memories holds the index for half a second). The vectors,
// the largest array, get less headroom than the rest: the garbage
// collector counts what is reserved.
func NewFor(n int, o Options) *Namespace {
	room := n + n/4 + 64
	return &Namespace{opts: o.withDefaults(), bySeq: make(map[int64]int32, room), terms: map[string]int32{},
		seqs: make([]int64, 0, room), meta: make([]slotMeta, 0, room), scan: make([]uint8, 0, room), lens: make([]float32, 0, room), room: n + n/16 + 64}
}

// Live counts the memories the index holds.
func (ix *Namespace) Live() int { return ix.live }

// Ordered says whether the memories came in time order (none older than
// one before it), so that their slots are in time order.
func (ix *Namespace) Ordered() bool { return !ix.unordered }

// Counted records that row seq's token count is known now.
func (ix *Namespace) Counted(seq int64) {
	if s, ok := ix.bySeq[seq]; ok {
		ix.meta[s].noTokens = false
	}
}

// Any reports whether the index holds a memory that f's types, times and
// NoVector allow (its namespace is the index's own). It is a superset of
// what a query of f in the file returns: false means that query would
// return nothing.
func (ix *Namespace) Any(f *memory.Filter) bool {
	sf := compile(f)
	for s := range ix.meta {
		if sf.ok(&ix.meta[s]) {
			return true
		}
	}
	return false
}

// AnyUncounted reports whether the index holds a memory whose token count
// is unknown.
func (ix *Namespace) AnyUncounted() bool {
	sf := compile(&memory.Filter{})
	for s := range ix.meta {
		if m := &ix.meta[s]; sf.ok(m) && m.noTokens {
			return true
		}
	}
	return false
}
