package index

import (
	"math/bits"
	"slices"

	"github.com/vera-proxy/vera/memory"
)

// slotMeta is what scans read per slot, in a small dense array so a scan
// of 100k slots stays in cache.
type slotMeta struct {
	ts       int64
	typ      uint8 // typeBit; 0 for a removed slot
	vec      bool
	noTokens bool // its token count is unknown yet (the backfill counts it)
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

// timeless says whether sf passes a slot on its type alone.
func (sf *slotFilter) timeless() bool {
	return sf.since == -1<<63 && sf.until == 1<<63-1
}

// Filter is a memory.Filter compiled once, to test the memories a search
// found with as they are read from the file (one may have changed since).
type Filter struct{ sf slotFilter }

// Compile compiles f; its namespace is left to the caller.
func Compile(f *memory.Filter) Filter { return Filter{compile(f)} }

// Admits says whether m, with a vector or not, passes the filter's types,
// times and NoVector, as a slot of the index would.
func (f *Filter) Admits(m *memory.Memory, hasVector bool) bool {
	meta := slotMeta{ts: m.Time.UnixNano(), typ: typeBit(m.Type), vec: hasVector}
	return f.sf.ok(&meta)
}

// scanByte is slot meta m's byte of Namespace.scan: its typeBit (bits
// 0-4), and hasVector when it has a vector.
func scanByte(m *slotMeta) uint8 {
	if m.vec {
		return m.typ | hasVector
	}
	return m.typ
}

const hasVector = 0x80

// listScan makes Namespace.scan again from meta.
func (ix *Namespace) listScan() {
	ix.scan = slices.Grow(ix.scan[:0], len(ix.meta))[:len(ix.meta)]
	for s := range ix.meta {
		ix.scan[s] = scanByte(&ix.meta[s])
	}
}

// listKinds lists the slots of each type but raw again, from meta.
func (ix *Namespace) listKinds() {
	ix.kinds = [8][]int32{}
	raw := typeBit(memory.Raw)
	for s := range ix.meta {
		if t := ix.meta[s].typ; t != 0 && t != raw {
			k := bits.TrailingZeros8(t)
			ix.kinds[k] = append(ix.kinds[k], int32(s))
		}
	}
}
