package storetest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/memory"
)

// The contract's writes: round trips, replacing, refusing, deleting,
// hiding, and the writer in front of the store.

// testUpsertGetRoundTrip checks that a memory comes back as it was written:
// every field, its metadata, its vector's direction.
func testUpsertGetRoundTrip(ctx context.Context, t *testing.T, fresh func(*testing.T) memory.Store) {
	s := fresh(t)
	m := mem("alice", memory.Raw, 0, "User: my cat is called Miso\nAssistant: Nice name!")
	m.Metadata = map[string]any{"source": "test", "n": float64(3), "source_ids": []any{"a", "b"}}
	m.Vector = vec(Dim, 1, 2, 0.5)
	m.Tokens = 17
	require.NoError(t, s.Upsert(ctx, m))
	got, err := s.Get(ctx, m.ID)
	require.NoError(t, err)
	assert.Equal(t, m.ID, got.ID)
	assert.Equal(t, "alice", got.Namespace)
	assert.Equal(t, memory.Raw, got.Type)
	assert.Equal(t, m.Text, got.Text)
	assert.True(t, m.Time.Equal(got.Time), "time %v != %v", got.Time, m.Time)
	assert.Equal(t, time.UTC, got.Time.Location())
	assert.Equal(t, "llama3.1:8b", got.Model)
	assert.Equal(t, m.Metadata, got.Metadata)
	assert.Equal(t, 17, got.Tokens)
	// The same direction: a store may keep vectors normalised (Qdrant
	// does, for cosine).
	require.Len(t, got.Vector, Dim)
	assert.InDelta(t, 1, cosine(got.Vector, m.Vector), 1e-5)
}

// testUpsertReplacesByID checks that writing a memory again under its id
// replaces it, and a retried write changes nothing.
func testUpsertReplacesByID(ctx context.Context, t *testing.T, fresh func(*testing.T) memory.Store) {
	s := fresh(t)
	m := mem("alice", memory.Raw, 0, "User: first\nAssistant: one")
	require.NoError(t, s.Upsert(ctx, m))
	m.Text = "User: second\nAssistant: two"
	m.Type = memory.Curated
	require.NoError(t, s.Upsert(ctx, m))
	require.NoError(t, s.Upsert(ctx, m)) // a retried write
	n, err := s.Count(ctx, memory.Filter{Namespace: "alice"})
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	got, err := s.Get(ctx, m.ID)
	require.NoError(t, err)
	assert.Equal(t, "User: second\nAssistant: two", got.Text)
	assert.Equal(t, memory.Curated, got.Type)
	hits, err := s.Search(ctx, memory.Query{Filter: memory.Filter{Namespace: "alice"}, Text: "first", Limit: 5})
	require.NoError(t, err)
	assert.Empty(t, hits, "the replaced text must no longer be found")
	hits, err = s.Search(ctx, memory.Query{Filter: memory.Filter{Namespace: "alice"}, Text: "second", Limit: 5})
	require.NoError(t, err)
	assert.Equal(t, []string{m.ID}, hitIDs(hits))
}

// testSetVectorsOnlyOnUnchangedText checks that a vector found later is kept
// only while the memory's text is the one it was found for.
func testSetVectorsOnlyOnUnchangedText(ctx context.Context, t *testing.T, fresh func(*testing.T) memory.Store) {
	s := fresh(t)
	a := mem("a", memory.Raw, 0, "User: one\nAssistant: ok")
	b := mem("a", memory.Raw, 1, "User: two\nAssistant: ok")
	a.Metadata = map[string]any{"keep": "me"}
	require.NoError(t, s.Upsert(ctx, a, b))
	stale := b
	stale.Text = "User: before an edit\nAssistant: ok"
	a.Vector, stale.Vector = vec(Dim, 0, 1, 0), vec(Dim, 2, 3, 0)
	gone := mem("a", memory.Raw, 2, "User: gone\nAssistant: ok")
	gone.Vector = vec(Dim, 0, 1, 0)
	require.NoError(t, s.SetVectors(ctx, a, stale, gone))
	got, err := s.Get(ctx, a.ID)
	require.NoError(t, err)
	assert.Len(t, got.Vector, Dim)
	assert.Equal(t, a.Metadata, got.Metadata)
	got, err = s.Get(ctx, b.ID)
	require.NoError(t, err)
	assert.Nil(t, got.Vector, "text changed since the vector was made")
	_, err = s.Get(ctx, gone.ID)
	assert.ErrorIs(t, err, memory.ErrNotFound)
	hits, err := s.Search(ctx, memory.Query{Filter: memory.Filter{Namespace: "a"}, Vector: vec(Dim, 0, 1, 0), Threshold: 0.5, Limit: 5})
	require.NoError(t, err)
	assert.Equal(t, []string{a.ID}, hitIDs(hits))
}

// testInvalidMemoriesRefused checks that a memory without an id, a namespace
// or a known type is refused.
func testInvalidMemoriesRefused(ctx context.Context, t *testing.T, fresh func(*testing.T) memory.Store) {
	s := fresh(t)
	for name, m := range map[string]memory.Memory{
		"no id":        {Namespace: "a", Type: memory.Raw, Text: "x", Time: t0},
		"no namespace": {ID: memory.NewID(), Type: memory.Raw, Text: "x", Time: t0},
		"bad type":     {ID: memory.NewID(), Namespace: "a", Type: "note", Text: "x", Time: t0},
		"no time":      {ID: memory.NewID(), Namespace: "a", Type: memory.Raw, Text: "x"},
	} {
		assert.Error(t, s.Upsert(ctx, m), name)
	}
}

// testGetUnknown checks that an unknown id is memory.ErrNotFound.
func testGetUnknown(ctx context.Context, t *testing.T, fresh func(*testing.T) memory.Store) {
	s := fresh(t)
	_, err := s.Get(ctx, memory.NewID())
	assert.ErrorIs(t, err, memory.ErrNotFound)
}

// testDelete checks that deleted memories are gone, and deleting an unknown
// id is no error.
func testDelete(ctx context.Context, t *testing.T, fresh func(*testing.T) memory.Store) {
	s := fresh(t)
	a := mem("a", memory.Raw, 0, "User: the blue door\nAssistant: ok")
	a.Vector = vec(Dim, 0, 1, 0)
	b := mem("a", memory.Raw, 1, "User: the red door\nAssistant: ok")
	require.NoError(t, s.Upsert(ctx, a, b))
	require.NoError(t, s.Delete(ctx, a.ID, memory.NewID()))
	_, err := s.Get(ctx, a.ID)
	assert.ErrorIs(t, err, memory.ErrNotFound)
	hits, err := s.Search(ctx, memory.Query{Filter: memory.Filter{Namespace: "a"}, Text: "door", Vector: vec(Dim, 0, 1, 0), Threshold: 0.5, Limit: 10})
	require.NoError(t, err)
	assert.Equal(t, []string{b.ID}, hitIDs(hits))
	n, err := s.Count(ctx, memory.Filter{Namespace: "a"})
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	require.NoError(t, s.Delete(ctx))
}

// testHideAndRestore: a hidden memory (type forgotten) is kept and listed by
// its type, never found by the searches chats make; restored, it is found
// again.
func testHideAndRestore(ctx context.Context, t *testing.T, fresh func(*testing.T) memory.Store) {
	s := fresh(t)
	a := mem("a", memory.Curated, 0, "Alice's locker code is 4417")
	a.Vector = vec(Dim, 0, 1, 0)
	require.NoError(t, s.Upsert(ctx, a))
	a.Hide(t0.Add(time.Hour))
	require.NoError(t, s.Upsert(ctx, a))
	chats := memory.Query{Filter: memory.Filter{Namespace: "a", Types: []memory.Type{memory.Raw, memory.Curated}}, Text: "locker code", Vector: vec(Dim, 0, 1, 0), Threshold: 0.5, Limit: 10}
	hits, err := s.Search(ctx, chats)
	require.NoError(t, err)
	assert.Empty(t, hits)
	latest, err := s.Latest(ctx, memory.Filter{Namespace: "a", Types: []memory.Type{memory.Raw}}, 10)
	require.NoError(t, err)
	assert.Empty(t, latest)
	page, _, err := s.Scroll(ctx, memory.Filter{Namespace: "a", Types: []memory.Type{memory.Forgotten}}, "", 10)
	require.NoError(t, err)
	require.Len(t, page, 1)
	assert.Equal(t, "curated", page[0].Metadata["forgotten_from"])

	got := page[0]
	require.True(t, got.Restore())
	require.NoError(t, s.Upsert(ctx, got))
	hits, err = s.Search(ctx, chats)
	require.NoError(t, err)
	assert.Equal(t, []string{a.ID}, hitIDs(hits))
	back, err := s.Get(ctx, a.ID)
	require.NoError(t, err)
	assert.Equal(t, memory.Curated, back.Type)
	assert.Empty(t, back.Metadata)
}

// testWriterReplacesTurns: a regenerated or edited turn replaces the one it
// redoes, whether that one is in the store already or still queued with it.
func testWriterReplacesTurns(ctx context.Context, t *testing.T, fresh func(*testing.T) memory.Store) {
	s := fresh(t)
	q := &sliceQueue{}
	w := memory.NewWriter(s, q, nil, nil, nil)
	w.Start()
	t.Cleanup(w.Close)
	first := memory.NewID()
	require.NoError(t, w.Record(ctx, memory.Turn{ID: first, Namespace: "a", User: "what is the door's colour?", Assistant: "Blue."}))
	require.Eventually(t, func() bool { _, err := s.Get(ctx, first); return err == nil }, 10*time.Second, 10*time.Millisecond)
	again := memory.NewID()
	require.NoError(t, w.Record(ctx, memory.Turn{ID: again, Replaces: first, Namespace: "a", User: "what is the door's colour?", Assistant: "Red."}))
	require.Eventually(t, func() bool { _, err := s.Get(ctx, again); return err == nil }, 10*time.Second, 10*time.Millisecond)
	_, err := s.Get(ctx, first)
	assert.ErrorIs(t, err, memory.ErrNotFound, "the regenerated turn replaced the one stored")
	w.Close()

	// Both still queued (left by a run that stopped before its store
	// took them): only the replacement arrives.
	s = fresh(t)
	old := mem("a", memory.Raw, 0, "User: where is the cat?\nAssistant: Upstairs.")
	edited := mem("a", memory.Raw, 1, "User: where is the dog?\nAssistant: Outside.")
	edited.Metadata = map[string]any{memory.MetaReplaces: old.ID}
	q = &sliceQueue{}
	require.NoError(t, q.Enqueue(ctx, old, edited))
	w = memory.NewWriter(s, q, nil, nil, nil)
	w.Start()
	t.Cleanup(w.Close)
	require.Eventually(t, func() bool { n, _ := q.Len(ctx); return n == 0 }, 10*time.Second, 10*time.Millisecond)
	n, err := s.Count(ctx, memory.Filter{Namespace: "a"})
	require.NoError(t, err)
	assert.Equal(t, 1, n, "the edited turn replaced the one queued before it")
	_, err = s.Get(ctx, edited.ID)
	assert.NoError(t, err)
}

// testWriterForgets: a memory deleted by hand while its turn is still queued
// never arrives (the admin API tells the writer to forget it).
func testWriterForgets(ctx context.Context, t *testing.T, fresh func(*testing.T) memory.Store) {
	s := fresh(t)
	one := mem("a", memory.Raw, 0, "User: my pin is 1234\nAssistant: noted")
	two := mem("a", memory.Raw, 1, "User: my cat is Miso\nAssistant: noted")
	other := mem("b", memory.Raw, 2, "User: b's secret\nAssistant: noted")
	q := &sliceQueue{}
	require.NoError(t, q.Enqueue(ctx, one, two, other))
	w := memory.NewWriter(s, q, nil, nil, nil)
	w.Forget(one.ID)
	w.ForgetNamespace("b")
	w.Start()
	t.Cleanup(w.Close)
	require.Eventually(t, func() bool { n, _ := q.Len(ctx); return n == 0 }, 10*time.Second, 10*time.Millisecond)
	_, err := s.Get(ctx, one.ID)
	assert.ErrorIs(t, err, memory.ErrNotFound)
	_, err = s.Get(ctx, other.ID)
	assert.ErrorIs(t, err, memory.ErrNotFound)
	_, err = s.Get(ctx, two.ID)
	assert.NoError(t, err)
}

// testConcurrentWritesAndSearches checks that writes and searches at once
// neither fail nor race.
func testConcurrentWritesAndSearches(ctx context.Context, t *testing.T, fresh func(*testing.T) memory.Store) {
	s := fresh(t)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 25 {
				m := mem("a", memory.Raw, w*100+i, fmt.Sprintf("User: writer %d item %d\nAssistant: stored", w, i))
				assert.NoError(t, s.Upsert(ctx, m))
				_, err := s.Search(ctx, memory.Query{Filter: memory.Filter{Namespace: "a"}, Text: "writer item", Limit: 5})
				assert.NoError(t, err)
			}
		})
	}
	wg.Wait()
	n, err := s.Count(ctx, memory.Filter{Namespace: "a"})
	require.NoError(t, err)
	assert.Equal(t, 100, n)
}
