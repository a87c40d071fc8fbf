package embedded

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/vera-proxy/vera/memory"
)

// The SQL side: transactions, the statements every turn runs, and
// memories to and from rows.

// relaxedTx is tx at synchronous NORMAL: the commit is in the
// write-ahead log, which the next commit at FULL (every other write, and
// the queue's journal before it is written over) carries to the disk with
// its own; a crash of vera loses nothing, a power cut may lose it. The
// connection is back at FULL before anyone else has it, or is dropped.
func (d *DB) relaxedTx(ctx context.Context, fn func(*sql.Tx) error) error {
	conn, err := d.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	// Set up first: the pragma below can take effect and still report
	// an error (its context ended while it ran).
	defer func() {
		if _, err := conn.ExecContext(context.WithoutCancel(ctx), `PRAGMA synchronous = FULL`); err != nil {
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		}
	}()
	if _, err := conn.ExecContext(ctx, `PRAGMA synchronous = NORMAL`); err != nil {
		return err
	}
	return inTx(ctx, conn, fn)
}

func (d *DB) tx(ctx context.Context, fn func(*sql.Tx) error) error {
	return inTx(ctx, d.db, fn)
}

// statements are the statements every turn runs, prepared once.
type statements struct {
	enqueue, pending, dequeue, upsert, changes, mark *sql.Stmt
}

func (st *statements) prepare(ctx context.Context, db *sql.DB) error {
	for _, s := range []struct {
		to    **sql.Stmt
		query string
	}{
		{&st.enqueue, `INSERT INTO queue (id, seq, body) VALUES (?, ?, ?) ON CONFLICT(id) DO UPDATE SET body = excluded.body`},
		{&st.pending, `SELECT id, body FROM queue ORDER BY seq, id LIMIT ?`},
		{&st.dequeue, `DELETE FROM queue WHERE id = ?`},
		{&st.mark, `INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value`},
		{&st.upsert, `INSERT INTO memories (id, namespace, type, text, ts, model, metadata, tokens, vector)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT(id) DO UPDATE SET namespace=excluded.namespace, type=excluded.type, text=excluded.text,
				ts=excluded.ts, model=excluded.model, metadata=excluded.metadata, tokens=excluded.tokens, vector=excluded.vector
			RETURNING seq`},
		{&st.changes, `INSERT INTO changes (seq) SELECT value FROM json_each(?)`},
	} {
		var err error
		if *s.to, err = db.PrepareContext(ctx, s.query); err != nil {
			return err
		}
	}
	return nil
}

func (st *statements) close() error {
	var errs []error
	for _, s := range []*sql.Stmt{st.enqueue, st.pending, st.dequeue, st.upsert, st.changes, st.mark} {
		if s != nil {
			errs = append(errs, s.Close())
		}
	}
	return errors.Join(errs...)
}

// inTx runs fn in a transaction of db (the pool, or one connection).
func inTx(ctx context.Context, db interface {
	BeginTx(context.Context, *sql.TxOptions) (*sql.Tx, error)
}, fn func(*sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// where renders f as a SQL condition and its arguments.
func where(f memory.Filter) (string, []any) {
	conds := []string{"namespace = ?"}
	args := []any{f.Namespace}
	if len(f.Types) > 0 {
		conds = append(conds, "type IN (?"+strings.Repeat(", ?", len(f.Types)-1)+")")
		for _, t := range f.Types {
			args = append(args, string(t))
		}
	}
	if !f.Since.IsZero() {
		conds = append(conds, "ts >= ?")
		args = append(args, f.Since.UnixNano())
	}
	if !f.Until.IsZero() {
		conds = append(conds, "ts < ?")
		args = append(args, f.Until.UnixNano())
	}
	if f.NoVector {
		conds = append(conds, "vector IS NULL")
	}
	return strings.Join(conds, " AND "), args
}

func (d *DB) query(ctx context.Context, q string, args ...any) ([]memory.Memory, error) {
	rows, err := d.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []memory.Memory
	for rows.Next() {
		m, err := scan(rows, false)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, rows.Err()
}

const columns = `id, namespace, type, text, ts, model, metadata, tokens`

type scanner interface{ Scan(...any) error }

// scan reads a row of columns (then the vector, withVector; then more,
// such as the seq).
func scan(r scanner, withVector bool, more ...any) (memory.Memory, error) {
	var (
		m    memory.Memory
		ts   int64
		meta sql.NullString
		vec  []byte
	)
	dest := []any{&m.ID, &m.Namespace, &m.Type, &m.Text, &ts, &m.Model, &meta, &m.Tokens}
	if withVector {
		dest = append(dest, &vec)
	}
	dest = append(dest, more...)
	if err := r.Scan(dest...); err != nil {
		return m, err
	}
	m.Time = time.Unix(0, ts).UTC()
	if meta.Valid && meta.String != "" {
		if err := json.Unmarshal([]byte(meta.String), &m.Metadata); err != nil {
			return m, fmt.Errorf("memory %s: metadata: %w", m.ID, err)
		}
	}
	if len(vec) > 0 {
		m.Vector = decodeVector(vec)
	}
	return m, nil
}

func encodeVector(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

func decodeVector(b []byte) []float32 {
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}
