package embedded

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"time"

	"github.com/vera-proxy/vera/memory"
)

// The history of every memory's changes (memory.HistoryStore) lives in
// the local file, beside the queue, whichever store holds the memories.
// It is append-only but for a namespace's erasure, and holds no text.

const historySchema = `
CREATE TABLE IF NOT EXISTS history (
	seq       INTEGER PRIMARY KEY AUTOINCREMENT,
	at        INTEGER NOT NULL,
	namespace TEXT NOT NULL,
	id        TEXT NOT NULL,
	action    TEXT NOT NULL,
	actor     TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS history_id ON history(id, seq);
CREATE INDEX IF NOT EXISTS history_ns ON history(namespace, seq);
`

var _ memory.HistoryStore = (*DB)(nil)

// AddHistory implements memory.HistoryStore. Written without waiting for
// the disk (the change it records was, or is about to be: the next write
// at FULL carries it there), so the writer's batches cost no second sync.
func (d *DB) AddHistory(ctx context.Context, es ...memory.Entry) error {
	if len(es) == 0 {
		return nil
	}
	d.wmu.Lock()
	defer d.wmu.Unlock()
	return d.relaxedTx(ctx, func(tx *sql.Tx) error {
		for _, e := range es {
			if _, err := tx.ExecContext(ctx, `INSERT INTO history (at, namespace, id, action, actor) VALUES (?, ?, ?, ?, ?)`,
				e.At.UnixNano(), e.Namespace, e.ID, e.Action, e.Actor); err != nil {
				return err
			}
		}
		return nil
	})
}

// HistoryOf implements memory.HistoryStore.
func (d *DB) HistoryOf(ctx context.Context, id string) ([]memory.Entry, error) {
	rows, err := d.db.QueryContext(ctx, `SELECT seq, at, namespace, id, action, actor FROM history WHERE id = ? ORDER BY seq`, id)
	if err != nil {
		return nil, err
	}
	es, _, err := scanHistory(rows)
	return es, err
}

// Audit implements memory.HistoryStore; the cursor is the seq the page
// goes on below.
func (d *DB) Audit(ctx context.Context, q memory.AuditQuery) ([]memory.Entry, string, error) {
	limit := q.Limit
	if limit <= 0 {
		limit = 100
	}
	before := int64(1<<63 - 1)
	if q.Cursor != "" {
		n, err := strconv.ParseInt(q.Cursor, 10, 64)
		if err != nil || n <= 0 {
			return nil, "", fmt.Errorf("%w: the cursor %q is not one this history gave", memory.ErrBadCursor, q.Cursor)
		}
		before = n
	}
	query, args := `SELECT seq, at, namespace, id, action, actor FROM history WHERE seq < ?`, []any{before}
	if q.Namespace != "" {
		query, args = query+` AND namespace = ?`, append(args, q.Namespace)
	}
	if !q.Since.IsZero() {
		query, args = query+` AND at >= ?`, append(args, q.Since.UnixNano())
	}
	rows, err := d.db.QueryContext(ctx, query+` ORDER BY seq DESC LIMIT ?`, append(args, limit+1)...)
	if err != nil {
		return nil, "", err
	}
	es, seqs, err := scanHistory(rows)
	if err != nil || len(es) <= limit {
		return es, "", err
	}
	return es[:limit], strconv.FormatInt(seqs[limit-1], 10), nil
}

func scanHistory(rows *sql.Rows) ([]memory.Entry, []int64, error) {
	defer rows.Close()
	es, seqs := []memory.Entry{}, []int64(nil)
	for rows.Next() {
		var e memory.Entry
		var seq, at int64
		if err := rows.Scan(&seq, &at, &e.Namespace, &e.ID, &e.Action, &e.Actor); err != nil {
			return nil, nil, err
		}
		e.At = time.Unix(0, at).UTC()
		es, seqs = append(es, e), append(seqs, seq)
	}
	return es, seqs, rows.Err()
}

// DeleteHistory implements memory.HistoryStore.
func (d *DB) DeleteHistory(ctx context.Context, ns string) error {
	d.wmu.Lock()
	defer d.wmu.Unlock()
	return d.tx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM history WHERE namespace = ?`, ns)
		return err
	})
}

// What is withheld from chats (memory.WithheldStore) lives there too.

const withheldSchema = `
CREATE TABLE IF NOT EXISTS withheld (
	id        TEXT PRIMARY KEY,
	namespace TEXT NOT NULL,
	because   TEXT NOT NULL,
	at        INTEGER NOT NULL
);
`

var _ memory.WithheldStore = (*DB)(nil)

// AddWithheld implements memory.WithheldStore.
func (d *DB) AddWithheld(ctx context.Context, ws ...memory.Withhold) error {
	d.wmu.Lock()
	defer d.wmu.Unlock()
	return d.tx(ctx, func(tx *sql.Tx) error {
		for _, w := range ws {
			if _, err := tx.ExecContext(ctx, `INSERT INTO withheld (id, namespace, because, at) VALUES (?, ?, ?, ?) ON CONFLICT(id) DO NOTHING`,
				w.ID, w.Namespace, w.Because, w.At.UnixNano()); err != nil {
				return err
			}
		}
		return nil
	})
}

// AllWithheld implements memory.WithheldStore.
func (d *DB) AllWithheld(ctx context.Context) ([]memory.Withhold, error) {
	rows, err := d.db.QueryContext(ctx, `SELECT id, namespace, because, at FROM withheld`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []memory.Withhold
	for rows.Next() {
		var w memory.Withhold
		var at int64
		if err := rows.Scan(&w.ID, &w.Namespace, &w.Because, &at); err != nil {
			return nil, err
		}
		w.At = time.Unix(0, at).UTC()
		out = append(out, w)
	}
	return out, rows.Err()
}

// DeleteWithheld implements memory.WithheldStore.
func (d *DB) DeleteWithheld(ctx context.Context, ns string, ids ...string) error {
	d.wmu.Lock()
	defer d.wmu.Unlock()
	return d.tx(ctx, func(tx *sql.Tx) error {
		if len(ids) == 0 {
			_, err := tx.ExecContext(ctx, `DELETE FROM withheld WHERE namespace = ?`, ns)
			return err
		}
		return inChunks(ids, func(in string, args []any) error {
			_, err := tx.ExecContext(ctx, `DELETE FROM withheld WHERE id IN `+in, args...)
			return err
		})
	})
}
