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
	"database/sql/driver"
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
	"sync/atomic"
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
CREATE TABLE IF NOT EXISTS changes (
	gen INTEGER PRIMARY KEY AUTOINCREMENT,
	seq INTEGER NOT NULL
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

	// rowsStmt reads rows by seq (rowsQuery); cache keeps those read.
	rowsStmt *sql.Stmt
	cache    rowCache
	// stmts are what every turn runs, prepared once: SQLite parses a
	// statement each time it is run from its text.
	stmts statements

	mu   sync.RWMutex
	ns   map[string]*index
	dim  int   // vector size of the stored vectors; 0 until the first
	gen  int64 // the last change the index holds (the changes table)
	load loadState

	// id names the store in its snapshot; snapGen is the generation of
	// the snapshot on disk. snapMu lets one snapshot be written at once.
	id      string
	snapMu  sync.Mutex
	snapGen int64
	bg      sync.WaitGroup // a snapshot written after the load

	// j is the queue's journal, where Enqueue writes (journal.go).
	j *journal
	// plansExpired is when plans unused for memory.PlanTTL were last
	// dropped (plans.go).
	plansExpired atomic.Int64
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
	// A larger page cache than SQLite's 2 MB: searches read their hits'
	// rows from the file, and the latest turns are read by every chat.
	for _, p := range []string{"journal_mode(WAL)", "synchronous(FULL)", "busy_timeout(2000)", "locking_mode(EXCLUSIVE)", "cache_size(-16384)", "secure_delete(ON)"} {
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
	if _, err := db.ExecContext(ctx, schema+plansSchema+usageSchema+historySchema+withheldSchema); err != nil {
		db.Close()
		if strings.Contains(err.Error(), "locked") || strings.Contains(err.Error(), "busy") {
			return nil, fmt.Errorf("embedded store %s is %w: %w", path, ErrInUse, err)
		}
		return nil, fmt.Errorf("embedded store %s: %w", path, err)
	}
	dim, err := d.storedDim(ctx)
	if err == nil {
		err = d.readMeta(ctx)
	}
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("embedded store %s: %w", path, err)
	}
	d.dim = dim
	// The progress's total until the load counts the rows: the last
	// seq, which a store read at once (no row was deleted) equals.
	var last sql.NullInt64
	if err := db.QueryRowContext(ctx, `SELECT max(seq) FROM memories`).Scan(&last); err == nil {
		d.load.total.Store(last.Int64)
	}
	if d.rowsStmt, err = db.PrepareContext(ctx, rowsQuery); err == nil {
		err = d.stmts.prepare(ctx, db)
	}
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("embedded store %s: %w", path, err)
	}
	j, jfile, err := openJournal(dir)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("embedded store: the queue's journal in %s: %w", dir, err)
	}
	d.j = j
	if err := d.replayJournal(ctx, jfile); err != nil {
		j.f.Close()
		db.Close()
		return nil, fmt.Errorf("embedded store: the queue's journal in %s: %w", dir, err)
	}
	// A run killed before it checkpointed leaves erased rows' older pages
	// in the write-ahead log (erase.go).
	if err := d.checkpoint(ctx); err != nil {
		j.f.Close()
		db.Close()
		return nil, fmt.Errorf("embedded store %s: %w", path, err)
	}
	d.cache.size = 8192
	d.load.afterChunk = afterChunk
	d.startLoad(ctx)
	return d, nil
}

// Path returns the store's file.
func (d *DB) Path() string { return d.path }

// Close stops a load under way, writes the index's snapshot when it
// changed, and closes the file.
func (d *DB) Close() error {
	d.load.cancel()
	<-d.load.done
	d.bg.Wait()
	var err error
	d.mu.RLock()
	stale := d.gen-d.snapGen >= snapshotAfter
	d.mu.RUnlock()
	if stale {
		err = d.saveSnapshot(context.Background())
	}
	// The journal's records into the table, synced: a clean stop leaves
	// nothing to replay.
	d.wmu.Lock()
	jerr := d.closeJournal(context.Background())
	d.wmu.Unlock()
	if jerr != nil {
		jerr = fmt.Errorf("embedded store: the queue's journal: %w", jerr)
	}
	return errors.Join(err, jerr, d.j.f.Close(), d.rowsStmt.Close(), d.stmts.close(), d.db.Close())
}

// snapshotAfter is how many changes make a snapshot worth writing at
// close (fewer are read again at the next start, which costs less than
// writing the whole index: vera mcp opens and closes the store for each
// call); snapshotEvery is how many make one worth writing at once.
const (
	snapshotAfter = 1000
	snapshotEvery = 50_000
)

// maybeSnapshot writes a snapshot in the background when the index has
// changed much since the last one, so that a start after a crash has
// little to read again.
func (d *DB) maybeSnapshot() {
	d.mu.RLock()
	due := d.gen-d.snapGen >= snapshotEvery && !d.load.active
	d.mu.RUnlock()
	if due && d.snapMu.TryLock() {
		d.snapMu.Unlock()
		d.bg.Go(func() { _ = d.saveSnapshot(context.Background()) })
	}
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
	return d.upsert(ctx, ms, nil, d.tx)
}

// Settle stores memories the writer took from the durable queue, and
// takes done off the queue, in one transaction that is not waited onto
// the disk (memory.Settler): the queue (its journal, or its table) keeps
// the turns until a later synced commit (any edit's, a new round of the
// journal's) carries this one to the disk, and if power fails first they
// are stored again from the queue. A chat's commit then never waits
// behind the fsyncs of the turn before.
func (d *DB) Settle(ctx context.Context, ms []memory.Memory, done []string) error {
	if len(ms) == 0 && len(done) == 0 {
		return nil
	}
	return d.upsert(ctx, ms, done, d.relaxedTx)
}

// upsert is Upsert, taking done off the queue in the same transaction,
// which runs in tx.
func (d *DB) upsert(ctx context.Context, ms []memory.Memory, done []string, tx func(context.Context, func(*sql.Tx) error) error) error {
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
	seqs := make([]int64, len(ms))
	var gen int64
	err := d.queueTx(ctx, tx, done, func(tx *sql.Tx) error {
		for _, id := range done {
			if _, err := tx.StmtContext(ctx, d.stmts.dequeue).ExecContext(ctx, id); err != nil {
				return err
			}
		}
		if len(ms) == 0 {
			return nil
		}
		st := tx.StmtContext(ctx, d.stmts.upsert)
		for i, m := range ms {
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
			// An upsert keeps the row's seq: the index knows the memory
			// by it.
			if err := st.QueryRowContext(ctx, m.ID, m.Namespace, string(m.Type), m.Text, m.Time.UnixNano(), m.Model, meta, m.Tokens, vec).Scan(&seqs[i]); err != nil {
				return fmt.Errorf("memory %s: %w", m.ID, err)
			}
		}
		var err error
		gen, err = d.logChanges(ctx, tx, seqs)
		return err
	})
	if err != nil {
		return fmt.Errorf("upsert: %w", err)
	}
	ms = slices.Clone(ms) // kept past the call while the index loads
	d.cache.drop(seqs)
	d.mu.Lock()
	d.dim, d.gen = dim, max(d.gen, gen)
	d.change(func(nsm map[string]*index) {
		for i := range ms {
			// An id may move between namespaces.
			for _, ix := range nsm {
				ix.remove(seqs[i])
			}
			indexIn(nsm, ms[i].Namespace).add(seqs[i], &ms[i], normalize(ms[i].Vector))
		}
	})
	d.mu.Unlock()
	d.maybeSnapshot()
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
	type vecSet struct {
		seq int64
		vec []float32
	}
	var set []vecSet
	var seqs []int64
	var gen int64
	err := d.tx(ctx, func(tx *sql.Tx) error {
		set = set[:0]
		for _, m := range ms {
			seq, ok, err := seqOf(tx.QueryRowContext(ctx, `UPDATE memories SET vector = ? WHERE id = ? AND text = ? RETURNING seq`, encodeVector(m.Vector), m.ID, m.Text))
			if err != nil {
				return fmt.Errorf("memory %s: %w", m.ID, err)
			}
			if ok {
				set = append(set, vecSet{seq, normalize(m.Vector)})
			}
		}
		seqs = make([]int64, len(set))
		for i, v := range set {
			seqs[i] = v.seq
		}
		var err error
		gen, err = d.logChanges(ctx, tx, seqs)
		return err
	})
	if err != nil {
		return fmt.Errorf("set vectors: %w", err)
	}
	d.cache.drop(seqs)
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(set) > 0 {
		d.dim, d.gen = dim, max(d.gen, gen)
	}
	d.change(func(nsm map[string]*index) {
		for _, v := range set {
			for _, ix := range nsm {
				ix.setVector(v.seq, v.vec)
			}
		}
	})
	return nil
}

// seqOf reads the seq a write of one row returned; ok is false when it
// touched none.
func seqOf(row *sql.Row) (seq int64, ok bool, err error) {
	err = row.Scan(&seq)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	return seq, err == nil, err
}

// relaxedTx is tx at synchronous NORMAL: the commit is in the
// write-ahead log, which the next commit at FULL (every other write, and
// the queue's journal before it is written over) carries to the disk with
// its own; a crash of vera loses nothing, a power cut may lose it. The connection is back at FULL before anyone
// else has it, or is dropped.
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
func (d *DB) anyMatch(ctx context.Context, f memory.Filter, more func(*slotMeta) bool) bool {
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
			if sf.ok(&ix.meta[s]) && (more == nil || more(&ix.meta[s])) {
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
	var seqs []int64
	var gen int64
	err := d.tx(ctx, func(tx *sql.Tx) error {
		seqs = seqs[:0]
		for _, id := range ids {
			seq, ok, err := seqOf(tx.QueryRowContext(ctx, `DELETE FROM memories WHERE id = ? RETURNING seq`, id))
			if err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `DELETE FROM usage WHERE id = ?`, id); err != nil {
				return err
			}
			if ok {
				seqs = append(seqs, seq)
			}
		}
		var err error
		gen, err = d.logChanges(ctx, tx, seqs)
		return err
	})
	if err != nil {
		d.wmu.Unlock()
		return fmt.Errorf("delete: %w", err)
	}
	d.cache.drop(seqs)
	d.mu.Lock()
	d.gen = max(d.gen, gen)
	d.change(func(nsm map[string]*index) {
		touched := map[*index]bool{}
		for _, seq := range seqs {
			for _, ix := range nsm {
				if _, ok := ix.bySeq[seq]; ok {
					ix.remove(seq)
					touched[ix] = true
				}
			}
		}
		for ix := range touched {
			ix.scrub()
		}
	})
	d.mu.Unlock()
	d.wmu.Unlock()
	if len(seqs) == 0 {
		return nil
	}
	// Erased, not only deleted (erase.go).
	if err := d.erase(ctx); err != nil {
		return fmt.Errorf("delete: erasing: %w", err)
	}
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
	var gen int64
	err = d.tx(ctx, func(tx *sql.Tx) error {
		if reset {
			if _, err := tx.ExecContext(ctx, `UPDATE memories SET vector = NULL WHERE vector IS NOT NULL`); err != nil {
				return err
			}
			// Every row changed: a snapshot from before cannot be
			// brought up to date.
			if gen, err = d.logChanges(ctx, tx, []int64{allRows}); err != nil {
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
		d.cache.drop(nil)
		d.mu.Lock()
		d.dim, d.gen = 0, gen
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
