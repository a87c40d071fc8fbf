package embedded

import (
	"context"
	"database/sql"
	"time"

	"github.com/vera-proxy/vera/memory"
)

// The directory of namespaces (memory.Directory) lives in the local file,
// beside the queue, whichever store holds the memories.

var _ memory.SeenStore = (*DB)(nil)

// SaveSeen implements memory.SeenStore.
func (d *DB) SaveSeen(ctx context.Context, seen ...memory.Seen) error {
	d.wmu.Lock()
	defer d.wmu.Unlock()
	return d.tx(ctx, func(tx *sql.Tx) error {
		for _, s := range seen {
			// A name or an email not sent this time keeps the one known.
			if _, err := tx.ExecContext(ctx, `INSERT INTO seen (namespace, name, email, last_seen) VALUES (?, ?, ?, ?)
				ON CONFLICT(namespace) DO UPDATE SET
					name = CASE WHEN excluded.name != '' THEN excluded.name ELSE name END,
					email = CASE WHEN excluded.email != '' THEN excluded.email ELSE email END,
					last_seen = max(last_seen, excluded.last_seen)`,
				s.Namespace, s.Name, s.Email, s.LastSeen.UnixNano()); err != nil {
				return err
			}
		}
		return nil
	})
}

// LoadSeen implements memory.SeenStore.
func (d *DB) LoadSeen(ctx context.Context) ([]memory.Seen, error) {
	rows, err := d.db.QueryContext(ctx, `SELECT namespace, name, email, last_seen FROM seen`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []memory.Seen
	for rows.Next() {
		var s memory.Seen
		var at int64
		if err := rows.Scan(&s.Namespace, &s.Name, &s.Email, &at); err != nil {
			return nil, err
		}
		s.LastSeen = time.Unix(0, at).UTC()
		out = append(out, s)
	}
	return out, rows.Err()
}

// DeleteSeen implements memory.SeenStore.
func (d *DB) DeleteSeen(ctx context.Context, ns string) error {
	d.wmu.Lock()
	defer d.wmu.Unlock()
	return d.tx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM seen WHERE namespace = ?`, ns)
		return err
	})
}
