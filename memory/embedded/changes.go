package embedded

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// The change log that keys the index's snapshot to the file: each write
// to the memories adds the rows it touched, in its own transaction.

// allRows, logged as a changed seq, says that every row changed (the
// vectors were dropped): no snapshot from before can be brought up to
// date.
const allRows = 0

// logChanges logs seqs as changed in tx and returns the generation of the
// last; 0 when seqs is empty. One statement for all of them: gen is the
// rowid, so the last one written is the last insert's id.
func (d *DB) logChanges(ctx context.Context, tx *sql.Tx, seqs []int64) (int64, error) {
	if len(seqs) == 0 {
		return 0, nil
	}
	list, err := json.Marshal(seqs)
	if err != nil {
		return 0, err
	}
	res, err := tx.StmtContext(ctx, d.stmts.changes).ExecContext(ctx, string(list))
	if err != nil {
		return 0, fmt.Errorf("change log: %w", err)
	}
	gen, err := res.LastInsertId()
	if err != nil {
		return 0, fmt.Errorf("change log: %w", err)
	}
	return gen, nil
}

// readMeta reads the store's id (made on its first open) and the
// generation of its last change.
func (d *DB) readMeta(ctx context.Context) error {
	id := make([]byte, 8)
	if _, err := rand.Read(id); err != nil {
		return err
	}
	if _, err := d.db.ExecContext(ctx, `INSERT INTO meta (key, value) VALUES ('store_id', ?) ON CONFLICT(key) DO NOTHING`, hex.EncodeToString(id)); err != nil {
		return err
	}
	if err := d.db.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = 'store_id'`).Scan(&d.id); err != nil {
		return err
	}
	if len(d.id) != 16 {
		return fmt.Errorf("store id %q", d.id)
	}
	var gen sql.NullInt64
	if err := d.db.QueryRowContext(ctx, `SELECT max(gen) FROM changes`).Scan(&gen); err != nil {
		return err
	}
	// The log may be pruned whole (by the last snapshot).
	pruned, err := d.metaInt(ctx, "changes_pruned_through")
	if err != nil {
		return err
	}
	d.gen = max(gen.Int64, pruned)
	return nil
}

// metaInt reads an integer of the meta table; 0 when it has none.
func (d *DB) metaInt(ctx context.Context, key string) (int64, error) {
	var v string
	err := d.db.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = ?`, key).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s is %q, not a number", key, v)
	}
	return n, nil
}
