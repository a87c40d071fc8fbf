package embedded

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/vera-proxy/vera/memory"
)

// Reading: searches and Latest find slots in the in-memory index, then
// read those memories from the file, since the index holds no text.

// Search runs a hybrid search on the in-memory index.
func (d *DB) Search(ctx context.Context, q memory.Query) ([]memory.Hit, error) {
	return d.search(ctx, q, q.Vector, nil, nil)
}

var _ memory.SearchAhead = (*DB)(nil)

// SearchAhead implements memory.SearchAhead: q's lexical side runs now,
// in the background, and the vector side and the fusion once the vector
// is given. Should a memory the lexical side saw be removed or changed
// in between, both sides run again, on one state of the index; memories
// only added meanwhile are left to the vector side (rankedAhead).
func (d *DB) SearchAhead(ctx context.Context, q memory.Query) func(vector []float32) ([]memory.Hit, error) {
	var ahead rankedAhead
	done := make(chan struct{})
	// The ranking ahead leaves a core free: the caller's embedding
	// answer would otherwise wait on the network until the ranking is
	// done (no core would look), and the vector side after it. The
	// caller ranks the vector side on it meanwhile, then joins.
	j := newJoinPoint()
	if q.Text == "" || ctx.Err() != nil {
		close(done)
	} else {
		go func() {
			defer close(done)
			d.mu.RLock()
			defer d.mu.RUnlock()
			if d.ready() != nil {
				return
			}
			if ix := d.ns[q.Namespace]; ix != nil {
				ahead = rankedAhead{ix: ix, removals: ix.removals, top: ix.lexicalSide(&q, j)}
			}
		}()
	}
	return func(vector []float32) ([]memory.Hit, error) {
		var vec rankedAhead
		if q.Text != "" {
			vec = d.vectorAhead(ctx, &q, vector)
		}
		j.join(done)
		<-done
		return d.search(ctx, q, vector, &ahead, &vec)
	}
}

// vectorAhead ranks q's vector side for vector while the lexical side is
// ranked ahead. Not while a write waits for the index: it would wait
// behind the whole lexical side, which the caller joins then instead,
// ranking the vector side after it.
func (d *DB) vectorAhead(ctx context.Context, q *memory.Query, vector []float32) rankedAhead {
	if len(vector) == 0 || ctx.Err() != nil {
		return rankedAhead{}
	}
	qvec := normalize(vector)
	if !d.mu.TryRLock() {
		return rankedAhead{}
	}
	defer d.mu.RUnlock()
	ix := d.ns[q.Namespace]
	if d.ready() != nil || ix == nil {
		return rankedAhead{}
	}
	return rankedAhead{ix: ix, removals: ix.removals, changes: ix.changes, top: ix.vectorSide(q, qvec)}
}

// rankedAhead is one side of a search ranked ahead, on ix as its removals
// and changes were. The lexical side holds while no slot it saw was
// removed: what the index gained meanwhile (the turn before, stored while
// this question was embedded) is left to the vector side. The vector
// side, ranked while the lexical one ends, holds only while nothing
// changed at all; else it is ranked again at the fusion.
type rankedAhead struct {
	ix       *index
	removals uint64
	changes  uint64 // the vector side's: kept only while nothing changed
	top      []scored
}

// search is Search with vector as the query's, and the sides ranked ahead
// when they still hold for the index (nil: none; vec is the vector side).
func (d *DB) search(ctx context.Context, q memory.Query, vector []float32, ahead, vec *rankedAhead) ([]memory.Hit, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var qvec []float32
	if len(vector) > 0 {
		qvec = normalize(vector)
	}
	d.mu.RLock()
	if err := d.ready(); err != nil {
		d.mu.RUnlock()
		return nil, err
	}
	ix := d.ns[q.Namespace]
	if ix == nil {
		d.mu.RUnlock()
		return nil, nil
	}
	var found []hit
	if ahead != nil && ahead.ix == ix && ahead.removals == ix.removals {
		var vs []scored
		if vec != nil && vec.ix == ix && vec.changes == ix.changes {
			vs = vec.top
		} else {
			vs = ix.vectorSide(&q, qvec)
		}
		found = fuse(vs, ahead.top, q.Limit)
	} else {
		found = ix.search(&q, qvec)
	}
	// In the builder's order (memory.BestFirst): a memory's time is its
	// slot's.
	slices.SortStableFunc(found, func(a, b hit) int {
		if c := cmp.Compare(b.rrf, a.rrf); c != 0 {
			return c
		}
		return cmp.Compare(ix.meta[b.slot].ts, ix.meta[a.slot].ts)
	})
	seqs := make([]int64, len(found), len(found)+2*min(q.Context, len(found)))
	for i, h := range found {
		seqs[i] = ix.seqs[h.slot]
	}
	// The context of the first q.Context hits: their neighbours, read
	// with the hits.
	around := make([][2]int64, min(q.Context, len(found)))
	for i := range around {
		for k, x := range ix.neighboursOf(found[i].slot, nil) {
			around[i][k] = -1
			if x >= 0 {
				around[i][k] = ix.seqs[x]
				seqs = append(seqs, ix.seqs[x])
			}
		}
	}
	d.mu.RUnlock()
	ms, err := d.rows(ctx, &q.Filter, seqs)
	if err != nil {
		return nil, fmt.Errorf("search: %w", err)
	}
	hits := make([]memory.Hit, 0, len(found))
	for i, h := range found {
		m, ok := ms[seqs[i]]
		if !ok {
			continue
		}
		hit := memory.Hit{Memory: m, Score: h.rrf, Cosine: h.cos, Lexical: h.bm25}
		if i < len(around) {
			for _, seq := range around[i] {
				if n, ok := ms[seq]; seq >= 0 && ok {
					hit.Context = append(hit.Context, n)
				}
			}
		}
		hits = append(hits, hit)
	}
	return hits, nil
}

var _ memory.Contextual = (*DB)(nil)

// FillsContext implements memory.Contextual: the index knows each turn's
// neighbours in time, and search reads them with the hits.
func (d *DB) FillsContext() {}

// Latest returns the newest memories matching f, newest first (equal
// times: the later written first). The in-memory index finds them, as a
// query of SQLite would; while it loads, the file is asked.
func (d *DB) Latest(ctx context.Context, f memory.Filter, limit int) ([]memory.Memory, error) {
	return d.inTimeOrder(ctx, f, limit, false)
}

var _ memory.Earliest = (*DB)(nil)

// Earliest implements memory.Earliest: the oldest memories matching f,
// oldest first (equal times: the earlier written first).
func (d *DB) Earliest(ctx context.Context, f memory.Filter, limit int) ([]memory.Memory, error) {
	return d.inTimeOrder(ctx, f, limit, true)
}

// List implements memory.Store from the file, in the order of the
// (namespace, ts) index: SQLite sorts by id only the memories of one ts.
// The cursor's place is a condition on ts and id, not an offset, so a
// memory written behind it comes on a later page.
func (d *DB) List(ctx context.Context, f memory.Filter, o memory.Order, cursor string, limit int) ([]memory.Memory, string, error) {
	if limit <= 0 {
		limit = 100
	}
	after, dir := "<", "DESC"
	if o == memory.OldestFirst {
		after, dir = ">", "ASC"
	}
	w, args := where(f)
	if cursor != "" {
		at, err := o.Place(cursor)
		if err != nil {
			return nil, "", err
		}
		// The first bound lets SQLite seek the index to the place.
		ts := at.Time.UnixNano()
		w += ` AND ts ` + after + `= ? AND (ts ` + after + ` ? OR id ` + after + ` ?)`
		args = append(args, ts, ts, at.ID)
	}
	out, err := d.query(ctx, `SELECT `+columns+` FROM memories WHERE `+w+` ORDER BY ts `+dir+`, id `+dir+` LIMIT ?`, append(args, limit+1)...)
	if err != nil {
		return nil, "", fmt.Errorf("list: %w", err)
	}
	if len(out) <= limit {
		return out, "", nil
	}
	out = out[:limit]
	return out, o.Cursor(out[limit-1]), nil
}

// inTimeOrder is Latest, or Earliest when oldest is set.
func (d *DB) inTimeOrder(ctx context.Context, f memory.Filter, limit int, oldest bool) ([]memory.Memory, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, nil
	}
	d.mu.RLock()
	if d.ready() != nil {
		d.mu.RUnlock()
		order := `ts DESC, seq DESC`
		if oldest {
			order = `ts, seq`
		}
		w, args := where(f)
		out, err := d.query(ctx, `SELECT `+columns+` FROM memories WHERE `+w+` ORDER BY `+order+` LIMIT ?`, append(args, limit)...)
		if err != nil {
			return nil, fmt.Errorf("latest: %w", err)
		}
		return out, nil
	}
	ix := d.ns[f.Namespace]
	if ix == nil {
		d.mu.RUnlock()
		return nil, nil
	}
	slots := ix.inTimeOrder(&f, limit, oldest)
	seqs := make([]int64, len(slots))
	for i, s := range slots {
		seqs[i] = ix.seqs[s]
	}
	d.mu.RUnlock()
	ms, err := d.rows(ctx, &f, seqs)
	if err != nil {
		return nil, fmt.Errorf("latest: %w", err)
	}
	out := make([]memory.Memory, 0, len(seqs))
	for _, seq := range seqs {
		if m, ok := ms[seq]; ok {
			out = append(out, m)
		}
	}
	return out, nil
}

// rows reads the memories of rows seqs that still pass f (one changed or
// went since the index found it: it is left out), by seq: from the cache
// of rows read lately, else from the file. The filter is applied here,
// not in SQL: SQLite would rather walk the namespace's index than look the
// rows up by seq.
func (d *DB) rows(ctx context.Context, f *memory.Filter, seqs []int64) (map[int64]memory.Memory, error) {
	out := make(map[int64]memory.Memory, len(seqs))
	sf := compile(f)
	keep := func(seq int64, r cachedRow) {
		meta := slotMeta{ts: r.m.Time.UnixNano(), typ: typeBit(r.m.Type), vec: r.vec}
		if r.m.Namespace == f.Namespace && sf.ok(&meta) {
			m := r.m
			m.Metadata = maps.Clone(m.Metadata) // the cache's own stays as read
			out[seq] = m
		}
	}
	missing, epoch := d.cache.get(seqs, keep)
	if len(missing) == 0 {
		return out, nil
	}
	list, _ := json.Marshal(missing)
	rows, err := d.rowsStmt.QueryContext(ctx, string(list))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var seq int64
		var noVector bool
		m, err := scan(rows, false, &seq, &noVector)
		if err != nil {
			return nil, err
		}
		r := cachedRow{m: m, vec: !noVector}
		d.cache.put(seq, r, epoch)
		keep(seq, r)
	}
	return out, rows.Err()
}

// rowsQuery reads rows by seq, given as a JSON array: one statement,
// prepared once, for any number of them.
const rowsQuery = `SELECT ` + columns + `, seq, vector IS NULL FROM memories WHERE seq IN (SELECT value FROM json_each(?))`

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
