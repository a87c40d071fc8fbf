package qdrant

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/vera-proxy/vera/memory"
	"github.com/vera-proxy/vera/memory/qdrant/qdranttest"
	"github.com/vera-proxy/vera/memory/storetest"
)

// The embedded store's benchmarks, on Qdrant: against VERA_TEST_QDRANT_URL
// when set, else against the in-process stand-in, whose figures measure
// vera's client, gRPC and the stand-in's exact scan, not Qdrant.
//
//	go test -run '^$' -bench . -benchtime 100x ./memory/qdrant/

const benchDim = 768

var (
	benchMu     sync.Mutex
	benchStores = map[int]*Store{}
	benchMs     = map[int][]memory.Memory{}
	benchURL    string
)

func benchStore(b *testing.B, n int) (*Store, []memory.Memory) {
	benchMu.Lock()
	defer benchMu.Unlock()
	if s, ok := benchStores[n]; ok {
		return s, benchMs[n]
	}
	ctx := context.Background()
	if benchURL == "" {
		benchURL = os.Getenv("VERA_TEST_QDRANT_URL")
		if benchURL == "" {
			srv, err := qdranttest.Start("127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			benchURL = srv.URL()
		}
	}
	s, err := Open(ctx, Options{URL: benchURL, Collection: fmt.Sprintf("vera_bench_%d", n)})
	if err != nil {
		b.Fatal(err)
	}
	_ = s.client.DeleteCollection(ctx, s.collection)
	s.dim = 0
	if _, err := s.VectorSpace(ctx, "bench", benchDim); err != nil {
		b.Fatal(err)
	}
	ms := storetest.Corpus(n, benchDim)
	for i := 0; i < n; i += 500 {
		if err := s.Upsert(ctx, ms[i:min(i+500, n)]...); err != nil {
			b.Fatal(err)
		}
	}
	benchStores[n], benchMs[n] = s, ms
	return s, ms
}

// benchSizes: the stand-in scans every point on every query, so 100k runs
// only against a real Qdrant.
func benchSizes() []int {
	if os.Getenv("VERA_TEST_QDRANT_URL") != "" {
		return storetest.Sizes(10_000, 100_000)
	}
	return storetest.Sizes(10_000)
}

// BenchmarkSearch: one search of a namespace.
func BenchmarkSearch(b *testing.B) {
	for _, n := range benchSizes() {
		for _, mode := range []string{"lexical", "vector", "hybrid"} {
			b.Run(fmt.Sprintf("%dk/%s", n/1000, mode), func(b *testing.B) {
				s, ms := benchStore(b, n)
				storetest.BenchSearch(b, s, ms, mode)
			})
		}
	}
}

// BenchmarkInject: the whole context build of one chat, embedding
// excluded.
func BenchmarkInject(b *testing.B) {
	for _, n := range benchSizes() {
		b.Run(fmt.Sprintf("%dk", n/1000), func(b *testing.B) {
			s, ms := benchStore(b, n)
			storetest.BenchInject(b, s, ms)
		})
	}
}
