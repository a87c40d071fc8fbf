// Package embedded is vera's default memory store: one SQLite file under
// the data directory (pure Go, no cgo, nothing to install), written in WAL
// mode with a full sync on every commit so that an acknowledged write
// survives kill -9 and power loss. Searches run on an in-memory index that
// is rebuilt from the file at open: BM25 over memory.Terms for the lexical
// side, normalised float32 vectors (with sign-bit pre-ranking on large
// namespaces) for the vector side, fused by reciprocal rank.
//
// The same file holds the durable queue of turns waiting to be stored.
package embedded

import (
	"context"
	"database/sql"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/vera-proxy/vera/memory"
)

// FileName is the store's file inside the data directory.
const FileName = "vera.db"

const schema = `
CREATE TABLE IF NOT EXISTS memories (
	seq       INTEGER PRIMARY KEY AUTOINCREMENT,
	id        TEXT NOT NULL UNIQUE,
	namespace TEXT NOT NULL,
	type      TEXT NOT NULL,
	text      TEXT NOT NULL,
	ts        INTEGER NOT NULL,
	model     TEXT NOT NULL DEFAULT '',
	metadata  TEXT,
	tokens    INTEGER NOT NULL DEFAULT 0,
	vector    BLOB
);
CREATE INDEX IF NOT EXISTS memories_ns_ts ON memories(namespace, ts);
CREATE INDEX IF NOT EXISTS memories_ns_id ON memories(namespace, id);
CREATE TABLE IF NOT EXISTS queue (
	id    TEXT PRIMARY KEY,
	seq   INTEGER NOT NULL,
	body  TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS seen (
	namespace TEXT PRIMARY KEY,
	name      TEXT NOT NULL DEFAULT '',
	email     TEXT NOT NULL DEFAULT '',
	last_seen INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS meta (
	key   TEXT PRIMARY KEY,
	value TEXT NOT NULL
);
`

// ErrInUse is returned by Open when another process (another vera) has
// the data directory open.
var ErrInUse = errors.New("in use by another process (another vera on the same data dir?)")

// DB is the embedded store. It implements memory.Store and memory.Queue.
type DB struct {
	path string
	db   *sql.DB

	wmu sync.Mutex // serialises writes so the file and the index agree

	mu   sync.RWMutex
	ns   map[string]*index
	dim  int // vector size of the stored vectors; 0 until the first
	load loadState
}

var (
	_ memory.Store = (*DB)(nil)
	_ memory.Queue = (*DB)(nil)
)

// Open opens (creating if needed) the store in dir and loads its index
// before it returns.
func Open(ctx context.Context, dir string) (*DB, error) {
	d, err := Start(ctx, dir)
	if err != nil {
		return nil, err
	}
	if err := d.Wait(ctx); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

// Start opens (creating if needed) the store in dir and returns at once,
// its index loading in the background: it takes writes and serves the
// queue, Get, Latest and Scroll from the file meanwhile, and Search says
// memory.ErrLoading until the index is ready (Loading, Wait). Only one
// process may have a data directory open: a second one gets a clear
// error instead of two diverging indexes.
func Start(ctx context.Context, dir string) (*DB, error) {
	return start(ctx, dir, nil)
}

// start is Start, calling afterChunk between two chunks of the load.
func start(ctx context.Context, dir string, afterChunk func()) (*DB, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("embedded store: %w", err)
	}
	path := filepath.Join(dir, FileName)
	q := url.Values{}
	for _, p := range []string{"journal_mode(WAL)", "synchronous(FULL)", "busy_timeout(2000)", "locking_mode(EXCLUSIVE)"} {
		q.Add("_pragma", p)
	}
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("embedded store %s: %w", path, err)
	}
	// One connection: exclusive locking holds the file for this process,
	// and SQLite serialises writers anyway.
	db.SetMaxOpenConns(1)
	d := &DB{path: path, db: db, ns: map[string]*index{}}
	if _, err := db.ExecContext(ctx, schema); err != nil {
		db.Close()
		if strings.Contains(err.Error(), "locked") || strings.Contains(err.Error(), "busy") {
			return nil, fmt.Errorf("embedded store %s is %w: %w", path, ErrInUse, err)
		}
		return nil, fmt.Errorf("embedded store %s: %w", path, err)
	}
	dim, err := d.storedDim(ctx)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("embedded store %s: %w", path, err)
	}
	d.dim = dim
	d.load.afterChunk = afterChunk
	d.startLoad(ctx)
	return d, nil
}

// Path returns the store's file.
func (d *DB) Path() string { return d.path }

// Close stops a load under way and closes the file.
func (d *DB) Close() error {
	d.load.cancel()
	<-d.load.done
	return d.db.Close()
}

// indexIn returns the index of namespace name in ns, made when new.
func indexIn(ns map[string]*index, name string) *index {
	ix := ns[name]
	if ix == nil {
		ix = newIndex()
		ns[name] = ix
	}
	return ix
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

// Upsert writes memories in one transaction, replacing any with the same
// id, and returns once the transaction is on disk.
func (d *DB) Upsert(ctx context.Context, ms ...memory.Memory) error {
	if len(ms) == 0 {
		return nil
	}
	for i := range ms {
		if err := ms[i].Validate(); err != nil {
			return err
		}
		ms[i].Time = ms[i].Time.UTC()
	}
	d.wmu.Lock()
	defer d.wmu.Unlock()
	dim := d.dim
	for _, m := range ms {
		if len(m.Vector) == 0 {
			continue
		}
		if dim == 0 {
			dim = len(m.Vector)
		}
		if len(m.Vector) != dim {
			return fmt.Errorf("memory %s: vector has %d dimensions, the store holds %d (changed embedding model? see ResetVectors)", m.ID, len(m.Vector), dim)
		}
	}
	err := d.tx(ctx, func(tx *sql.Tx) error {
		st, err := tx.PrepareContext(ctx, `INSERT INTO memories (id, namespace, type, text, ts, model, metadata, tokens, vector)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT(id) DO UPDATE SET namespace=excluded.namespace, type=excluded.type, text=excluded.text,
				ts=excluded.ts, model=excluded.model, metadata=excluded.metadata, tokens=excluded.tokens, vector=excluded.vector`)
		if err != nil {
			return err
		}
		defer st.Close()
		for _, m := range ms {
			var meta any
			if len(m.Metadata) > 0 {
				b, err := json.Marshal(m.Metadata)
				if err != nil {
					return fmt.Errorf("memory %s: metadata: %w", m.ID, err)
				}
				meta = string(b)
			}
			var vec any
			if len(m.Vector) > 0 {
				vec = encodeVector(m.Vector)
			}
			if _, err := st.ExecContext(ctx, m.ID, m.Namespace, string(m.Type), m.Text, m.Time.UnixNano(), m.Model, meta, m.Tokens, vec); err != nil {
				return fmt.Errorf("memory %s: %w", m.ID, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("upsert: %w", err)
	}
	ms = slices.Clone(ms) // kept past the call while the index loads
	d.mu.Lock()
	defer d.mu.Unlock()
	d.dim = dim
	d.change(func(nsm map[string]*index) {
		for _, m := range ms {
			// An id may move between namespaces.
			for _, ix := range nsm {
				if _, ok := ix.slot[m.ID]; ok {
					ix.remove(m.ID)
				}
			}
			indexIn(nsm, m.Namespace).add(m, normalize(m.Vector))
		}
	})
	return nil
}

// SetVectors sets vectors of memories whose text is unchanged.
func (d *DB) SetVectors(ctx context.Context, ms ...memory.Memory) error {
	d.wmu.Lock()
	defer d.wmu.Unlock()
	dim := d.dim
	for _, m := range ms {
		if dim == 0 {
			dim = len(m.Vector)
		}
		if len(m.Vector) != dim {
			return fmt.Errorf("memory %s: vector has %d dimensions, the store holds %d", m.ID, len(m.Vector), dim)
		}
	}
	var set []memory.Memory
	err := d.tx(ctx, func(tx *sql.Tx) error {
		set = set[:0]
		for _, m := range ms {
			res, err := tx.ExecContext(ctx, `UPDATE memories SET vector = ? WHERE id = ? AND text = ?`, encodeVector(m.Vector), m.ID, m.Text)
			if err != nil {
				return fmt.Errorf("memory %s: %w", m.ID, err)
			}
			if n, _ := res.RowsAffected(); n == 1 {
				set = append(set, m)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("set vectors: %w", err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(set) > 0 {
		d.dim = dim
	}
	d.change(func(nsm map[string]*index) {
		for _, m := range set {
			for _, ix := range nsm {
				if s, ok := ix.slot[m.ID]; ok {
					old := ix.docs[s].mem
					ix.add(old, normalize(m.Vector))
				}
			}
		}
	})
	return nil
}

// deleteIDs deletes rows of table by id in one transaction; the caller
// holds wmu.
func (d *DB) deleteIDs(ctx context.Context, table string, ids []string) error {
	return d.tx(ctx, func(tx *sql.Tx) error {
		for _, id := range ids {
			if _, err := tx.ExecContext(ctx, `DELETE FROM `+table+` WHERE id = ?`, id); err != nil {
				return err
			}
		}
		return nil
	})
}

func (d *DB) tx(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

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
	defer d.mu.RUnlock()
	if err := d.ready(); err != nil {
		return nil, err
	}
	ix := d.ns[q.Namespace]
	if ix == nil {
		return nil, nil
	}
	return ix.search(&q, qvec), nil
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

// Latest returns the newest memories matching f, newest first (equal
// times: the later written first). It reads the in-memory index, which
// holds every memory but its vector, as a query of SQLite would; while the
// index loads, it asks the file.
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
	defer d.mu.RUnlock()
	ix := d.ns[f.Namespace]
	if ix == nil {
		return nil, nil
	}
	return ix.latest(&f, limit), nil
}

// Scroll pages through the memories matching f in id order; the cursor is
// the last id of the previous page.
func (d *DB) Scroll(ctx context.Context, f memory.Filter, cursor string, limit int) ([]memory.Memory, string, error) {
	if limit <= 0 {
		limit = 100
	}
	if f.NoVector && !d.anyMatch(ctx, f, nil) {
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

// anyMatch reports whether the index holds a memory that f's namespace
// (every namespace when empty), types, times and NoVector allow, and that
// also passes more, when set. It is a superset of what a query of f
// returns: false means the query would return nothing. Its callers are
// background work, which waits for the index to load (the query they
// would make instead reads every row).
func (d *DB) anyMatch(ctx context.Context, f memory.Filter, more func(*doc) bool) bool {
	if d.Wait(ctx) != nil {
		return true
	}
	d.mu.RLock()
	defer d.mu.RUnlock()
	sf := compile(&f)
	for ns, ix := range d.ns {
		if f.Namespace != "" && ns != f.Namespace {
			continue
		}
		for s := range ix.meta {
			if sf.ok(&ix.meta[s]) && (more == nil || more(&ix.docs[s])) {
				return true
			}
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

// Delete removes memories by id.
func (d *DB) Delete(ctx context.Context, ids ...string) error {
	if len(ids) == 0 {
		return nil
	}
	d.wmu.Lock()
	defer d.wmu.Unlock()
	if err := d.deleteIDs(ctx, "memories", ids); err != nil {
		return fmt.Errorf("delete: %w", err)
	}
	ids = slices.Clone(ids)
	d.mu.Lock()
	defer d.mu.Unlock()
	d.change(func(nsm map[string]*index) {
		for _, id := range ids {
			for _, ix := range nsm {
				ix.remove(id)
			}
		}
	})
	return nil
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

// VectorSpace records which embedding model made the stored vectors. When
// the model or its dimension changed, the old vectors are dropped (they
// cannot be compared with new ones) and reset is true: the memories stay,
// searchable lexically, and are embedded again by the backfill.
func (d *DB) VectorSpace(ctx context.Context, model string, dim int) (reset bool, err error) {
	want := fmt.Sprintf("%s/%d", model, dim)
	d.wmu.Lock()
	defer d.wmu.Unlock()
	var have string
	err = d.db.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = 'vector_space'`).Scan(&have)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return false, fmt.Errorf("vector space: %w", err)
	}
	if have == want {
		return false, nil
	}
	reset = d.dim != 0 && (have != "" || d.dim != dim)
	err = d.tx(ctx, func(tx *sql.Tx) error {
		if reset {
			if _, err := tx.ExecContext(ctx, `UPDATE memories SET vector = NULL WHERE vector IS NOT NULL`); err != nil {
				return err
			}
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO meta (key, value) VALUES ('vector_space', ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value`, want)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("vector space: %w", err)
	}
	if reset {
		d.mu.Lock()
		d.dim = 0
		d.change(func(nsm map[string]*index) {
			for _, ix := range nsm {
				ix.dropVectors()
			}
		})
		d.mu.Unlock()
	}
	return reset, nil
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
