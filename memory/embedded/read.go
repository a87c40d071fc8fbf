package embedded

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"

	"github.com/vera-proxy/vera/memory"
	"github.com/vera-proxy/vera/memory/embedded/index"
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
// only added meanwhile are left to the vector side (index.Ranking).
func (d *DB) SearchAhead(ctx context.Context, q memory.Query) func(vector []float32) ([]memory.Hit, error) {
	var ahead index.Ranking
	done := make(chan struct{})
	// The ranking ahead leaves a core free: the caller's embedding
	// answer would otherwise wait on the network until the ranking is
	// done (no core would look), and the vector side after it. The
	// caller ranks the vector side on it meanwhile, then joins.
	j := index.NewJoinPoint()
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
				ahead = ix.RankLexical(&q, j)
			}
		}()
	}
	return func(vector []float32) ([]memory.Hit, error) {
		var vec index.Ranking
		if q.Text != "" {
			vec = d.vectorAhead(ctx, &q, vector)
		}
		j.Join(done)
		<-done
		return d.search(ctx, q, vector, &ahead, &vec)
	}
}

// vectorAhead ranks q's vector side for vector while the lexical side is
// ranked ahead. Not while a write waits for the index: it would wait
// behind the whole lexical side, which the caller joins then instead,
// ranking the vector side after it.
func (d *DB) vectorAhead(ctx context.Context, q *memory.Query, vector []float32) index.Ranking {
	if len(vector) == 0 || ctx.Err() != nil {
		return index.Ranking{}
	}
	qvec := index.Normalize(vector)
	if !d.mu.TryRLock() {
		return index.Ranking{}
	}
	defer d.mu.RUnlock()
	ix := d.ns[q.Namespace]
	if d.ready() != nil || ix == nil {
		return index.Ranking{}
	}
	return ix.RankVector(q, qvec)
}

// search is Search with vector as the query's, and the sides ranked ahead
// (nil: none; vec is the vector side), used while they still hold for the
// index.
func (d *DB) search(ctx context.Context, q memory.Query, vector []float32, ahead, vec *index.Ranking) ([]memory.Hit, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var qvec []float32
	if len(vector) > 0 {
		qvec = index.Normalize(vector)
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
	found := ix.Search(&q, qvec, ahead, vec)
	seqs := make([]int64, len(found), len(found)+2*min(q.Context, len(found)))
	for i, h := range found {
		seqs[i] = h.Row
	}
	// The context of the first q.Context hits: their neighbours, read
	// with the hits.
	around := make([][2]int64, min(q.Context, len(found)))
	for i := range around {
		around[i] = ix.Neighbours(found[i])
		for _, seq := range around[i] {
			if seq >= 0 {
				seqs = append(seqs, seq)
			}
		}
	}
	d.mu.RUnlock()
	ms, err := d.rows(ctx, &q.Filter, seqs)
	if err != nil {
		return nil, fmt.Errorf("search: %w", err)
	}
	return hitsOf(found, around, seqs, ms), nil
}

// hitsOf makes the hits of found, of rows seqs, from the memories read
// (those gone or changed since are left out), the first with the
// memories around them.
func hitsOf(found []index.Hit, around [][2]int64, seqs []int64, ms map[int64]memory.Memory) []memory.Hit {
	hits := make([]memory.Hit, 0, len(found))
	for i, h := range found {
		m, ok := ms[seqs[i]]
		if !ok {
			continue
		}
		hit := memory.Hit{Memory: m, Score: h.RRF, Cosine: h.Cosine, Lexical: h.BM25}
		if i < len(around) {
			for _, seq := range around[i] {
				if n, ok := ms[seq]; seq >= 0 && ok {
					hit.Context = append(hit.Context, n)
				}
			}
		}
		hits = append(hits, hit)
	}
	return hits
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
	seqs := ix.Latest(&f, limit, oldest)
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
	cf := index.Compile(f)
	keep := func(seq int64, r cachedRow) {
		if r.m.Namespace == f.Namespace && cf.Admits(&r.m, r.vec) {
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

// Scroll pages through the memories matching f in id order; the cursor is
// the last id of the previous page.
func (d *DB) Scroll(ctx context.Context, f memory.Filter, cursor string, limit int) ([]memory.Memory, string, error) {
	if limit <= 0 {
		limit = 100
	}
	if f.NoVector && !d.anyMatch(ctx, f.Namespace, func(ix *index.Namespace) bool { return ix.Any(&f) }) {
		// The writer asks at every start, and after every outage of the
		// embedder, for memories still without a vector: the index knows
		// at once that there are none, where the query would read every
		// row of the namespace (seconds at a million memories, competing
		// with the chats of the moment).
		return nil, "", nil
	}
	w, args := where(f)
	if cursor != "" {
		w += " AND id > ?"
		args = append(args, cursor)
	}
	out, err := d.query(ctx, `SELECT `+columns+` FROM memories WHERE `+w+` ORDER BY id LIMIT ?`, append(args, limit+1)...)
	if err != nil {
		return nil, "", fmt.Errorf("scroll: %w", err)
	}
	next := ""
	if len(out) > limit {
		out = out[:limit]
		next = out[limit-1].ID
	}
	return out, next, nil
}

// anyMatch reports whether an index that f's namespace (every namespace
// when empty) picks has in it; false means a query of the file would
// return nothing. Its callers are background work, which waits for the
// index to load (the query they would make instead reads every row).
func (d *DB) anyMatch(ctx context.Context, namespace string, has func(*index.Namespace) bool) bool {
	if d.Wait(ctx) != nil {
		return true
	}
	d.mu.RLock()
	defer d.mu.RUnlock()
	for ns, ix := range d.ns {
		if namespace != "" && ns != namespace {
			continue
		}
		if has(ix) {
			return true
		}
	}
	return false
}

// Get returns one memory with its vector.
func (d *DB) Get(ctx context.Context, id string) (memory.Memory, error) {
	row := d.db.QueryRowContext(ctx, `SELECT `+columns+`, vector FROM memories WHERE id = ?`, id)
	m, err := scan(row, true)
	if errors.Is(err, sql.ErrNoRows) {
		return m, fmt.Errorf("%w: %s", memory.ErrNotFound, id)
	}
	if err != nil {
		return m, fmt.Errorf("get %s: %w", id, err)
	}
	return m, nil
}

// Count counts the memories matching f.
func (d *DB) Count(ctx context.Context, f memory.Filter) (int, error) {
	w, args := where(f)
	var n int
	if err := d.db.QueryRowContext(ctx, `SELECT count(*) FROM memories WHERE `+w, args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("count: %w", err)
	}
	return n, nil
}

// Namespaces lists the namespaces that hold memories.
func (d *DB) Namespaces(ctx context.Context) ([]string, error) {
	rows, err := d.db.QueryContext(ctx, `SELECT DISTINCT namespace FROM memories ORDER BY namespace`)
	if err != nil {
		return nil, fmt.Errorf("namespaces: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}
