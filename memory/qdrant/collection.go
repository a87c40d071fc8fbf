package qdrant

import (
	"context"
	"errors"
	"fmt"

	"github.com/qdrant/go-client/qdrant"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/vera-proxy/vera/memory"
)

// The collection's life: read at open, created once the embedding size is
// known, checked against the model on every start.

// load reads the collection's vector size and model, if it exists.
func (s *Store) load(ctx context.Context) error {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	info, err := s.client.GetCollectionInfo(ctx, s.collection)
	if status.Code(err) == codes.NotFound {
		return nil
	}
	if err != nil {
		return s.wrap("reading collection "+s.collection, err)
	}
	dim, model, err := describe(info)
	if err != nil {
		return fmt.Errorf("qdrant collection %q: %w", s.collection, err)
	}
	// Collections made by earlier versions lack the backfills' indexes,
	// which a Qdrant in strict mode needs to filter on their fields.
	var missing []*qdrant.CreateFieldIndexCollection
	for _, ix := range backfillIndexes() {
		if info.GetPayloadSchema()[ix.FieldName] == nil {
			missing = append(missing, ix)
		}
	}
	if err := s.createIndexes(ctx, missing); err != nil {
		return err
	}
	s.mu.Lock()
	s.dim, s.model = dim, model
	s.mu.Unlock()
	return nil
}

// describe reads what vera needs from a collection's info.
func describe(info *qdrant.CollectionInfo) (dim int, model string, err error) {
	params := info.GetConfig().GetParams()
	vp, ok := params.GetVectorsConfig().GetParamsMap().GetMap()[denseVector]
	if !ok {
		return 0, "", fmt.Errorf("has no %q vector: it was not made by vera (Vera-AI's collections are imported with vera memories import --from-vera-ai)", denseVector)
	}
	if _, ok := params.GetSparseVectorsConfig().GetMap()[sparseVector]; !ok {
		return 0, "", fmt.Errorf("has no %q sparse vector: it was not made by vera", sparseVector)
	}
	if v := info.GetConfig().GetMetadata()[metaModel]; v != nil {
		model = v.GetStringValue()
	}
	return int(vp.GetSize()), model, nil
}

// VectorSpace creates the collection for dim-sized vectors of model, or
// checks that the existing one holds such vectors. Several vera instances
// share a collection, so a different size or model is an error naming
// both, never a silent reset.
func (s *Store) VectorSpace(ctx context.Context, model string, dim int) (bool, error) {
	if err := s.load(ctx); err != nil {
		return false, err
	}
	s.mu.Lock()
	have, haveModel := s.dim, s.model
	s.mu.Unlock()
	switch {
	case have == 0:
		return false, s.create(ctx, model, dim)
	case have != dim:
		return false, fmt.Errorf("qdrant collection %q holds %d-dimension vectors, but embedding model %q makes %d-dimension ones: use the model the collection was made with (%s), or another collection (general.qdrant_collection)",
			s.collection, have, model, dim, orUnknown(haveModel))
	case haveModel != "" && haveModel != model:
		return false, fmt.Errorf("qdrant collection %q was embedded with %q, but this vera uses %q: set general.embedding_model = %q, or use another collection (general.qdrant_collection)",
			s.collection, haveModel, model, haveModel)
	}
	return false, nil
}

func orUnknown(s string) string {
	if s == "" {
		return "not recorded"
	}
	return s
}

// create makes the collection and the payload indexes vera filters and
// orders by.
func (s *Store) create(ctx context.Context, model string, dim int) error {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	err := s.client.CreateCollection(ctx, &qdrant.CreateCollection{
		CollectionName: s.collection,
		VectorsConfig: qdrant.NewVectorsConfigMap(map[string]*qdrant.VectorParams{
			denseVector: {Size: uint64(dim), Distance: qdrant.Distance_Cosine},
		}),
		SparseVectorsConfig: qdrant.NewSparseVectorsConfig(map[string]*qdrant.SparseVectorParams{
			sparseVector: {Modifier: qdrant.Modifier_Idf.Enum()},
		}),
		Metadata: qdrant.NewValueMap(map[string]any{metaModel: model}),
	})
	if err != nil && status.Code(err) != codes.Unavailable && status.Code(err) != codes.DeadlineExceeded {
		// Another vera may have made it first (Qdrant answers "already
		// exists" as a bad request): check it as if it had been there.
		if lerr := s.load(ctx); lerr == nil {
			s.mu.Lock()
			made := s.dim > 0
			s.mu.Unlock()
			if made {
				_, err := s.VectorSpace(ctx, model, dim)
				return err
			}
		}
	}
	if err != nil {
		return s.wrap("creating collection "+s.collection, err)
	}
	tenant := true
	indexes := []*qdrant.CreateFieldIndexCollection{
		{FieldName: fieldNamespace, FieldType: qdrant.FieldType_FieldTypeKeyword.Enum(),
			FieldIndexParams: qdrant.NewPayloadIndexParamsKeyword(&qdrant.KeywordIndexParams{IsTenant: &tenant})},
		{FieldName: fieldType, FieldType: qdrant.FieldType_FieldTypeKeyword.Enum()},
		{FieldName: fieldTS, FieldType: qdrant.FieldType_FieldTypeInteger.Enum(),
			FieldIndexParams: qdrant.NewPayloadIndexParamsInt(&qdrant.IntegerIndexParams{Lookup: ptr(true), Range: ptr(true)})},
	}
	indexes = append(indexes, backfillIndexes()...)
	if err := s.createIndexes(ctx, indexes); err != nil {
		return err
	}
	s.mu.Lock()
	s.dim, s.model = dim, model
	s.mu.Unlock()
	return nil
}

// ready returns the vector size, or ErrUnavailable while the collection
// does not exist yet (it is created once the embedding model's size is
// known; until then turns wait in the local queue).
func (s *Store) ready(ctx context.Context) (int, error) {
	s.mu.Lock()
	dim := s.dim
	s.mu.Unlock()
	if dim > 0 {
		return dim, nil
	}
	if err := s.load(ctx); err != nil {
		return 0, err
	}
	s.mu.Lock()
	dim = s.dim
	s.mu.Unlock()
	if dim == 0 {
		return 0, fmt.Errorf("%w: qdrant collection %q %w: it is created once the embedding model answers", memory.ErrUnavailable, s.collection, errNoCollection)
	}
	return dim, nil
}

var errNoCollection = errors.New("does not exist yet")

// exists reports whether the collection exists, for reads: reading a
// collection that is not there yet finds nothing.
func (s *Store) exists(ctx context.Context) (bool, error) {
	_, err := s.ready(ctx)
	if errors.Is(err, errNoCollection) {
		return false, nil
	}
	return err == nil, err
}

// backfillIndexes are the payload indexes of the fields the backfills
// filter on (token counts, the terms' version): range indexes, since they
// filter by range.
func backfillIndexes() []*qdrant.CreateFieldIndexCollection {
	var out []*qdrant.CreateFieldIndexCollection
	for _, f := range []string{fieldTokens, fieldTermsV} {
		out = append(out, &qdrant.CreateFieldIndexCollection{FieldName: f, FieldType: qdrant.FieldType_FieldTypeInteger.Enum(),
			FieldIndexParams: qdrant.NewPayloadIndexParamsInt(&qdrant.IntegerIndexParams{Lookup: ptr(false), Range: ptr(true)})})
	}
	return out
}

// createIndexes creates payload indexes of the collection, waiting for
// each.
func (s *Store) createIndexes(ctx context.Context, indexes []*qdrant.CreateFieldIndexCollection) error {
	wait := true
	for _, ix := range indexes {
		ix.CollectionName, ix.Wait = s.collection, &wait
		if _, err := s.client.CreateFieldIndex(ctx, ix); err != nil {
			return s.wrap("indexing "+ix.FieldName, err)
		}
	}
	return nil
}
