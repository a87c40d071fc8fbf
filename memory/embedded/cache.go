package embedded

import (
	"sync"

	"github.com/vera-proxy/vera/memory"
)

// cachedRow is a memory as read from the file (without its vector), and
// whether it has one.
type cachedRow struct {
	m   memory.Memory
	vec bool
}

// rowCache keeps the rows searches read lately: the latest turns, the
// rules and the profile are read by every chat. Every write drops the rows
// it touched.
type rowCache struct {
	mu   sync.Mutex
	rows map[int64]cachedRow
	size int
	// epoch counts drops: a row read before a drop may be the version the
	// write replaced, and is not kept.
	epoch uint64
}

// get calls hit for each of seqs it holds, and returns the others, and
// the epoch to put them back with.
func (c *rowCache) get(seqs []int64, hit func(int64, cachedRow)) ([]int64, uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var missing []int64
	for _, s := range seqs {
		if r, ok := c.rows[s]; ok {
			hit(s, r)
		} else {
			missing = append(missing, s)
		}
	}
	return missing, c.epoch
}

// put keeps a row read since get returned epoch, unless a write dropped
// rows since.
func (c *rowCache) put(seq int64, r cachedRow, epoch uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if epoch != c.epoch {
		return
	}
	if c.rows == nil {
		c.rows = make(map[int64]cachedRow, c.size)
	}
	if len(c.rows) >= c.size {
		for s := range c.rows { // one out, at random
			delete(c.rows, s)
			break
		}
	}
	c.rows[seq] = r
}

// drop forgets rows seqs; all of them when seqs is nil.
func (c *rowCache) drop(seqs []int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.epoch++
	if seqs == nil {
		clear(c.rows)
	}
	for _, s := range seqs {
		delete(c.rows, s)
	}
}
