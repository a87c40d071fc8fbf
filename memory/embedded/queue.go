package embedded

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/vera-proxy/vera/memory"
)

// Enqueue commits memories to the durable queue; it returns once they are
// on disk.
func (d *DB) Enqueue(ctx context.Context, ms ...memory.Memory) error {
	if len(ms) == 0 {
		return nil
	}
	for i := range ms {
		if err := ms[i].Validate(); err != nil {
			return err
		}
	}
	d.wmu.Lock()
	defer d.wmu.Unlock()
	err := d.tx(ctx, func(tx *sql.Tx) error {
		for _, m := range ms {
			b, err := json.Marshal(m)
			if err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO queue (id, seq, body) VALUES (?, ?, ?) ON CONFLICT(id) DO UPDATE SET body = excluded.body`,
				m.ID, time.Now().UnixNano(), string(b)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("enqueue: %w", err)
	}
	return nil
}

// Pending returns up to limit queued memories, oldest first.
func (d *DB) Pending(ctx context.Context, limit int) ([]memory.Memory, error) {
	rows, err := d.db.QueryContext(ctx, `SELECT body FROM queue ORDER BY seq, id LIMIT ?`, limit)
	if err != nil {
		return nil, fmt.Errorf("queue: %w", err)
	}
	defer rows.Close()
	var out []memory.Memory
	for rows.Next() {
		var body string
		if err := rows.Scan(&body); err != nil {
			return nil, fmt.Errorf("queue: %w", err)
		}
		var m memory.Memory
		if err := json.Unmarshal([]byte(body), &m); err != nil {
			return nil, fmt.Errorf("queue: corrupt entry: %w", err)
		}
		out = append(out, m)
	}
	return out, rows.Err()
}

// Done removes memories from the queue.
func (d *DB) Done(ctx context.Context, ids ...string) error {
	if len(ids) == 0 {
		return nil
	}
	d.wmu.Lock()
	defer d.wmu.Unlock()
	if err := d.deleteIDs(ctx, "queue", ids); err != nil {
		return fmt.Errorf("queue done: %w", err)
	}
	return nil
}

// Len counts the queued memories.
func (d *DB) Len(ctx context.Context) (int, error) {
	var n int
	if err := d.db.QueryRowContext(ctx, `SELECT count(*) FROM queue`).Scan(&n); err != nil {
		return 0, fmt.Errorf("queue: %w", err)
	}
	return n, nil
}
