package embedded

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/vera-proxy/vera/memory"
	"github.com/vera-proxy/vera/memory/embedded/index"
)

var _ memory.TokenCounter = (*DB)(nil)

// ZeroTokens implements memory.TokenCounter: the memories of every
// namespace whose token count is unknown, in id order, the cursor being
// the last id of the previous page.
func (d *DB) ZeroTokens(ctx context.Context, cursor string, limit int) ([]memory.Memory, string, error) {
	if limit <= 0 {
		limit = 100
	}
	if cursor == "" && !d.anyMatch(ctx, "", (*index.Namespace).AnyUncounted) {
		// Asked at every start: the index knows at once that every count
		// is known, where the query would read every row.
		return nil, "", nil
	}
	out, err := d.query(ctx, `SELECT `+columns+` FROM memories WHERE tokens <= 0 AND id > ? ORDER BY id LIMIT ?`, cursor, limit+1)
	if err != nil {
		return nil, "", fmt.Errorf("zero tokens: %w", err)
	}
	next := ""
	if len(out) > limit {
		out = out[:limit]
		next = out[limit-1].ID
	}
	return out, next, nil
}

// SetTokens implements memory.TokenCounter, in one transaction; the
// in-memory index (which Search and Latest read) gets the same counts.
func (d *DB) SetTokens(ctx context.Context, counts map[string]int) error {
	if len(counts) == 0 {
		return nil
	}
	d.wmu.Lock()
	defer d.wmu.Unlock()
	var set []int64
	var gen int64
	err := d.tx(ctx, func(tx *sql.Tx) error {
		set = set[:0]
		st, err := tx.PrepareContext(ctx, `UPDATE memories SET tokens = ? WHERE id = ? AND tokens <= 0 RETURNING seq`)
		if err != nil {
			return err
		}
		defer st.Close()
		for id, n := range counts {
			if n <= 0 {
				continue
			}
			seq, ok, err := seqOf(st.QueryRowContext(ctx, n, id))
			if err != nil {
				return fmt.Errorf("memory %s: %w", id, err)
			}
			if ok {
				set = append(set, seq)
			}
		}
		gen, err = d.logChanges(ctx, tx, set)
		return err
	})
	if err != nil {
		return fmt.Errorf("set tokens: %w", err)
	}
	d.cache.drop(set)
	d.mu.Lock()
	defer d.mu.Unlock()
	d.gen = max(d.gen, gen)
	d.change(func(nsm map[string]*index.Namespace) {
		for _, seq := range set {
			for _, ix := range nsm {
				ix.Counted(seq)
			}
		}
	})
	return nil
}
