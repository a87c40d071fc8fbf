package embedded

import (
	"context"
	"database/sql"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/memory"
)

// nonZero returns a non-zero value of type t, or fails for a kind it does
// not know (extend it along with the field).
func nonZero(t *testing.T, typ reflect.Type) reflect.Value {
	t.Helper()
	v := reflect.New(typ).Elem()
	switch {
	case typ == reflect.TypeFor[time.Time]():
		v.Set(reflect.ValueOf(time.Date(2025, 3, 4, 5, 6, 7, 891011121, time.UTC)))
		return v
	case typ == reflect.TypeFor[memory.Type]():
		v.SetString(string(memory.Curated))
		return v
	}
	switch typ.Kind() {
	case reflect.String:
		v.SetString("x-" + typ.Name())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(42)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(42)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(-1.25)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Slice:
		v.Set(reflect.Append(v, nonZero(t, typ.Elem()), nonZero(t, typ.Elem())))
	case reflect.Map:
		v.Set(reflect.MakeMap(typ))
		if typ.Elem().Kind() == reflect.Interface {
			// What JSON gives back for any: a string is the same type after.
			v.SetMapIndex(nonZero(t, typ.Key()), reflect.ValueOf("v"))
		} else {
			v.SetMapIndex(nonZero(t, typ.Key()), nonZero(t, typ.Elem()))
		}
	case reflect.Pointer:
		p := reflect.New(typ.Elem())
		p.Elem().Set(nonZero(t, typ.Elem()))
		v.Set(p)
	case reflect.Struct:
		for i := range typ.NumField() {
			if typ.Field(i).IsExported() {
				v.Field(i).Set(nonZero(t, typ.Field(i).Type))
			}
		}
	default:
		t.Fatalf("nonZero: no value for %s: teach the test this kind", typ)
	}
	return v
}

// fullMemory is a valid memory with every field set.
func fullMemory(t *testing.T) memory.Memory {
	t.Helper()
	var m memory.Memory
	reflect.ValueOf(&m).Elem().Set(nonZero(t, reflect.TypeFor[memory.Memory]()))
	m.ID = memory.NewID()
	m.Vector = []float32{0.5, -1.25, 3e-7}
	rv := reflect.ValueOf(m)
	for i := range rv.NumField() {
		require.False(t, rv.Field(i).IsZero(), "field %s of the fixture is zero", rv.Type().Field(i).Name)
	}
	require.NoError(t, m.Validate())
	return m
}

// TestQueueCarriesEveryField fails when memory.Memory gains a field that
// the queue's encoding (queueEntry) does not carry: add it there.
func TestQueueCarriesEveryField(t *testing.T) {
	m := fullMemory(t)

	b, err := encodeQueued(m)
	require.NoError(t, err)
	got, err := decodeQueued(b)
	require.NoError(t, err)
	assert.Equal(t, m, got, "a field is lost through the queue's encoding: add it to queueEntry")

	ctx := context.Background()
	db, err := Open(ctx, t.TempDir())
	require.NoError(t, err)
	defer db.Close()
	require.NoError(t, db.Enqueue(ctx, m))
	pending, err := db.Pending(ctx, 10)
	require.NoError(t, err)
	require.Len(t, pending, 1)
	assert.Equal(t, m, pending[0], "a field is lost through the queue")
}

func TestQueueKeepsTokens(t *testing.T) {
	ctx := context.Background()
	db, err := Open(ctx, t.TempDir())
	require.NoError(t, err)
	defer db.Close()
	m := memory.Memory{ID: memory.NewID(), Namespace: "a", Type: memory.Raw, Text: "User: hi\nAssistant: hello", Time: time.Now().UTC(), Tokens: 9}
	require.NoError(t, db.Enqueue(ctx, m))
	pending, err := db.Pending(ctx, 10)
	require.NoError(t, err)
	require.Len(t, pending, 1)
	assert.Equal(t, 9, pending[0].Tokens)
	require.NoError(t, db.Upsert(ctx, pending...))
	got, err := db.Get(ctx, m.ID)
	require.NoError(t, err)
	assert.Equal(t, 9, got.Tokens, "stored with its count")
}

// Rows written by earlier versions (plain JSON of a memory.Memory) still
// decode, their count unknown.
func TestQueueReadsOldRows(t *testing.T) {
	ctx := context.Background()
	db, err := Open(ctx, t.TempDir())
	require.NoError(t, err)
	defer db.Close()
	old := `{"id":"0195a0c4-1d2e-7f00-8a00-000000000001","namespace":"alice","type":"raw","text":"User: my cat is Miso\nAssistant: noted","timestamp":"2025-03-04T05:06:07.891011121Z","model":"llama3.2","metadata":{"source":"chat"}}`
	_, err = db.db.ExecContext(ctx, `INSERT INTO queue (id, seq, body) VALUES (?, ?, ?)`, "0195a0c4-1d2e-7f00-8a00-000000000001", 1, old)
	require.NoError(t, err)
	m := memory.Memory{ID: memory.NewID(), Namespace: "alice", Type: memory.Raw, Text: "User: new\nAssistant: turn", Time: time.Now().UTC(), Tokens: 7}
	require.NoError(t, db.Enqueue(ctx, m))

	pending, err := db.Pending(ctx, 10)
	require.NoError(t, err)
	require.Len(t, pending, 2)
	assert.Equal(t, memory.Memory{
		ID: "0195a0c4-1d2e-7f00-8a00-000000000001", Namespace: "alice", Type: memory.Raw,
		Text: "User: my cat is Miso\nAssistant: noted", Time: time.Date(2025, 3, 4, 5, 6, 7, 891011121, time.UTC),
		Model: "llama3.2", Metadata: map[string]any{"source": "chat"},
	}, pending[0])
	assert.Equal(t, m, pending[1])
}

func TestQueueRefusesNewerRows(t *testing.T) {
	_, err := decodeQueued([]byte(`{"v":99,"id":"x"}`))
	assert.ErrorContains(t, err, "version 99")
	_, err = decodeQueued([]byte(`not json`))
	assert.Error(t, err)
}

// Settle stores queued memories and takes them off the queue in one
// transaction at synchronous NORMAL, and hands the connection on at
// FULL: the next turn's commit must reach the disk.
func TestSettleStoresAndDequeues(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db, err := Open(ctx, dir)
	require.NoError(t, err)
	a := memory.Memory{ID: memory.NewID(), Namespace: "a", Type: memory.Raw, Text: "User: my cat is Tom\nAssistant: noted", Time: time.Now().UTC(), Tokens: 9}
	b := memory.Memory{ID: memory.NewID(), Namespace: "a", Type: memory.Raw, Text: "User: forgotten\nAssistant: yes", Time: time.Now().UTC()}
	require.NoError(t, db.Enqueue(ctx, a, b))
	require.NoError(t, db.Settle(ctx, []memory.Memory{a}, []string{a.ID, b.ID}), "b was forgotten meanwhile: dequeued, not stored")
	n, err := db.Len(ctx)
	require.NoError(t, err)
	assert.Zero(t, n)
	got, err := db.Get(ctx, a.ID)
	require.NoError(t, err)
	assert.Equal(t, a.Text, got.Text)
	_, err = db.Get(ctx, b.ID)
	assert.ErrorIs(t, err, memory.ErrNotFound)
	hits, err := db.Search(ctx, memory.Query{Filter: memory.Filter{Namespace: "a"}, Text: "cat Tom", Limit: 5})
	require.NoError(t, err)
	require.Len(t, hits, 1, "indexed")

	var sync int
	require.NoError(t, db.db.QueryRowContext(ctx, `PRAGMA synchronous`).Scan(&sync))
	assert.Equal(t, 2, sync, "FULL again for every other write")

	require.NoError(t, db.Settle(ctx, nil, []string{"never-queued"}), "nothing to store")
	assert.Error(t, db.Settle(ctx, []memory.Memory{{ID: "x"}}, nil), "an invalid memory is refused")

	// What was settled is there after a restart.
	require.NoError(t, db.Close())
	db, err = Open(ctx, dir)
	require.NoError(t, err)
	defer db.Close()
	got, err = db.Get(ctx, a.ID)
	require.NoError(t, err)
	assert.Equal(t, 9, got.Tokens)
	n, err = db.Len(ctx)
	require.NoError(t, err)
	assert.Zero(t, n)
}

// endingCtx ends at the n-th time its Done is asked for: somewhere inside
// a statement, so that one can take effect and still report the end.
type endingCtx struct {
	context.Context
	mu    sync.Mutex
	calls int
	n     int
	done  chan struct{}
}

func (c *endingCtx) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.calls++; c.calls == c.n {
		close(c.done)
	}
	return c.done
}

func (c *endingCtx) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.calls >= c.n {
		return context.Canceled
	}
	return nil
}

// However a relaxed transaction ends (its context ending at any point of
// it), the store's connection is at synchronous FULL afterwards: every
// later commit of a turn must reach the disk.
func TestRelaxedTxAlwaysLeavesFull(t *testing.T) {
	d, err := Open(context.Background(), t.TempDir())
	require.NoError(t, err)
	defer d.Close()
	for n := 1; n <= 40; n++ {
		for range 20 {
			ctx := &endingCtx{Context: context.Background(), n: n, done: make(chan struct{})}
			_ = d.relaxedTx(ctx, func(*sql.Tx) error { return nil })
			var level int
			require.NoError(t, d.db.QueryRowContext(context.Background(), `PRAGMA synchronous`).Scan(&level))
			require.Equal(t, 2, level, "the context ending at its look number %d", n)
		}
	}
}
