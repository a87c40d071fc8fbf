package embedded

import (
	"context"
	"database/sql"
	"strings"
	"time"

	"github.com/vera-proxy/vera/memory"
)

// How often each memory was injected (memory.UsageStore) lives in the
// local file, beside the queue, whichever store holds the memories.

const usageSchema = `
CREATE TABLE IF NOT EXISTS usage (
	id        TEXT PRIMARY KEY,
	namespace TEXT NOT NULL,
	count     INTEGER NOT NULL,
	last      INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS usage_ns ON usage(namespace);
`

var _ memory.UsageStore = (*DB)(nil)

// AddUsage implements memory.UsageStore. Counts are statistics: written
// without waiting for the disk.
func (d *DB) AddUsage(ctx context.Context, uses ...memory.Use) error {
	d.wmu.Lock()
	defer d.wmu.Unlock()
	return d.relaxedTx(ctx, func(tx *sql.Tx) error {
		for _, u := range uses {
			if _, err := tx.ExecContext(ctx, `INSERT INTO usage (id, namespace, count, last) VALUES (?, ?, ?, ?)
				ON CONFLICT(id) DO UPDATE SET count = count + excluded.count, last = max(last, excluded.last)`,
				u.ID, u.Namespace, u.Count, u.Last.UnixNano()); err != nil {
				return err
			}
		}
		return nil
	})
}

// Usage implements memory.UsageStore.
func (d *DB) Usage(ctx context.Context, ids ...string) (map[string]memory.Use, error) {
	out := map[string]memory.Use{}
	err := inChunks(ids, func(in string, args []any) error {
		rows, err := d.db.QueryContext(ctx, `SELECT id, namespace, count, last FROM usage WHERE id IN `+in, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var u memory.Use
			var last int64
			if err := rows.Scan(&u.ID, &u.Namespace, &u.Count, &last); err != nil {
				return err
			}
			u.Last = time.Unix(0, last).UTC()
			out[u.ID] = u
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// inChunks calls fn with ids in runs of at most 500, each as the list
// "(?,?,...)" and its arguments: SQLite bounds a statement's variables.
func inChunks(ids []string, fn func(in string, args []any) error) error {
	for len(ids) > 0 {
		chunk := ids[:min(len(ids), 500)]
		ids = ids[len(chunk):]
		args := make([]any, len(chunk))
		for i, id := range chunk {
			args[i] = id
		}
		if err := fn("(?"+strings.Repeat(",?", len(chunk)-1)+")", args); err != nil {
			return err
		}
	}
	return nil
}

// DeleteUsage implements memory.UsageStore.
func (d *DB) DeleteUsage(ctx context.Context, ns string, ids ...string) error {
	if ns == "" && len(ids) == 0 {
		return nil
	}
	d.wmu.Lock()
	defer d.wmu.Unlock()
	return d.tx(ctx, func(tx *sql.Tx) error {
		if len(ids) == 0 {
			_, err := tx.ExecContext(ctx, `DELETE FROM usage WHERE namespace = ?`, ns)
			return err
		}
		for _, id := range ids {
			if _, err := tx.ExecContext(ctx, `DELETE FROM usage WHERE id = ?`, id); err != nil {
				return err
			}
		}
		return nil
	})
}
