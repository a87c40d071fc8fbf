package embedded

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vera-proxy/vera/memory"
	"github.com/vera-proxy/vera/memory/storetest"
	"github.com/vera-proxy/vera/text"
)

// benchDim is nomic-embed-text's dimension.
const benchDim = 768

var (
	benchMu  sync.Mutex
	benchDBs = map[int]*DB{}
	benchMs  = map[int][]memory.Memory{}
)

// stores are the benchmarks' store directories, removed once the run
// ends (TestMain), so that repeated runs do not fill the disk.
var stores []string

func TestMain(m *testing.M) {
	code := m.Run()
	for _, db := range benchDBs {
		db.Close()
	}
	for _, db := range shortChatDBs {
		db.Close()
	}
	for _, dir := range stores {
		os.RemoveAll(dir)
	}
	os.Exit(code)
}

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
	stores = append(stores, dir)
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
	for _, n := range storetest.Sizes(10_000, 100_000) {
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
	for _, n := range storetest.Sizes(10_000, 100_000) {
		b.Run(fmt.Sprintf("%dk", n/1000), func(b *testing.B) {
			db, ms := benchDB(b, n)
			storetest.BenchInject(b, db, ms)
		})
	}
}

// BenchmarkInjectLexical: BenchmarkInject without an embedding model,
// with the neighbours' share (the default, 0.3) and without (-1).
//
//	go test -run '^$' -bench InjectLexical -benchtime 300x ./memory/embedded/
func BenchmarkInjectLexical(b *testing.B) {
	for _, n := range storetest.Sizes(10_000, 100_000) {
		for _, around := range []float64{0, -1} {
			name := map[float64]string{0: "share", -1: "none"}[around]
			b.Run(fmt.Sprintf("%dk/%s", n/1000, name), func(b *testing.B) {
				db, ms := benchDB(b, n)
				storetest.BenchInjectLexical(b, db, ms, around)
			})
		}
	}
}

// BenchmarkShortChat: the context build of one short chat at 10k and 100k
// stored turns, with their token counts stored ("counted", as the queue
// now keeps them) and without ("uncounted", as every turn written through
// the queue arrived before): the builder then counts every candidate.
//
//	go test -run '^$' -bench ShortChat -benchtime 300x -count 6 ./memory/embedded/
func BenchmarkShortChat(b *testing.B) {
	for _, n := range storetest.Sizes(10_000, 100_000) {
		for _, counted := range []bool{true, false} {
			name := fmt.Sprintf("%dk/counted", n/1000)
			if !counted {
				name = fmt.Sprintf("%dk/uncounted", n/1000)
			}
			b.Run(name, func(b *testing.B) {
				db, ms := shortChatDB(b, n, counted)
				storetest.BenchInject(b, db, ms)
			})
		}
	}
}

var (
	shortChatDBs = map[[2]int]*DB{}
	shortChatMs  = map[[2]int][]memory.Memory{}
)

// shortChatDB is benchDB with or without token counts, built once per
// process for each.
func shortChatDB(b *testing.B, n int, counted bool) (*DB, []memory.Memory) {
	benchMu.Lock()
	defer benchMu.Unlock()
	key := [2]int{n, 0}
	if counted {
		key[1] = 1
	}
	if db, ok := shortChatDBs[key]; ok {
		return db, shortChatMs[key]
	}
	ms := storetest.Corpus(n, benchDim)
	dir, err := os.MkdirTemp("", "vera-bench")
	if err != nil {
		b.Fatal(err)
	}
	stores = append(stores, dir)
	db, err := Open(context.Background(), dir)
	if err != nil {
		b.Fatal(err)
	}
	if !counted {
		for i := range ms {
			ms[i].Tokens = 0
		}
	}
	for i := 0; i < n; i += 2000 {
		if err := db.Upsert(context.Background(), ms[i:min(i+2000, n)]...); err != nil {
			b.Fatal(err)
		}
	}
	shortChatDBs[key], shortChatMs[key] = db, ms
	return db, ms
}

// BenchmarkAfterHugeMessage: a short chat in a namespace where someone once
// pasted a 10 MB message, against the same chat in a namespace without it.
// "capped" stores that turn as vera now does (max_turn_tokens, count
// kept); "whole" stores it as earlier versions did (all of it, count
// unknown). The target: capped costs at most twice fresh.
//
//	go test -run '^$' -bench AfterHugeMessage -benchtime 100x -count 5 ./memory/embedded/
func BenchmarkAfterHugeMessage(b *testing.B) {
	tok, err := text.NewTokenizer()
	if err != nil {
		b.Fatal(err)
	}
	size := 10 << 20
	if storetest.Tiny() {
		size = 1 << 20
	}
	huge := strings.Repeat("please summarise this log line for me ", size/38)
	for _, mode := range []string{"fresh", "capped", "whole"} {
		b.Run(mode, func(b *testing.B) {
			db, err := Open(context.Background(), b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			ms := storetest.Corpus(1000, benchDim)
			if mode != "fresh" {
				m := memory.Memory{ID: memory.NewID(), Namespace: "bench", Type: memory.Raw, Time: ms[len(ms)-1].Time.Add(time.Minute)}
				if mode == "capped" {
					m.Text, m.Tokens = memory.CapExchange(tok, huge, "Here is the summary.", memory.DefaultMaxTurnTokens)
				} else {
					m.Text = memory.FormatExchange(huge, "Here is the summary.")
				}
				ms = append(ms, m)
			}
			if err := db.Upsert(context.Background(), ms...); err != nil {
				b.Fatal(err)
			}
			storetest.BenchInject(b, db, ms[:1000])
		})
	}
}

// BenchmarkOpen: opening a store of 100k memories (chat-like texts, 64-
// dimension vectors), which loads every memory into the in-memory index:
// vera's start-up.
//
//	go test -run '^$' -bench Open -benchtime 5x -count 6 ./memory/embedded/
func BenchmarkOpen(b *testing.B) {
	for _, n := range storetest.Sizes(100_000) {
		b.Run(fmt.Sprintf("%dk", n/1000), func(b *testing.B) {
			dir := b.TempDir()
			db, err := Open(context.Background(), dir)
			if err != nil {
				b.Fatal(err)
			}
			ms := storetest.TextCorpus(n)
			for i := range ms {
				ms[i].Vector = make([]float32, 64)
				ms[i].Vector[i%64] = 1
			}
			for i := 0; i < n; i += 2000 {
				if err := db.Upsert(context.Background(), ms[i:min(i+2000, n)]...); err != nil {
					b.Fatal(err)
				}
			}
			db.Close()
			b.ResetTimer()
			for b.Loop() {
				db, err := Open(context.Background(), dir)
				if err != nil {
					b.Fatal(err)
				}
				db.Close()
			}
		})
	}
}

// BenchmarkUpsert: one new turn written into a namespace of 100k (one
// transaction, synced, and the index updated): the write path's share of
// the store.
//
//	go test -run '^$' -bench Upsert -benchtime 300x -count 6 ./memory/embedded/
func BenchmarkUpsert(b *testing.B) {
	for _, n := range storetest.Sizes(100_000) {
		b.Run(fmt.Sprintf("%dk", n/1000), func(b *testing.B) {
			db, ms := benchDB(b, n)
			i := 0
			for b.Loop() {
				m := ms[i%len(ms)]
				m.ID = fmt.Sprintf("upsert-%d-%d", n, i)
				m.Time = time.Now()
				if err := db.Upsert(context.Background(), m); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

// BenchmarkEnqueue: one finished turn (2 KB) committed to the durable
// queue, which the end of every answer with memory waits for: back to
// back, and after 3 ms asleep (as between two chats: a disk's flush
// after a pause can take four to five times one right after another). The queue is emptied, as the writer does,
// outside the timed part.
//
//	go test -run '^$' -bench Enqueue -benchtime 500x -count 6 ./memory/embedded/
func BenchmarkEnqueue(b *testing.B) {
	for _, mode := range []string{"back-to-back", "asleep"} {
		b.Run(mode, func(b *testing.B) {
			ctx := context.Background()
			db, err := Open(ctx, b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			text := "User: " + strings.Repeat("what did we say about the garden ", 30) + "\nAssistant: " + strings.Repeat("we said a lot ", 70)
			i := 0
			for b.Loop() {
				if mode == "asleep" {
					b.StopTimer()
					time.Sleep(3 * time.Millisecond)
					b.StartTimer()
				}
				m := memory.Memory{ID: memory.NewID(), Namespace: "u", Type: memory.Raw, Text: text, Time: time.Now()}
				if err := db.Enqueue(ctx, m); err != nil {
					b.Fatal(err)
				}
				if i++; i%32 == 0 {
					b.StopTimer()
					ms, err := db.Pending(ctx, 64)
					if err != nil {
						b.Fatal(err)
					}
					ids := make([]string, len(ms))
					for k, m := range ms {
						ids[k] = m.ID
					}
					if err := db.Done(ctx, ids...); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
			}
		})
	}
}
