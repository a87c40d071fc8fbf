package qdranttest

import (
	"context"

	"github.com/qdrant/go-client/qdrant"
)

// The collections service: create, delete, look up a collection, and
// index a payload field.

// collectionsService serves the collections API.
type collectionsService struct {
	qdrant.UnimplementedCollectionsServer
	s *Server
}

// Create implements qdrant.CollectionsServer.
func (cs collectionsService) Create(_ context.Context, r *qdrant.CreateCollection) (*qdrant.CollectionOperationResponse, error) {
	s := cs.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.collections[r.GetCollectionName()] != nil {
		// RULE: a name is taken once.
		// https://qdrant.tech/documentation/concepts/collections/#create-a-collection
		return nil, bad("Collection `%s` already exists!", r.GetCollectionName())
	}
	c := &collection{
		name: r.GetCollectionName(), dense: map[string]*qdrant.VectorParams{}, sparse: map[string]*qdrant.SparseVectorParams{},
		metadata: r.GetMetadata(), indexes: map[string]qdrant.FieldType{}, ranges: map[string]bool{}, points: map[string]*point{},
		strict: s.strict,
	}
	if p := r.GetVectorsConfig().GetParams(); p != nil {
		c.dense[""] = p
	}
	for name, p := range r.GetVectorsConfig().GetParamsMap().GetMap() {
		if p.GetSize() == 0 {
			return nil, bad("vector size must be positive")
		}
		c.dense[name] = p
	}
	for name, p := range r.GetSparseVectorsConfig().GetMap() {
		c.sparse[name] = p
	}
	s.collections[c.name] = c
	return &qdrant.CollectionOperationResponse{Result: true}, nil
}

// Delete implements qdrant.CollectionsServer.
func (cs collectionsService) Delete(_ context.Context, r *qdrant.DeleteCollection) (*qdrant.CollectionOperationResponse, error) {
	s := cs.s
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.collections[r.GetCollectionName()]
	delete(s.collections, r.GetCollectionName())
	return &qdrant.CollectionOperationResponse{Result: ok}, nil
}

// CollectionExists implements qdrant.CollectionsServer.
func (cs collectionsService) CollectionExists(_ context.Context, r *qdrant.CollectionExistsRequest) (*qdrant.CollectionExistsResponse, error) {
	s := cs.s
	s.mu.Lock()
	defer s.mu.Unlock()
	return &qdrant.CollectionExistsResponse{Result: &qdrant.CollectionExists{Exists: s.collections[r.GetCollectionName()] != nil}}, nil
}

// Get implements qdrant.CollectionsServer.
func (cs collectionsService) Get(_ context.Context, r *qdrant.GetCollectionInfoRequest) (*qdrant.GetCollectionInfoResponse, error) {
	s := cs.s
	s.mu.Lock()
	defer s.mu.Unlock()
	c, err := s.get(r.GetCollectionName())
	if err != nil {
		return nil, err
	}
	params := &qdrant.CollectionParams{ShardNumber: 1, SparseVectorsConfig: &qdrant.SparseVectorConfig{Map: c.sparse}}
	if p, ok := c.dense[""]; ok {
		params.VectorsConfig = qdrant.NewVectorsConfig(p)
	} else {
		params.VectorsConfig = qdrant.NewVectorsConfigMap(c.dense)
	}
	schema := map[string]*qdrant.PayloadSchemaInfo{}
	for field, t := range c.indexes {
		schema[field] = &qdrant.PayloadSchemaInfo{DataType: qdrant.PayloadSchemaType(t + 1)}
	}
	n := uint64(len(c.points))
	return &qdrant.GetCollectionInfoResponse{Result: &qdrant.CollectionInfo{
		Status: qdrant.CollectionStatus_Green, Config: &qdrant.CollectionConfig{Params: params, Metadata: c.metadata},
		PayloadSchema: schema, PointsCount: &n,
	}}, nil
}

// CreateFieldIndex implements qdrant.PointsServer.
func (ps pointsService) CreateFieldIndex(_ context.Context, r *qdrant.CreateFieldIndexCollection) (*qdrant.PointsOperationResponse, error) {
	s := ps.s
	s.mu.Lock()
	defer s.mu.Unlock()
	c, err := s.get(r.GetCollectionName())
	if err != nil {
		return nil, err
	}
	t := r.GetFieldType()
	c.indexes[r.GetFieldName()] = t
	// RULE: only a range-capable index lets order_by use a key: integer
	// with range enabled (the default), float or datetime.
	// https://qdrant.tech/documentation/concepts/indexing/#parameterized-index
	switch t {
	case qdrant.FieldType_FieldTypeInteger:
		ip := r.GetFieldIndexParams().GetIntegerIndexParams()
		c.ranges[r.GetFieldName()] = ip == nil || ip.Range == nil || ip.GetRange()
	case qdrant.FieldType_FieldTypeFloat, qdrant.FieldType_FieldTypeDatetime:
		c.ranges[r.GetFieldName()] = true
	}
	return done(), nil
}
