package qdranttest

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/qdrant/go-client/qdrant"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The stand-in must refuse what Qdrant refuses, or CI would pass code that
// fails against a real server.
func TestRules(t *testing.T) {
	ctx := context.Background()
	s, err := Start("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(s.Stop)
	c, err := qdrant.NewClient(&qdrant.Config{Host: "127.0.0.1", Port: port(t, s), SkipCompatibilityCheck: true})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })

	require.NoError(t, c.CreateCollection(ctx, &qdrant.CreateCollection{
		CollectionName: "c",
		VectorsConfig:  qdrant.NewVectorsConfigMap(map[string]*qdrant.VectorParams{"dense": {Size: 3, Distance: qdrant.Distance_Cosine}}),
		SparseVectorsConfig: qdrant.NewSparseVectorsConfig(map[string]*qdrant.SparseVectorParams{
			"bm25": {Modifier: qdrant.Modifier_Idf.Enum()},
		}),
	}))
	err = c.CreateCollection(ctx, &qdrant.CreateCollection{CollectionName: "c"})
	assert.Equal(t, codes.InvalidArgument, status.Code(err), "a collection is created once")

	wait := true
	up := func(id string, dense []float32, payload map[string]any) error {
		v := map[string]*qdrant.Vector{}
		if dense != nil {
			v["dense"] = qdrant.NewVectorDense(dense)
		}
		_, err := c.Upsert(ctx, &qdrant.UpsertPoints{CollectionName: "c", Wait: &wait, Points: []*qdrant.PointStruct{
			{Id: qdrant.NewID(id), Vectors: qdrant.NewVectorsMap(v), Payload: qdrant.NewValueMap(payload)},
		}})
		return err
	}
	a, b := "5c56c793-69f3-4fbf-87e6-c4bf54c28c26", "6c56c793-69f3-4fbf-87e6-c4bf54c28c26"
	require.NoError(t, up(a, []float32{3, 0, 0}, map[string]any{"ns": "x", "tags": []any{"red", "blue"}, "ts": 1}))
	require.NoError(t, up(b, nil, map[string]any{"ns": "y", "ts": 2}))

	t.Run("vector size", func(t *testing.T) {
		err := up(a, []float32{1, 2}, nil)
		assert.ErrorContains(t, err, "Vector dimension error: expected dim: 3, got 2")
		_, err = c.Query(ctx, &qdrant.QueryPoints{CollectionName: "c", Query: qdrant.NewQueryDense([]float32{1}), Using: ptr("dense")})
		assert.ErrorContains(t, err, "expected dim: 3")
	})
	t.Run("ids", func(t *testing.T) {
		assert.ErrorContains(t, up("not-a-uuid", nil, nil), "Unable to parse UUID")
	})
	t.Run("cosine vectors are stored normalised", func(t *testing.T) {
		got, err := c.Get(ctx, &qdrant.GetPoints{CollectionName: "c", Ids: []*qdrant.PointId{qdrant.NewID(a)}, WithVectors: qdrant.NewWithVectors(true)})
		require.NoError(t, err)
		assert.Equal(t, []float32{1, 0, 0}, got[0].GetVectors().GetVectors().GetVectors()["dense"].GetDense().GetData())
	})
	t.Run("order_by needs a range index", func(t *testing.T) {
		req := &qdrant.ScrollPoints{CollectionName: "c", OrderBy: &qdrant.OrderBy{Key: "ts"}}
		_, err := c.Scroll(ctx, req)
		assert.ErrorContains(t, err, "No range index for `order_by` key")
		_, err = c.CreateFieldIndex(ctx, &qdrant.CreateFieldIndexCollection{CollectionName: "c", FieldName: "ts",
			FieldType:        qdrant.FieldType_FieldTypeInteger.Enum(),
			FieldIndexParams: qdrant.NewPayloadIndexParamsInt(&qdrant.IntegerIndexParams{Lookup: ptr(true), Range: ptr(false)})})
		require.NoError(t, err)
		_, err = c.Scroll(ctx, req)
		assert.ErrorContains(t, err, "No range index", "an integer index without range does not order")
		_, err = c.CreateFieldIndex(ctx, &qdrant.CreateFieldIndexCollection{CollectionName: "c", FieldName: "ts",
			FieldType: qdrant.FieldType_FieldTypeInteger.Enum()})
		require.NoError(t, err)
		req.OrderBy.Direction = qdrant.Direction_Desc.Enum()
		got, err := c.Scroll(ctx, req)
		require.NoError(t, err)
		require.Len(t, got, 2)
		assert.Equal(t, b, got[0].GetId().GetUuid())
		req.Offset = qdrant.NewID(a)
		_, err = c.Scroll(ctx, req)
		assert.ErrorContains(t, err, "Cannot use an `offset` when using `order_by`")
	})
	t.Run("order_by starts from a value, inclusive", func(t *testing.T) {
		from := func(dir qdrant.Direction, v int64) []string {
			got, err := c.Scroll(ctx, &qdrant.ScrollPoints{CollectionName: "c",
				OrderBy: &qdrant.OrderBy{Key: "ts", Direction: dir.Enum(), StartFrom: qdrant.NewStartFromInt(v)}})
			require.NoError(t, err)
			var ids []string
			for _, p := range got {
				ids = append(ids, p.GetId().GetUuid())
			}
			return ids
		}
		assert.Equal(t, []string{b, a}, from(qdrant.Direction_Desc, 2))
		assert.Equal(t, []string{a}, from(qdrant.Direction_Desc, 1))
		assert.Equal(t, []string{b}, from(qdrant.Direction_Asc, 2))
		assert.Empty(t, from(qdrant.Direction_Asc, 3))
	})
	t.Run("facet needs an index", func(t *testing.T) {
		_, err := c.Facet(ctx, &qdrant.FacetCounts{CollectionName: "c", Key: "ns"})
		assert.ErrorContains(t, err, "Index required")
	})
	t.Run("filters", func(t *testing.T) {
		count := func(f *qdrant.Filter) uint64 {
			n, err := c.Count(ctx, &qdrant.CountPoints{CollectionName: "c", Filter: f})
			require.NoError(t, err)
			return n
		}
		assert.Equal(t, uint64(1), count(&qdrant.Filter{Must: []*qdrant.Condition{qdrant.NewMatchKeyword("tags", "blue")}}), "a keyword matches an array element")
		assert.Equal(t, uint64(2), count(&qdrant.Filter{Should: []*qdrant.Condition{qdrant.NewMatchKeyword("ns", "x"), qdrant.NewMatchKeyword("ns", "y")}}))
		assert.Equal(t, uint64(1), count(&qdrant.Filter{MustNot: []*qdrant.Condition{qdrant.NewHasVector("dense")}}))
		assert.Equal(t, uint64(1), count(&qdrant.Filter{Must: []*qdrant.Condition{qdrant.NewRange("ts", &qdrant.Range{Gte: ptr(2.0)})}}))
		assert.Equal(t, uint64(0), count(&qdrant.Filter{Must: []*qdrant.Condition{qdrant.NewMatchKeywords("ns", "z", "w")}}))
	})
	t.Run("rrf", func(t *testing.T) {
		// Two prefetches ranking a and b in opposite orders: equal scores
		// of 1/2 + 1/3 with k = 2, or 1/10 + 1/11 with k = 10.
		require.NoError(t, up(b, []float32{0, 1, 0}, map[string]any{"ns": "y", "ts": 2}))
		pre := []*qdrant.PrefetchQuery{
			{Query: qdrant.NewQueryDense([]float32{1, 0.1, 0}), Using: ptr("dense")},
			{Query: qdrant.NewQueryDense([]float32{0.1, 1, 0}), Using: ptr("dense")},
		}
		got, err := c.Query(ctx, &qdrant.QueryPoints{CollectionName: "c", Prefetch: pre, Query: qdrant.NewQueryFusion(qdrant.Fusion_RRF)})
		require.NoError(t, err)
		require.Len(t, got, 2)
		assert.InDelta(t, 1.0/2+1.0/3, got[0].GetScore(), 1e-6)
		got, err = c.Query(ctx, &qdrant.QueryPoints{CollectionName: "c", Prefetch: pre, Query: qdrant.NewQueryRRF(&qdrant.Rrf{K: ptr(uint32(10))})})
		require.NoError(t, err)
		assert.InDelta(t, 1.0/10+1.0/11, got[0].GetScore(), 1e-6)
	})
	t.Run("sparse vectors", func(t *testing.T) {
		_, err := c.Upsert(ctx, &qdrant.UpsertPoints{CollectionName: "c", Points: []*qdrant.PointStruct{{Id: qdrant.NewID(a),
			Vectors: qdrant.NewVectorsMap(map[string]*qdrant.Vector{"bm25": qdrant.NewVectorSparse([]uint32{1, 1}, []float32{1, 2})})}}})
		assert.ErrorContains(t, err, "unique indices")
		_, err = c.Query(ctx, &qdrant.QueryPoints{CollectionName: "c", Query: qdrant.NewQuerySparse([]uint32{1}, []float32{1}), Using: ptr("nope")})
		assert.ErrorContains(t, err, "Not existing vector name")
	})
}

func ptr[T any](v T) *T { return &v }

func port(t *testing.T, s *Server) int {
	t.Helper()
	var p int
	_, err := fmt.Sscanf(s.Addr()[strings.LastIndexByte(s.Addr(), ':')+1:], "%d", &p)
	require.NoError(t, err)
	return p
}

func TestSetPayload(t *testing.T) {
	ctx := context.Background()
	s, err := Start("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(s.Stop)
	c, err := qdrant.NewClient(&qdrant.Config{Host: "127.0.0.1", Port: port(t, s), SkipCompatibilityCheck: true})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	require.NoError(t, c.CreateCollection(ctx, &qdrant.CreateCollection{CollectionName: "c",
		VectorsConfig: qdrant.NewVectorsConfigMap(map[string]*qdrant.VectorParams{"dense": {Size: 2, Distance: qdrant.Distance_Cosine}})}))
	a, b := "5c56c793-69f3-4fbf-87e6-c4bf54c28c26", "6c56c793-69f3-4fbf-87e6-c4bf54c28c26"
	missing := "7c56c793-69f3-4fbf-87e6-c4bf54c28c26"
	_, err = c.Upsert(ctx, &qdrant.UpsertPoints{CollectionName: "c", Wait: ptr(true), Points: []*qdrant.PointStruct{
		{Id: qdrant.NewID(a), Vectors: qdrant.NewVectorsMap(map[string]*qdrant.Vector{"dense": qdrant.NewVectorDense([]float32{0, 2})}),
			Payload: qdrant.NewValueMap(map[string]any{"text": "a", "n": 0})},
		{Id: qdrant.NewID(b), Payload: qdrant.NewValueMap(map[string]any{"text": "b", "n": 5})},
	}})
	require.NoError(t, err)
	get := func(id string) *qdrant.RetrievedPoint {
		got, err := c.Get(ctx, &qdrant.GetPoints{CollectionName: "c", Ids: []*qdrant.PointId{qdrant.NewID(id)},
			WithPayload: qdrant.NewWithPayload(true), WithVectors: qdrant.NewWithVectors(true)})
		require.NoError(t, err)
		require.Len(t, got, 1)
		return got[0]
	}

	t.Run("only the keys given", func(t *testing.T) {
		_, err := c.SetPayload(ctx, &qdrant.SetPayloadPoints{CollectionName: "c", Wait: ptr(true),
			Payload: qdrant.NewValueMap(map[string]any{"n": 1}), PointsSelector: qdrant.NewPointsSelector(qdrant.NewID(a))})
		require.NoError(t, err)
		p := get(a)
		assert.Equal(t, int64(1), p.GetPayload()["n"].GetIntegerValue())
		assert.Equal(t, "a", p.GetPayload()["text"].GetStringValue(), "other keys kept")
		assert.Equal(t, []float32{0, 1}, p.GetVectors().GetVectors().GetVectors()["dense"].GetDense().GetData(), "vectors kept")
	})
	t.Run("a missing id is an error, after the others", func(t *testing.T) {
		_, err := c.SetPayload(ctx, &qdrant.SetPayloadPoints{CollectionName: "c", Wait: ptr(true),
			Payload: qdrant.NewValueMap(map[string]any{"n": 2}), PointsSelector: qdrant.NewPointsSelector(qdrant.NewID(a), qdrant.NewID(missing))})
		assert.Equal(t, codes.NotFound, status.Code(err))
		assert.Equal(t, int64(2), get(a).GetPayload()["n"].GetIntegerValue())
	})
	t.Run("a filter selects the points matching, possibly none", func(t *testing.T) {
		noCount := qdrant.NewRange("n", &qdrant.Range{Gte: ptr(3.0)})
		_, err := c.UpdateBatch(ctx, &qdrant.UpdateBatchPoints{CollectionName: "c", Wait: ptr(true), Operations: []*qdrant.PointsUpdateOperation{
			qdrant.NewPointsUpdateSetPayload(&qdrant.PointsUpdateOperation_SetPayload{Payload: qdrant.NewValueMap(map[string]any{"n": 9}),
				PointsSelector: qdrant.NewPointsSelectorFilter(&qdrant.Filter{Must: []*qdrant.Condition{qdrant.NewHasID(qdrant.NewID(missing))}})}),
			qdrant.NewPointsUpdateSetPayload(&qdrant.PointsUpdateOperation_SetPayload{Payload: qdrant.NewValueMap(map[string]any{"n": 7}),
				PointsSelector: qdrant.NewPointsSelectorFilter(&qdrant.Filter{MustNot: []*qdrant.Condition{noCount}})}),
			qdrant.NewPointsUpdateSetPayload(&qdrant.PointsUpdateOperation_SetPayload{Payload: qdrant.NewValueMap(map[string]any{"n": 8}),
				PointsSelector: qdrant.NewPointsSelectorFilter(&qdrant.Filter{Must: []*qdrant.Condition{qdrant.NewHasID(qdrant.NewID(a))}})}),
		}})
		require.NoError(t, err)
		assert.Equal(t, int64(8), get(a).GetPayload()["n"].GetIntegerValue(), "in order: 7, then 8")
		assert.Equal(t, int64(5), get(b).GetPayload()["n"].GetIntegerValue(), "b did not match the range's must_not")
	})
}
