package embedded

import (
	"context"
	"fmt"
	"strings"

	"github.com/vera-proxy/vera/memory"
)

// Reading: searches and Latest find slots in the in-memory index, then
// read those memories from the file, since the index holds no text.

// Search runs a hybrid search on the in-memory index.
func (d *DB) Search(ctx context.Context, q memory.Query) ([]memory.Hit, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var qvec []float32
	if len(q.Vector) > 0 {
		qvec = normalize(q.Vector)
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
	found := ix.search(&q, qvec)
	seqs := make([]int64, len(found))
	for i, h := range found {
		seqs[i] = ix.seqs[h.slot]
	}
	d.mu.RUnlock()
	ms, err := d.rows(ctx, &q.Filter, seqs)
	if err != nil {
		return nil, fmt.Errorf("search: %w", err)
	}
	hits := make([]memory.Hit, 0, len(found))
	for i, h := range found {
		if m, ok := ms[seqs[i]]; ok {
			hits = append(hits, memory.Hit{Memory: m, Score: h.rrf, Cosine: h.cos, Lexical: h.bm25})
		}
	}
	return hits, nil
}

// Latest returns the newest memories matching f, newest first (equal
// times: the later written first). The in-memory index finds them, as a
// query of SQLite would; while it loads, the file is asked.
func (d *DB) Latest(ctx context.Context, f memory.Filter, limit int) ([]memory.Memory, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, nil
	}
	d.mu.RLock()
	if d.ready() != nil {
		d.mu.RUnlock()
		w, args := where(f)
		out, err := d.query(ctx, `SELECT `+columns+` FROM memories WHERE `+w+` ORDER BY ts DESC, seq DESC LIMIT ?`, append(args, limit)...)
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
	slots := ix.latest(&f, limit)
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
// went since the index found it: it is left out), by seq.
func (d *DB) rows(ctx context.Context, f *memory.Filter, seqs []int64) (map[int64]memory.Memory, error) {
	out := make(map[int64]memory.Memory, len(seqs))
	if len(seqs) == 0 {
		return out, nil
	}
	args := make([]any, len(seqs))
	for i, s := range seqs {
		args[i] = s
	}
	w, fargs := where(*f)
	rows, err := d.db.QueryContext(ctx, `SELECT `+columns+`, seq FROM memories WHERE seq IN (?`+strings.Repeat(", ?", len(seqs)-1)+`) AND `+w, append(args, fargs...)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var seq int64
		m, err := scan(rows, false, &seq)
		if err != nil {
			return nil, err
		}
		out[seq] = m
	}
	return out, rows.Err()
}
