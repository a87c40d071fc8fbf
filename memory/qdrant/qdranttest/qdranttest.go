// Package qdranttest is an in-process Qdrant for tests: a gRPC server built on
// the go-client's generated server interfaces that implements only what
// vera calls, in memory. It is not a search engine (every search is an
// exact scan), but it enforces the rules of Qdrant that vera depends on, so
// that a misuse fails in CI the way it would fail against a real server.
// Each rule is marked RULE with a link to Qdrant's documentation.
//
// Tests run against a real Qdrant instead when VERA_TEST_QDRANT_URL is set.
package qdranttest

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/qdrant/go-client/qdrant"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Server is a running stand-in.
type Server struct {
	qdrant.UnimplementedQdrantServer

	mu          sync.Mutex
	collections map[string]*collection
	grpc        *grpc.Server
	ln          net.Listener
	addr        string
	strict      bool
}

// Strict makes the collections created from now on refuse a filter on a
// payload field with no index, as a Qdrant in strict mode does
// (strict_mode_config.unindexed_filtering_retrieve = false).
// https://qdrant.tech/documentation/guides/administration/#strict-mode
func (s *Server) Strict() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.strict = true
}

type collection struct {
	name     string
	dense    map[string]*qdrant.VectorParams
	sparse   map[string]*qdrant.SparseVectorParams
	metadata map[string]*qdrant.Value
	indexes  map[string]qdrant.FieldType
	ranges   map[string]bool // integer indexes with range on (or float/datetime)
	points   map[string]*point
	strict   bool // filters need an index (Server.Strict)
}

type point struct {
	id      *qdrant.PointId
	dense   map[string][]float32
	sparse  map[string]*qdrant.SparseVector
	payload map[string]*qdrant.Value
}

// Start listens on addr ("127.0.0.1:0" for any free port) and serves.
func Start(addr string) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	s := &Server{collections: map[string]*collection{}}
	s.serve(ln)
	return s, nil
}

func (s *Server) serve(ln net.Listener) {
	s.ln, s.addr = ln, ln.Addr().String()
	s.grpc = grpc.NewServer()
	qdrant.RegisterQdrantServer(s.grpc, s)
	qdrant.RegisterCollectionsServer(s.grpc, collectionsService{s: s})
	qdrant.RegisterPointsServer(s.grpc, pointsService{s: s})
	go func() { _ = s.grpc.Serve(ln) }()
}

// Addr is the gRPC address.
func (s *Server) Addr() string { return s.addr }

// URL is the address as vera's configuration takes it.
func (s *Server) URL() string { return "http://" + s.addr }

// Stop stops serving, as a Qdrant going down; the data stays for Restart.
func (s *Server) Stop() { s.grpc.Stop() }

// Restart serves again on the same address, with the same data.
func (s *Server) Restart() error {
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		return err
	}
	s.serve(ln)
	return nil
}

// Points returns the number of points in a collection.
func (s *Server) Points(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.collections[name]; c != nil {
		return len(c.points)
	}
	return 0
}

func bad(format string, args ...any) error {
	return status.Errorf(codes.InvalidArgument, "Wrong input: "+format, args...)
}

// get returns a collection; the caller holds s.mu.
func (s *Server) get(name string) (*collection, error) {
	c := s.collections[name]
	if c == nil {
		return nil, status.Errorf(codes.NotFound, "Not found: Collection `%s` doesn't exist!", name)
	}
	return c, nil
}

// HealthCheck implements qdrant.QdrantServer.
func (s *Server) HealthCheck(context.Context, *qdrant.HealthCheckRequest) (*qdrant.HealthCheckReply, error) {
	return &qdrant.HealthCheckReply{Title: "qdrant stand-in", Version: "1.17.0"}, nil
}

// pointsService serves the points API.
type pointsService struct {
	qdrant.UnimplementedPointsServer
	s *Server
}

func done() *qdrant.PointsOperationResponse {
	return &qdrant.PointsOperationResponse{Result: &qdrant.UpdateResult{Status: qdrant.UpdateStatus_Completed}}
}

// key normalises a point id. RULE: an id is an unsigned integer or a UUID;
// anything else is refused, and UUIDs compare in their canonical form.
// https://qdrant.tech/documentation/concepts/points/#point-ids
func key(id *qdrant.PointId) (string, *qdrant.PointId, error) {
	switch v := id.GetPointIdOptions().(type) {
	case *qdrant.PointId_Num:
		return fmt.Sprintf("n%020d", v.Num), id, nil
	case *qdrant.PointId_Uuid:
		u, err := uuid.Parse(v.Uuid)
		if err != nil {
			return "", nil, bad("Unable to parse UUID: %s", v.Uuid)
		}
		return "u" + u.String(), qdrant.NewID(u.String()), nil
	}
	return "", nil, bad("point id missing")
}

// Upsert implements qdrant.PointsServer.
func (ps pointsService) Upsert(_ context.Context, r *qdrant.UpsertPoints) (*qdrant.PointsOperationResponse, error) {
	s := ps.s
	s.mu.Lock()
	defer s.mu.Unlock()
	c, err := s.get(r.GetCollectionName())
	if err != nil {
		return nil, err
	}
	// The whole batch is checked before anything is written.
	type write struct {
		k string
		p *point
	}
	var writes []write
	for _, p := range r.GetPoints() {
		k, id, err := key(p.GetId())
		if err != nil {
			return nil, err
		}
		dense, sparse := c.vectorsOf(p.GetVectors())
		if err := c.checkVectors(dense, sparse); err != nil {
			return nil, err
		}
		c.normalise(dense)
		writes = append(writes, write{k, &point{id: id, dense: dense, sparse: sparse, payload: p.GetPayload()}})
	}
	for _, w := range writes {
		c.points[w.k] = w.p
	}
	return done(), nil
}

// UpdateVectors implements qdrant.PointsServer.
func (ps pointsService) UpdateVectors(_ context.Context, r *qdrant.UpdatePointVectors) (*qdrant.PointsOperationResponse, error) {
	s := ps.s
	s.mu.Lock()
	defer s.mu.Unlock()
	c, err := s.get(r.GetCollectionName())
	if err != nil {
		return nil, err
	}
	for _, pv := range r.GetPoints() {
		k, _, err := key(pv.GetId())
		if err != nil {
			return nil, err
		}
		p := c.points[k]
		if p == nil {
			// RULE: updating the vectors of a missing point is an error.
			// https://qdrant.tech/documentation/concepts/points/#update-vectors
			return nil, status.Errorf(codes.NotFound, "Not found: No point with id %s found", k[1:])
		}
		dense, sparse := c.vectorsOf(pv.GetVectors())
		if err := c.checkVectors(dense, sparse); err != nil {
			return nil, err
		}
		c.normalise(dense)
		for n, v := range dense {
			p.dense[n] = v
		}
		for n, v := range sparse {
			p.sparse[n] = v
		}
	}
	return done(), nil
}

// deletePoints deletes by ids or by filter.
func (s *Server) deletePoints(r *qdrant.DeletePoints) error {
	c, err := s.get(r.GetCollectionName())
	if err != nil {
		return err
	}
	if f := r.GetPoints().GetFilter(); f != nil {
		for k, p := range c.points {
			if ok, err := c.matches(p, f); err != nil {
				return err
			} else if ok {
				delete(c.points, k)
			}
		}
		return nil
	}
	for _, id := range r.GetPoints().GetPoints().GetIds() {
		k, _, err := key(id)
		if err != nil {
			return err
		}
		delete(c.points, k)
	}
	return nil
}

// getPoints returns the points asked for that exist.
func (s *Server) getPoints(r *qdrant.GetPoints) ([]*qdrant.RetrievedPoint, error) {
	c, err := s.get(r.GetCollectionName())
	if err != nil {
		return nil, err
	}
	var out []*qdrant.RetrievedPoint
	for _, id := range r.GetIds() {
		k, _, err := key(id)
		if err != nil {
			return nil, err
		}
		if p := c.points[k]; p != nil {
			out = append(out, p.retrieved(r.GetWithPayload(), r.GetWithVectors()))
		}
	}
	return out, nil
}

// retrieved renders a point with the selected payload and vectors.
func (p *point) retrieved(wp *qdrant.WithPayloadSelector, wv *qdrant.WithVectorsSelector) *qdrant.RetrievedPoint {
	return &qdrant.RetrievedPoint{Id: p.id, Payload: p.selectPayload(wp), Vectors: p.selectVectors(wv)}
}

func (p *point) selectPayload(wp *qdrant.WithPayloadSelector) map[string]*qdrant.Value {
	switch {
	case wp == nil:
		return nil
	case wp.GetInclude() != nil:
		out := map[string]*qdrant.Value{}
		for _, f := range wp.GetInclude().GetFields() {
			if v, ok := p.payload[f]; ok {
				out[f] = v
			}
		}
		return out
	case wp.GetExclude() != nil:
		out := map[string]*qdrant.Value{}
		for k, v := range p.payload {
			if !slices.Contains(wp.GetExclude().GetFields(), k) {
				out[k] = v
			}
		}
		return out
	case wp.GetEnable():
		return p.payload
	}
	return nil
}

// URL returns the Qdrant a test uses: real (VERA_TEST_QDRANT_URL, read by
// the caller) when set, else a stand-in started for the test and stopped
// after it.
func URL(t testing.TB, real string) string {
	t.Helper()
	if real != "" {
		return real
	}
	s, err := Start("127.0.0.1:0")
	if err != nil {
		t.Fatalf("starting the Qdrant stand-in: %v", err)
	}
	t.Cleanup(s.Stop)
	return s.URL()
}
