package embedded

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/vera-proxy/vera/memory"
	"github.com/vera-proxy/vera/memory/storetest"
)

// benchDim is nomic-embed-text's dimension.
const benchDim = 768

var (
	benchMu  sync.Mutex
	benchDBs = map[int]*DB{}
	benchMs  = map[int][]memory.Memory{}
)

// benchDB returns a store holding n memories, built once per size.
func benchDB(b *testing.B, n int) (*DB, []memory.Memory) {
	benchMu.Lock()
	defer benchMu.Unlock()
	if db, ok := benchDBs[n]; ok {
		return db, benchMs[n]
	}
	dir, err := os.MkdirTemp("", "vera-bench")
	if err != nil {
		b.Fatal(err)
	}
	db, err := Open(context.Background(), dir)
	if err != nil {
		b.Fatal(err)
	}
	ms := storetest.Corpus(n, benchDim)
	for i := 0; i < n; i += 2000 {
		if err := db.Upsert(context.Background(), ms[i:min(i+2000, n)]...); err != nil {
			b.Fatal(err)
		}
	}
	benchDBs[n], benchMs[n] = db, ms
	return db, ms
}

// BenchmarkSearch: one hybrid (or lexical, or vector) search of a
// namespace.
//
//	go test -run '^$' -bench Search -benchtime 300x ./memory/embedded/
func BenchmarkSearch(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		for _, mode := range []string{"lexical", "vector", "hybrid"} {
			b.Run(fmt.Sprintf("%dk/%s", n/1000, mode), func(b *testing.B) {
				db, ms := benchDB(b, n)
				storetest.BenchSearch(b, db, ms, mode)
			})
		}
	}
}

// BenchmarkInject: the whole context build of one chat, embedding
// excluded.
//
//	go test -run '^$' -bench Inject -benchtime 300x ./memory/embedded/
func BenchmarkInject(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("%dk", n/1000), func(b *testing.B) {
			db, ms := benchDB(b, n)
			storetest.BenchInject(b, db, ms)
		})
	}
}
