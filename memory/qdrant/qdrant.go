// Package qdrant is the memory store on Qdrant, for when one machine's file
// is not enough: several vera instances sharing one memory, or more
// memories than one process should hold. It implements memory.Store over
// Qdrant's gRPC API (github.com/qdrant/go-client) and passes the same
// contract suite as the embedded store.
//
// Layout: one collection (general.qdrant_collection) holds every
// namespace. Each point is one memory, under the memory's UUID, with two
// named vectors, "dense" (the embedding, cosine) and "bm25" (a sparse
// BM25-style vector of its words, IDF applied by Qdrant), and a payload:
// namespace and type (keyword indexes), text, timestamp (RFC 3339, exact),
// ts (Unix microseconds, an integer range index: filters and order_by),
// model, tokens and metadata.
package qdrant

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/qdrant/go-client/qdrant"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/vera-proxy/vera/config"
	"github.com/vera-proxy/vera/memory"
)

// Names of the vectors and payload fields.
const (
	denseVector  = "dense"
	sparseVector = "bm25"

	fieldNamespace = "namespace"
	fieldType      = "type"
	fieldText      = "text"
	fieldTimestamp = "timestamp"
	fieldTS        = "ts"
	fieldModel     = "model"
	fieldTokens    = "tokens"
	fieldTermsV    = "terms_v" // the text.TermsVersion its sparse vector was built with
	fieldMetadata  = "metadata"

	// metaModel is the collection metadata key naming the embedding model.
	metaModel = "vera_embedding_model"
)

// rrfK makes Qdrant's reciprocal rank fusion, 1/(k + rank from 0), equal
// to the embedded store's 1/(60 + rank from 1).
const rrfK = 61

// callTimeout bounds every call to Qdrant: memory must never hold a chat
// for long, and a write that times out is retried from the local queue.
const callTimeout = 10 * time.Second

// readTimeout bounds the reads a chat waits for (search, latest): past it
// the chat goes on without memory.
const readTimeout = 3 * time.Second

// batchSize bounds the points of one upsert, delete or get.
const batchSize = 256

// Options configure the store.
type Options struct {
	// URL is Qdrant's address: http://host:6334 (gRPC). The REST port 6333
	// is taken to mean the same server's gRPC port 6334; https uses TLS.
	URL string
	// Collection is the collection's name; empty means "memories".
	Collection string
	// APIKey is sent with every call when set.
	APIKey string
}

// Store is a memory.Store on Qdrant.
type Store struct {
	client     *qdrant.Client
	collection string
	addr       string

	mu    sync.Mutex
	dim   int    // dense vector size, 0 until the collection exists
	model string // embedding model recorded on the collection

	plans plans // the plans collection's (plans.go)

	lockSettle time.Duration // Lock's wait before reading its claim back; 0: lockSettle
}

var _ memory.Store = (*Store)(nil)

// Open connects to Qdrant. It does not wait for Qdrant to be up: an
// outage at start is an outage like any other (chats answered without
// memory, turns kept in the local queue). An existing collection is read
// at once when Qdrant answers.
func Open(ctx context.Context, o Options) (*Store, error) {
	cfg, addr, err := ClientConfig(o.URL)
	if err != nil {
		return nil, err
	}
	cfg.APIKey = o.APIKey
	c, err := qdrant.NewClient(cfg)
	if err != nil {
		return nil, fmt.Errorf("qdrant %s: %w", addr, err)
	}
	s := &Store{client: c, collection: o.Collection, addr: addr}
	if s.collection == "" {
		s.collection = "memories"
	}
	_ = s.load(ctx) // best effort: the collection is read again when needed
	return s, nil
}

// ClientConfig turns a Qdrant URL into the go-client's configuration and
// the gRPC address it dials.
func ClientConfig(raw string) (*qdrant.Config, string, error) {
	if !strings.Contains(raw, "://") {
		raw = "http://" + raw
	}
	// Errors quote the URL as it may be shown: without its password.
	shown := config.RedactURL(raw)
	u, err := url.Parse(raw)
	if err != nil || u.Hostname() == "" {
		return nil, "", fmt.Errorf("qdrant URL %q: want http://host:6334", shown)
	}
	if u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "grpc" {
		return nil, "", fmt.Errorf("qdrant URL %q: scheme must be http or https", shown)
	}
	port := 6334
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n <= 0 || n > 65535 {
			return nil, "", fmt.Errorf("qdrant URL %q: bad port", shown)
		}
		port = n
	}
	if port == 6333 {
		// 6333 is Qdrant's REST port, the one people copy from its
		// dashboard; vera speaks gRPC, served next to it on 6334.
		port = 6334
	}
	cfg := &qdrant.Config{
		Host:                   u.Hostname(),
		Port:                   port,
		UseTLS:                 u.Scheme == "https",
		SkipCompatibilityCheck: true, // checked by health, not by a log line at connect
		PoolSize:               1,
	}
	return cfg, net.JoinHostPort(u.Hostname(), strconv.Itoa(port)), nil
}

// Addr returns the gRPC address in use, as logs, /healthz and `vera check`
// show it: host and port only, so no credential a URL held can appear.
func (s *Store) Addr() string { return s.addr }

// Collection returns the collection's name.
func (s *Store) Collection() string { return s.collection }

// Close closes the connection.
func (s *Store) Close() error { return s.client.Close() }

// wrap turns a Qdrant error into one a caller can act on: an unreachable
// Qdrant is memory.ErrUnavailable.
func (s *Store) wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled, codes.ResourceExhausted, codes.Aborted:
		return fmt.Errorf("qdrant %s: %s: %w: %w", s.addr, op, memory.ErrUnavailable, err)
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return fmt.Errorf("qdrant %s: %s: %w: %w", s.addr, op, memory.ErrUnavailable, err)
	}
	return fmt.Errorf("qdrant %s: %s: %w", s.addr, op, err)
}

func withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, callTimeout)
}

func ptr[T any](v T) *T { return &v }

// Upsert implements memory.Store.
func (s *Store) Upsert(ctx context.Context, ms ...memory.Memory) error {
	for i := range ms {
		if err := ms[i].Validate(); err != nil {
			return err
		}
	}
	dim, err := s.ready(ctx)
	if err != nil {
		return err
	}
	points := make([]*qdrant.PointStruct, 0, len(ms))
	for _, m := range ms {
		if m.Vector != nil && len(m.Vector) != dim {
			return fmt.Errorf("memory %s: vector of %d dimensions, the collection holds %d", m.ID, len(m.Vector), dim)
		}
		p, err := point(m)
		if err != nil {
			return err
		}
		points = append(points, p)
	}
	for chunk := range slices.Chunk(points, batchSize) {
		cctx, cancel := withTimeout(ctx)
		_, err := s.client.Upsert(cctx, &qdrant.UpsertPoints{CollectionName: s.collection, Wait: ptr(true), Points: chunk})
		cancel()
		if err != nil {
			return s.wrap("upsert", err)
		}
	}
	return nil
}

// SetVectors implements memory.Store: it reads the stored texts and sets
// the dense vector of the points whose text is unchanged. (Qdrant has no
// conditional vector update, so an edit landing between the read and the
// write would get the old text's vector; vera edits memories only through
// Upsert, which replaces the vector too.)
func (s *Store) SetVectors(ctx context.Context, ms ...memory.Memory) error {
	ok, err := s.exists(ctx)
	if err != nil || !ok {
		return err
	}
	byID := map[string]memory.Memory{}
	for _, m := range ms {
		byID[m.ID] = m
	}
	for chunk := range slices.Chunk(ms, batchSize) {
		ids := make([]*qdrant.PointId, len(chunk))
		for i, m := range chunk {
			ids[i] = qdrant.NewID(m.ID)
		}
		cctx, cancel := withTimeout(ctx)
		got, err := s.client.Get(cctx, &qdrant.GetPoints{CollectionName: s.collection, Ids: ids,
			WithPayload: qdrant.NewWithPayloadInclude(fieldText)})
		cancel()
		if err != nil {
			return s.wrap("set vectors", err)
		}
		var updates []*qdrant.PointVectors
		for _, p := range got {
			id := p.GetId().GetUuid()
			m, ok := byID[id]
			if !ok || p.GetPayload()[fieldText].GetStringValue() != m.Text || m.Vector == nil {
				continue
			}
			updates = append(updates, &qdrant.PointVectors{Id: qdrant.NewID(id),
				Vectors: qdrant.NewVectorsMap(map[string]*qdrant.Vector{denseVector: qdrant.NewVectorDense(m.Vector)})})
		}
		if len(updates) == 0 {
			continue
		}
		cctx, cancel = withTimeout(ctx)
		_, err = s.client.UpdateVectors(cctx, &qdrant.UpdatePointVectors{CollectionName: s.collection, Wait: ptr(true), Points: updates})
		cancel()
		if err != nil {
			return s.wrap("set vectors", err)
		}
	}
	return nil
}

// filter renders f as a Qdrant filter.
func filter(f memory.Filter) *qdrant.Filter {
	must := []*qdrant.Condition{qdrant.NewMatchKeyword(fieldNamespace, f.Namespace)}
	if len(f.Types) > 0 {
		types := make([]string, len(f.Types))
		for i, t := range f.Types {
			types[i] = string(t)
		}
		must = append(must, qdrant.NewMatchKeywords(fieldType, types...))
	}
	if !f.Since.IsZero() || !f.Until.IsZero() {
		r := &qdrant.Range{}
		if !f.Since.IsZero() {
			// Microseconds: exact in a float64 until the year 2255.
			r.Gte = ptr(float64(ceilMicro(f.Since)))
		}
		if !f.Until.IsZero() {
			r.Lt = ptr(float64(ceilMicro(f.Until)))
		}
		must = append(must, qdrant.NewRange(fieldTS, r))
	}
	out := &qdrant.Filter{Must: must}
	if f.NoVector {
		out.MustNot = []*qdrant.Condition{qdrant.NewHasVector(denseVector)}
	}
	return out
}

// ceilMicro is t in Unix microseconds, rounded up: a memory at or after t
// (stored rounded down) compares the same way.
func ceilMicro(t time.Time) int64 {
	us := t.UnixMicro()
	if t.Sub(time.UnixMicro(us)) > 0 {
		us++
	}
	return us
}

// Search implements memory.Store: the dense and sparse sides are fused by
// Qdrant (prefetch + RRF); the two sides are also asked alone, in the same
// batch, for their own scores (Hit.Cosine, Hit.Lexical). The threshold
// applies to the dense side, as a cosine similarity.
func (s *Store) Search(ctx context.Context, q memory.Query) ([]memory.Hit, error) {
	ok, err := s.exists(ctx)
	if err != nil || !ok {
		return nil, err
	}
	limit := q.Limit
	if limit <= 0 {
		limit = 10
	}
	depth := uint64(limit + 10)
	f := filter(q.Filter)
	var sides []*qdrant.PrefetchQuery
	if len(q.Vector) > 0 {
		thr := float32(q.Threshold)
		sides = append(sides, &qdrant.PrefetchQuery{Query: qdrant.NewQueryDense(q.Vector), Using: ptr(denseVector),
			Filter: f, ScoreThreshold: &thr, Limit: &depth})
	}
	if idx, vals := SparseQuery(q.Text); len(idx) > 0 {
		sides = append(sides, &qdrant.PrefetchQuery{Query: qdrant.NewQuerySparse(idx, vals), Using: ptr(sparseVector),
			Filter: f, Limit: &depth})
	}
	if len(sides) == 0 {
		return nil, nil
	}
	batch := make([]*qdrant.QueryPoints, 0, 3)
	for _, p := range sides {
		batch = append(batch, &qdrant.QueryPoints{CollectionName: s.collection, Query: p.Query, Using: p.Using,
			Filter: p.Filter, ScoreThreshold: p.ScoreThreshold, Limit: p.Limit, WithPayload: qdrant.NewWithPayload(true)})
	}
	if len(sides) == 2 {
		batch = append(batch, &qdrant.QueryPoints{CollectionName: s.collection, Prefetch: sides,
			Query: qdrant.NewQueryRRF(&qdrant.Rrf{K: ptr(uint32(rrfK))}), Limit: ptr(uint64(limit)),
			WithPayload: qdrant.NewWithPayload(true)})
	}
	cctx, cancel := context.WithTimeout(ctx, readTimeout)
	res, err := s.client.QueryBatch(cctx, &qdrant.QueryBatchPoints{CollectionName: s.collection, QueryPoints: batch})
	cancel()
	if err != nil {
		return nil, s.wrap("search", err)
	}
	if len(res) != len(batch) {
		return nil, fmt.Errorf("qdrant %s: search: %d results for %d queries", s.addr, len(res), len(batch))
	}
	side := map[string]float64{}
	lexical := map[string]float64{}
	for i := range sides {
		for _, p := range res[i].GetResult() {
			if sides[i].GetUsing() == denseVector {
				side[p.GetId().GetUuid()] = float64(p.GetScore())
			} else {
				lexical[p.GetId().GetUuid()] = float64(p.GetScore())
			}
		}
	}
	// One side alone: its own ranking, scored as fusion would score it.
	fused := res[len(res)-1].GetResult()
	hits := make([]memory.Hit, 0, min(len(fused), limit))
	for r, p := range fused {
		if len(hits) == limit {
			break
		}
		m, err := memoryOf(p.GetId(), p.GetPayload(), nil)
		if err != nil {
			return nil, err
		}
		score := float64(p.GetScore())
		if len(sides) == 1 {
			score = 1 / float64(rrfK+r)
		}
		hits = append(hits, memory.Hit{Memory: m, Score: score, Cosine: side[m.ID], Lexical: lexical[m.ID]})
	}
	return hits, nil
}

// Latest implements memory.Store, ordered by Qdrant on the ts range index.
func (s *Store) Latest(ctx context.Context, f memory.Filter, limit int) ([]memory.Memory, error) {
	ok, err := s.exists(ctx)
	if err != nil || !ok || limit <= 0 {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	got, err := s.client.Scroll(cctx, &qdrant.ScrollPoints{
		CollectionName: s.collection, Filter: filter(f), Limit: ptr(uint32(limit)),
		OrderBy:     &qdrant.OrderBy{Key: fieldTS, Direction: qdrant.Direction_Desc.Enum()},
		WithPayload: qdrant.NewWithPayload(true),
	})
	if err != nil {
		return nil, s.wrap("latest", err)
	}
	out := make([]memory.Memory, 0, len(got))
	for _, p := range got {
		m, err := memoryOf(p.GetId(), p.GetPayload(), nil)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	// Equal microseconds come in Qdrant's order; the exact time decides.
	slices.SortStableFunc(out, func(a, b memory.Memory) int { return b.Time.Compare(a.Time) })
	return out, nil
}

// Scroll implements memory.Store: pages in point id order, the cursor
// being the first id of the next page (Qdrant's next_page_offset). There
// is no cap: every point is reached.
func (s *Store) Scroll(ctx context.Context, f memory.Filter, cursor string, limit int) ([]memory.Memory, string, error) {
	ok, err := s.exists(ctx)
	if err != nil || !ok {
		return nil, "", err
	}
	if limit <= 0 {
		limit = 100
	}
	req := &qdrant.ScrollPoints{CollectionName: s.collection, Filter: filter(f), Limit: ptr(uint32(limit)),
		WithPayload: qdrant.NewWithPayload(true)}
	if cursor != "" {
		req.Offset = qdrant.NewID(cursor)
	}
	cctx, cancel := withTimeout(ctx)
	defer cancel()
	got, next, err := s.client.ScrollAndOffset(cctx, req)
	if err != nil {
		return nil, "", s.wrap("scroll", err)
	}
	out := make([]memory.Memory, 0, len(got))
	for _, p := range got {
		m, err := memoryOf(p.GetId(), p.GetPayload(), nil)
		if err != nil {
			return nil, "", err
		}
		out = append(out, m)
	}
	return out, next.GetUuid(), nil
}

// Get implements memory.Store.
func (s *Store) Get(ctx context.Context, id string) (memory.Memory, error) {
	ok, err := s.exists(ctx)
	if err != nil {
		return memory.Memory{}, err
	}
	if !ok {
		return memory.Memory{}, fmt.Errorf("%w: %s", memory.ErrNotFound, id)
	}
	cctx, cancel := withTimeout(ctx)
	defer cancel()
	got, err := s.client.Get(cctx, &qdrant.GetPoints{CollectionName: s.collection, Ids: []*qdrant.PointId{qdrant.NewID(id)},
		WithPayload: qdrant.NewWithPayload(true), WithVectors: qdrant.NewWithVectorsInclude(denseVector)})
	if status.Code(err) == codes.InvalidArgument {
		return memory.Memory{}, fmt.Errorf("%w: %s", memory.ErrNotFound, id) // not a UUID: no such point
	}
	if err != nil {
		return memory.Memory{}, s.wrap("get", err)
	}
	if len(got) == 0 {
		return memory.Memory{}, fmt.Errorf("%w: %s", memory.ErrNotFound, id)
	}
	p := got[0]
	return memoryOf(p.GetId(), p.GetPayload(), p.GetVectors().GetVectors().GetVectors()[denseVector].GetDense().GetData())
}

// Delete implements memory.Store.
func (s *Store) Delete(ctx context.Context, ids ...string) error {
	ok, err := s.exists(ctx)
	if err != nil || !ok || len(ids) == 0 {
		return err
	}
	for chunk := range slices.Chunk(ids, batchSize) {
		pids := make([]*qdrant.PointId, len(chunk))
		for i, id := range chunk {
			pids[i] = qdrant.NewID(id)
		}
		cctx, cancel := withTimeout(ctx)
		_, err := s.client.Delete(cctx, &qdrant.DeletePoints{CollectionName: s.collection, Wait: ptr(true),
			Points: qdrant.NewPointsSelector(pids...)})
		cancel()
		if err != nil {
			return s.wrap("delete", err)
		}
	}
	return nil
}

// Count implements memory.Store (an exact count).
func (s *Store) Count(ctx context.Context, f memory.Filter) (int, error) {
	ok, err := s.exists(ctx)
	if err != nil || !ok {
		return 0, err
	}
	cctx, cancel := withTimeout(ctx)
	defer cancel()
	n, err := s.client.Count(cctx, &qdrant.CountPoints{CollectionName: s.collection, Filter: filter(f), Exact: ptr(true)})
	if err != nil {
		return 0, s.wrap("count", err)
	}
	return int(n), nil
}

// maxNamespaces bounds the facet of namespaces.
const maxNamespaces = 100_000

// Namespaces implements memory.Store, with a facet on the namespace index.
func (s *Store) Namespaces(ctx context.Context) ([]string, error) {
	ok, err := s.exists(ctx)
	if err != nil || !ok {
		return nil, err
	}
	cctx, cancel := withTimeout(ctx)
	defer cancel()
	hits, err := s.client.Facet(cctx, &qdrant.FacetCounts{CollectionName: s.collection, Key: fieldNamespace,
		Limit: ptr(uint64(maxNamespaces)), Exact: ptr(true)})
	if err != nil {
		return nil, s.wrap("namespaces", err)
	}
	out := make([]string, 0, len(hits))
	for _, h := range hits {
		out = append(out, h.GetValue().GetStringValue())
	}
	slices.Sort(out)
	return out, nil
}

// Ping checks that Qdrant answers, for health.
func (s *Store) Ping(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err := s.client.HealthCheck(cctx)
	return s.wrap("health check", err)
}
