package qdrant

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/qdrant/go-client/qdrant"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/memory"
	"github.com/vera-proxy/vera/memory/qdrant/qdranttest"
	"github.com/vera-proxy/vera/memory/storetest"
)

// server returns the Qdrant the tests use: VERA_TEST_QDRANT_URL when set,
// else a stand-in of the test's own.
func server(t *testing.T) string {
	t.Helper()
	return qdranttest.URL(t, os.Getenv("VERA_TEST_QDRANT_URL"))
}

// openFresh opens a store on a collection of its own, deleted afterwards.
func openFresh(t *testing.T, url string) *Store {
	t.Helper()
	ctx := context.Background()
	name := "vera_test_" + strings.ReplaceAll(memory.NewID(), "-", "")
	s, err := Open(ctx, Options{URL: url, Collection: name})
	require.NoError(t, err)
	t.Cleanup(func() {
		// A client of its own: the suite may have closed s already.
		cfg, _, _ := ClientConfig(url)
		if c, err := qdrant.NewClient(cfg); err == nil {
			_ = c.DeleteCollection(context.Background(), name)
			c.Close()
		}
		s.Close()
	})
	return s
}

func TestContract(t *testing.T) {
	url := server(t)
	storetest.Run(t, func(t *testing.T) memory.Store {
		s := openFresh(t, url)
		_, err := s.VectorSpace(context.Background(), "test-model", storetest.Dim)
		require.NoError(t, err)
		return s
	})
}

func TestCollectionCreatedWithIndexes(t *testing.T) {
	ctx := context.Background()
	s := openFresh(t, server(t))
	_, err := s.VectorSpace(ctx, "nomic-embed-text", 768)
	require.NoError(t, err)
	info, err := s.client.GetCollectionInfo(ctx, s.collection)
	require.NoError(t, err)
	p := info.GetConfig().GetParams()
	dense := p.GetVectorsConfig().GetParamsMap().GetMap()[denseVector]
	require.NotNil(t, dense)
	assert.Equal(t, uint64(768), dense.GetSize())
	assert.Equal(t, qdrant.Distance_Cosine, dense.GetDistance())
	assert.Equal(t, qdrant.Modifier_Idf, p.GetSparseVectorsConfig().GetMap()[sparseVector].GetModifier())
	assert.Equal(t, "nomic-embed-text", info.GetConfig().GetMetadata()[metaModel].GetStringValue())
	for _, f := range []string{fieldNamespace, fieldType, fieldTS} {
		assert.Contains(t, info.GetPayloadSchema(), f, "payload index on %s", f)
	}

	// Opening again finds it; the same model and size are fine.
	again := another(t, s)
	_, err = again.VectorSpace(ctx, "nomic-embed-text", 768)
	require.NoError(t, err)

	// Another size is a clear error naming both; so is another model.
	_, err = again.VectorSpace(ctx, "mxbai-embed-large", 1024)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "holds 768-dimension vectors")
	assert.Contains(t, err.Error(), `"mxbai-embed-large" makes 1024-dimension ones`)
	_, err = again.VectorSpace(ctx, "other-768", 768)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `was embedded with "nomic-embed-text", but this vera uses "other-768"`)
}

func TestBeforeTheCollectionExists(t *testing.T) {
	ctx := context.Background()
	s := openFresh(t, server(t))
	// Reads find nothing; writes wait (the local queue keeps the turn).
	hits, err := s.Search(ctx, memory.Query{Filter: memory.Filter{Namespace: "a"}, Text: "anything"})
	require.NoError(t, err)
	assert.Empty(t, hits)
	n, err := s.Count(ctx, memory.Filter{Namespace: "a"})
	require.NoError(t, err)
	assert.Zero(t, n)
	err = s.Upsert(ctx, memory.Memory{ID: memory.NewID(), Namespace: "a", Type: memory.Raw, Text: "x", Time: time.Now().UTC()})
	assert.ErrorIs(t, err, memory.ErrUnavailable)
}

func TestQdrantDownIsUnavailable(t *testing.T) {
	ctx := context.Background()
	if os.Getenv("VERA_TEST_QDRANT_URL") != "" {
		t.Skip("stops the stand-in")
	}
	srv, err := qdranttest.Start("127.0.0.1:0")
	require.NoError(t, err)
	s := openFresh(t, srv.URL())
	_, err = s.VectorSpace(ctx, "m", 4)
	require.NoError(t, err)
	m := memory.Memory{ID: memory.NewID(), Namespace: "a", Type: memory.Raw, Text: "User: my heron is called Ada\nAssistant: lovely", Time: time.Now().UTC()}
	require.NoError(t, s.Upsert(ctx, m))

	srv.Stop()
	assert.ErrorIs(t, s.Upsert(ctx, m), memory.ErrUnavailable)
	_, err = s.Search(ctx, memory.Query{Filter: memory.Filter{Namespace: "a"}, Text: "heron"})
	assert.ErrorIs(t, err, memory.ErrUnavailable)
	assert.Error(t, s.Ping(ctx))

	require.NoError(t, srv.Restart())
	t.Cleanup(srv.Stop)
	require.Eventually(t, func() bool { return s.Ping(ctx) == nil }, 10*time.Second, 50*time.Millisecond)
	hits, err := s.Search(ctx, memory.Query{Filter: memory.Filter{Namespace: "a"}, Text: "heron"})
	require.NoError(t, err)
	assert.Len(t, hits, 1)
}

func TestClientConfig(t *testing.T) {
	tests := []struct {
		in, addr string
		tls      bool
		err      bool
	}{
		{"http://localhost:6333", "localhost:6334", false, false},
		{"http://qdrant:6334", "qdrant:6334", false, false},
		{"qdrant", "qdrant:6334", false, false},
		{"https://x.cloud.qdrant.io:6333", "x.cloud.qdrant.io:6334", true, false},
		{"http://10.0.0.5:7334", "10.0.0.5:7334", false, false},
		{"ftp://x", "", false, true},
		{"http://:6333", "", false, true},
	}
	for _, tt := range tests {
		cfg, addr, err := ClientConfig(tt.in)
		if tt.err {
			assert.Error(t, err, tt.in)
			continue
		}
		require.NoError(t, err, tt.in)
		assert.Equal(t, tt.addr, addr, tt.in)
		assert.Equal(t, tt.tls, cfg.UseTLS, tt.in)
	}
}

// another opens a second store on a's collection, as a second vera would.
func another(t *testing.T, a *Store) *Store {
	t.Helper()
	b, err := Open(context.Background(), Options{URL: "http://" + a.addr, Collection: a.collection})
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() })
	return b
}

func TestTwoInstancesCreateTheCollectionAtOnce(t *testing.T) {
	ctx := context.Background()
	a := openFresh(t, server(t))
	b := another(t, a)
	// b has not seen the collection; a makes it; b's own create finds it
	// made and checks it instead of failing.
	_, err := a.VectorSpace(ctx, "m", 8)
	require.NoError(t, err)
	require.NoError(t, b.create(ctx, "m", 8))
	err = b.create(ctx, "m", 16)
	assert.ErrorContains(t, err, "holds 8-dimension vectors")
}

func TestLockAcrossInstances(t *testing.T) {
	ctx := context.Background()
	a := openFresh(t, server(t))
	b := another(t, a)
	t.Cleanup(func() { _ = a.client.DeleteCollection(context.Background(), a.collection+"_locks") })
	a.lockSettle, b.lockSettle = 10*time.Millisecond, 10*time.Millisecond

	release, ok, err := a.Lock(ctx, "curator", time.Minute)
	require.NoError(t, err)
	require.True(t, ok)
	_, ok, err = b.Lock(ctx, "curator", time.Minute)
	require.NoError(t, err)
	assert.False(t, ok, "held by the other instance")
	release()
	release2, ok, err := b.Lock(ctx, "curator", 50*time.Millisecond)
	require.NoError(t, err)
	assert.True(t, ok, "free once released")
	_ = release2 // b "crashes" without releasing
	time.Sleep(80 * time.Millisecond)
	_, ok, err = a.Lock(ctx, "curator", time.Minute)
	require.NoError(t, err)
	assert.True(t, ok, "an expired lock is taken over")
}

// Points indexed by an older text.Terms are found and indexed again,
// their dense vectors and payload kept; then none is stale.
func TestTermsBackfill(t *testing.T) {
	ctx := context.Background()
	s := openFresh(t, server(t))
	_, err := s.VectorSpace(ctx, "test-model", 4)
	require.NoError(t, err)
	vec := []float32{0, 1, 0, 0}
	m := memory.Memory{ID: memory.NewID(), Namespace: "a", Type: memory.Curated, Text: "Ana works at an adoption agency", Time: time.Now().UTC(), Tokens: 7, Vector: vec}
	fresh := memory.Memory{ID: memory.NewID(), Namespace: "a", Type: memory.Curated, Text: "fresh", Time: time.Now().UTC(), Tokens: 1}
	require.NoError(t, s.Upsert(ctx, m, fresh))
	page, _, err := s.StaleTerms(ctx, "", 10)
	require.NoError(t, err)
	assert.Empty(t, page, "written by this version")

	// As an older vera wrote it.
	_, err = s.client.UpdateBatch(ctx, &qdrant.UpdateBatchPoints{CollectionName: s.collection, Wait: ptr(true),
		Operations: []*qdrant.PointsUpdateOperation{qdrant.NewPointsUpdateSetPayload(&qdrant.PointsUpdateOperation_SetPayload{
			Payload: qdrant.NewValueMap(map[string]any{fieldTermsV: 1}), PointsSelector: qdrant.NewPointsSelector(qdrant.NewID(m.ID)),
		})}})
	require.NoError(t, err)
	page, _, err = s.StaleTerms(ctx, "", 10)
	require.NoError(t, err)
	require.Len(t, page, 1)
	assert.Equal(t, m.ID, page[0].ID)

	// Hidden between the page's read and its re-index: it stays hidden.
	hidden := m
	hidden.Hide(time.Now())
	require.NoError(t, s.Upsert(ctx, hidden))
	_, err = s.client.UpdateBatch(ctx, &qdrant.UpdateBatchPoints{CollectionName: s.collection, Wait: ptr(true),
		Operations: []*qdrant.PointsUpdateOperation{qdrant.NewPointsUpdateSetPayload(&qdrant.PointsUpdateOperation_SetPayload{
			Payload: qdrant.NewValueMap(map[string]any{fieldTermsV: 1}), PointsSelector: qdrant.NewPointsSelector(qdrant.NewID(m.ID)),
		})}})
	require.NoError(t, err)
	require.NoError(t, s.Reindex(ctx, page...))
	got, err := s.Get(ctx, m.ID)
	require.NoError(t, err)
	assert.Equal(t, memory.Forgotten, got.Type, "a change made meanwhile stays")
	require.NoError(t, s.Upsert(ctx, m)) // back to what it was
	_, err = s.client.UpdateBatch(ctx, &qdrant.UpdateBatchPoints{CollectionName: s.collection, Wait: ptr(true),
		Operations: []*qdrant.PointsUpdateOperation{qdrant.NewPointsUpdateSetPayload(&qdrant.PointsUpdateOperation_SetPayload{
			Payload: qdrant.NewValueMap(map[string]any{fieldTermsV: 1}), PointsSelector: qdrant.NewPointsSelector(qdrant.NewID(m.ID)),
		})}})
	require.NoError(t, err)
	// A point deleted meanwhile is skipped.
	require.NoError(t, s.Reindex(ctx, memory.Memory{ID: memory.NewID(), Text: "gone since"}))

	n, err := memory.BackfillTerms(ctx, s)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	page, _, err = s.StaleTerms(ctx, "", 10)
	require.NoError(t, err)
	assert.Empty(t, page)
	got, err = s.Get(ctx, m.ID)
	require.NoError(t, err)
	assert.Equal(t, m.Text, got.Text)
	assert.Equal(t, vec, got.Vector)
	assert.Equal(t, 7, got.Tokens)
	hits, err := s.Search(ctx, memory.Query{Filter: memory.Filter{Namespace: "a"}, Text: "adopted", Limit: 5})
	require.NoError(t, err)
	require.NotEmpty(t, hits)
	assert.Equal(t, m.ID, hits[0].ID, "found by the stem this version makes")
}
