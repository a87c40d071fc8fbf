// Package embedded is vera's default memory store: one SQLite file under
// the data directory (pure Go, no cgo, nothing to install), written in WAL
// mode with a full sync on every commit so that an acknowledged write
// survives kill -9 and power loss. Searches run on an in-memory index
// (package index) that is loaded from its snapshot or rebuilt from the
// file at open: BM25 over text.Terms for the lexical side, normalised
// float32 vectors (with sign-bit pre-ranking on large namespaces) for the
// vector side, fused by reciprocal rank.
//
// The same file holds the durable queue of turns waiting to be stored,
// which Enqueue writes to the queue's journal first (package journal).
package embedded

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/vera-proxy/vera/memory"
	"github.com/vera-proxy/vera/memory/embedded/index"
	"github.com/vera-proxy/vera/memory/embedded/journal"
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

// JournalName is the queue journal's file in the data directory.
const JournalName = journal.Name

// DB is the embedded store. It implements memory.Store and memory.Queue.
type DB struct {
	path string
	db   *sql.DB
	opts options

	wmu sync.Mutex // serialises writes so the file and the index agree

	// rowsStmt reads rows by seq (rowsQuery); cache keeps those read.
	rowsStmt *sql.Stmt
	cache    rowCache
	// stmts are what every turn runs, prepared once: SQLite parses a
	// statement each time it is run from its text.
	stmts statements

	mu   sync.RWMutex
	ns   map[string]*index.Namespace
	dim  int   // vector size of the stored vectors; 0 until the first
	gen  int64 // the last change the index holds (the changes table)
	load loadState

	// id names the store in its snapshot; snapGen is the generation of
	// the snapshot on disk. snapMu lets one snapshot be written at once.
	id      string
	snapMu  sync.Mutex
	snapGen int64
	bg      sync.WaitGroup // a snapshot written after the load

	// j is the queue's journal, where Enqueue writes (queuejournal.go).
	j *journal.Journal
	// plansExpired is when plans unused for memory.PlanTTL were last
	// dropped (plans.go).
	plansExpired atomic.Int64
}

// options tune a store; the zero value is the default. Tests set them.
type options struct {
	// afterChunk is called between two chunks of the load.
	afterChunk func()
	// index tunes every namespace's index.
	index index.Options
}

var (
	_ memory.Store = (*DB)(nil)
	_ memory.Queue = (*DB)(nil)
)

// Open opens (creating if needed) the store in dir and loads its index
// before it returns.
func Open(ctx context.Context, dir string) (*DB, error) {
	return open(ctx, dir, options{})
}

// open is Open with o.
func open(ctx context.Context, dir string, o options) (*DB, error) {
	d, err := start(ctx, dir, o)
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
	return start(ctx, dir, options{})
}

// start is Start with o: the file opened, its state read, the queue's
// journal replayed, the write-ahead log emptied, then the load started.
func start(ctx context.Context, dir string, o options) (*DB, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("embedded store: %w", err)
	}
	d, err := openFile(ctx, filepath.Join(dir, FileName))
	if err != nil {
		return nil, err
	}
	d.opts = o
	if err := d.readState(ctx); err != nil {
		d.db.Close()
		return nil, fmt.Errorf("embedded store %s: %w", d.path, err)
	}
	if err := d.openJournal(ctx, dir); err != nil {
		d.db.Close()
		return nil, fmt.Errorf("embedded store: the queue's journal in %s: %w", dir, err)
	}
	// A run killed before it checkpointed leaves erased rows' older pages
	// in the write-ahead log (erase.go).
	if err := d.checkpoint(ctx); err != nil {
		d.j.Close()
		d.db.Close()
		return nil, fmt.Errorf("embedded store %s: %w", d.path, err)
	}
	d.cache.size = 8192
	d.startLoad(ctx)
	return d, nil
}

// uriPath escapes what SQLite's URI file names read otherwise: a
// directory named "notes#1" or "a?b" would have the file opened (and
// created) at the path cut short, outside the data directory.
var uriPath = strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23")

// openFile opens the store's file at path, creating its tables; it holds
// the file for this process alone.
func openFile(ctx context.Context, path string) (*DB, error) {
	q := url.Values{}
	// A larger page cache than SQLite's 2 MB: searches read their hits'
	// rows from the file, and the latest turns are read by every chat.
	for _, p := range []string{"journal_mode(WAL)", "synchronous(FULL)", "busy_timeout(2000)", "locking_mode(EXCLUSIVE)", "cache_size(-16384)", "secure_delete(ON)"} {
		q.Add("_pragma", p)
	}
	db, err := sql.Open("sqlite", "file:"+uriPath.Replace(path)+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("embedded store %s: %w", path, err)
	}
	// One connection: exclusive locking holds the file for this process,
	// and SQLite serialises writers anyway.
	db.SetMaxOpenConns(1)
	if _, err := db.ExecContext(ctx, schema+plansSchema+usageSchema+historySchema+withheldSchema); err != nil {
		db.Close()
		if strings.Contains(err.Error(), "locked") || strings.Contains(err.Error(), "busy") {
			return nil, fmt.Errorf("embedded store %s is %w: %w", path, ErrInUse, err)
		}
		return nil, fmt.Errorf("embedded store %s: %w", path, err)
	}
	return &DB{path: path, db: db, ns: map[string]*index.Namespace{}}, nil
}

// readState reads what the file keeps of the store's state (the size of
// its vectors, its id, its last change) and prepares the statements every
// turn runs.
func (d *DB) readState(ctx context.Context) error {
	dim, err := d.storedDim(ctx)
	if err == nil {
		err = d.readMeta(ctx)
	}
	if err != nil {
		return err
	}
	d.dim = dim
	// The progress's total until the load counts the rows: the last
	// seq, which a store read at once (no row was deleted) equals.
	var last sql.NullInt64
	if err := d.db.QueryRowContext(ctx, `SELECT max(seq) FROM memories`).Scan(&last); err == nil {
		d.load.total.Store(last.Int64)
	}
	if d.rowsStmt, err = d.db.PrepareContext(ctx, rowsQuery); err != nil {
		return err
	}
	return d.stmts.prepare(ctx, d.db)
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
	return errors.Join(err, jerr, d.j.Close(), d.rowsStmt.Close(), d.stmts.close(), d.db.Close())
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
func (d *DB) indexIn(ns map[string]*index.Namespace, name string) *index.Namespace {
	ix := ns[name]
	if ix == nil {
		ix = index.New(d.opts.index)
		ns[name] = ix
	}
	return ix
}
