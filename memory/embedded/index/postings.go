package index

import (
	"encoding/binary"
	"math"
)

// A term's postings, compressed: the slots holding the term, ascending,
// each with its frequency there, as varints (the slot as the distance
// from the one before) in blocks of blockSize. Each block keeps its last
// slot, where it starts, and the bound of any score inside it: its highest
// frequency and its shortest document. The bound is kept as those two, not
// as a score, because BM25's collection size and average length change
// with every write.
//
// Postings are only ever appended (a new slot is the highest); a removed
// document's postings stay until the index is compacted, and searches
// skip its slot.

// blockSize is how many postings a block holds.
const blockSize = 64

type blockMeta struct {
	last   int32  // the block's last slot
	off    uint32 // where its first posting starts in data
	maxTF  uint32
	minLen float32 // its shortest document, in terms
}

type postings struct {
	data   []byte
	blocks []blockMeta
	n      int32 // postings, of live documents or not
	// The bound of the whole list, as of its blocks.
	maxTF  uint32
	minLen float32
}

// add appends slot, higher than every slot before, with its frequency and
// its document's length.
func (p *postings) add(slot int32, tf uint32, length float32) {
	if p.n%blockSize == 0 {
		prev := int32(-1)
		if len(p.blocks) > 0 {
			prev = p.blocks[len(p.blocks)-1].last
		}
		p.blocks = append(p.blocks, blockMeta{last: prev, off: uint32(len(p.data)), minLen: math.MaxFloat32})
	}
	b := &p.blocks[len(p.blocks)-1]
	p.data = binary.AppendUvarint(p.data, uint64(slot-b.last))
	p.data = binary.AppendUvarint(p.data, uint64(tf))
	b.last = slot
	b.maxTF = max(b.maxTF, tf)
	b.minLen = min(b.minLen, length)
	if p.n == 0 {
		p.minLen = length
	}
	p.maxTF, p.minLen = max(p.maxTF, tf), min(p.minLen, length)
	p.n++
}

// blockEnd is where block i's postings end in data.
func (p *postings) blockEnd(i int) int {
	if i+1 < len(p.blocks) {
		return int(p.blocks[i+1].off)
	}
	return len(p.data)
}

// each calls fn with every posting, in order.
func (p *postings) each(fn func(slot int32, tf uint32)) {
	c := cursor{p: p}
	for c.start(); c.slot != endSlot; c.next() {
		fn(c.slot, c.tf)
	}
}

// endSlot is a finished cursor's slot: above every real one.
const endSlot = math.MaxInt32

// cursor walks a term's postings, block by block.
type cursor struct {
	p    *postings
	blk  int    // the current block
	pos  int    // the next posting's offset in data
	end  int    // the current block's end in data
	slot int32  // the current posting's slot; endSlot past the last
	tf   uint32 // its frequency
	// shallow is the block blockOf found last: a search's targets only
	// grow, so the next look starts there even when the cursor stayed
	// behind (a term looked up for few documents).
	shallow int
	// present is the term's bit a slot (Namespace.present), if it has one: a
	// slot without the term is known so without decoding a posting.
	present []uint64
}

// lacks says whether the term is known not to be in slot: its bit is
// clear.
func (c *cursor) lacks(slot int32) bool {
	return c.present != nil && (slot < 0 || int(slot>>6) >= len(c.present) || c.present[slot>>6]&(1<<(uint(slot)&63)) == 0)
}

// start puts c on the first posting.
func (c *cursor) start() {
	c.blk, c.slot, c.shallow = -1, -1, 0
	c.end = 0
	c.pos = 0
	c.next()
}

// next moves c to the following posting.
func (c *cursor) next() {
	if c.pos >= c.end {
		c.blk++
		if c.blk >= len(c.p.blocks) {
			c.slot = endSlot
			return
		}
		c.enter(c.blk)
	}
	c.slot += int32(c.uvarint())
	c.tf = uint32(c.uvarint())
}

// uvarint reads the varint at c.pos: most are one byte.
func (c *cursor) uvarint() uint64 {
	if b := c.p.data[c.pos]; b < 0x80 {
		c.pos++
		return uint64(b)
	}
	v, n := binary.Uvarint(c.p.data[c.pos:])
	c.pos += n
	return v
}

// enter places c before block i's first posting.
func (c *cursor) enter(i int) {
	c.blk = i
	c.pos, c.end = int(c.p.blocks[i].off), c.p.blockEnd(i)
	c.slot = -1
	if i > 0 {
		c.slot = c.p.blocks[i-1].last
	}
}

// blockOf returns the first block, from c's on, whose last slot is at
// least target; len(blocks) when there is none. Targets must not go down
// between calls (nor below the cursor's slot).
func (c *cursor) blockOf(target int32) int {
	bs := c.p.blocks
	i := max(c.blk, c.shallow, 0)
	if i < len(bs) && bs[i].last >= target {
		c.shallow = i
		return i
	}
	// Galloping, then binary search: targets are usually near.
	step := 1
	lo := i
	for i+step < len(bs) && bs[i+step].last < target {
		lo = i + step
		step *= 2
	}
	hi := min(i+step, len(bs)-1)
	if bs[hi].last < target {
		c.shallow = len(bs)
		return len(bs)
	}
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if bs[m].last < target {
			lo = m + 1
		} else {
			hi = m
		}
	}
	c.shallow = lo
	return lo
}

// seek moves c to its first posting at or after target.
func (c *cursor) seek(target int32) {
	if c.slot >= target {
		return
	}
	if b := c.blockOf(target); b != c.blk {
		if b >= len(c.p.blocks) {
			c.blk, c.slot = len(c.p.blocks), endSlot
			return
		}
		c.enter(b)
	}
	for c.slot < target {
		c.next()
	}
}
