package index

import (
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vera-proxy/vera/memory"
	"github.com/vera-proxy/vera/memory/storetest"
)

// benchDim is nomic-embed-text's dimension.
const benchDim = 768

var (
	benchMu      sync.Mutex
	benchIndexes = map[int]*Namespace{}
)

// benchIndex returns an index of n memories of storetest.Corpus, as the
// store indexes them (rows 1 to n, in order), built once per size.
func benchIndex(n int) *Namespace {
	benchMu.Lock()
	defer benchMu.Unlock()
	if ix, ok := benchIndexes[n]; ok {
		return ix
	}
	ms := storetest.Corpus(n, benchDim)
	ix := New(Options{})
	for i := range ms {
		ix.Add(int64(i+1), &ms[i], Normalize(ms[i].Vector))
	}
	benchIndexes[n] = ix
	return ix
}

// BenchmarkCommonWords: the lexical side of a question made of the
// corpus's four commonest words (the harness's worst case) at the
// harness's depth: back to back (warm), after 3 ms asleep or spinning
// (as between two chats), and with the caches cleared first by writing
// 48 MiB (cold).
//
//	go test -run '^$' -bench CommonWords -benchtime 300x ./memory/embedded/index/
func BenchmarkCommonWords(b *testing.B) {
	var spill []byte
	before := map[string]func(){
		"warm":   func() {},
		"asleep": func() { time.Sleep(3 * time.Millisecond) },
		"spinning": func() {
			for t := time.Now(); time.Since(t) < 3*time.Millisecond; {
			}
		},
		"cold": func() {
			if spill == nil {
				spill = make([]byte, 48<<20)
			}
			for i := 0; i < len(spill); i += 64 {
				spill[i]++
			}
		},
	}
	for _, n := range storetest.Sizes(10_000, 100_000) {
		for _, mode := range []string{"warm", "asleep", "spinning", "cold"} {
			b.Run(fmt.Sprintf("%dk/%s", n/1000, mode), func(b *testing.B) {
				benchLexical(b, n, "w0 w68717 wd0e2e w45302", 0, before[mode])
			})
		}
	}
}

// BenchmarkShare: the lexical side with the neighbours' share (the
// builder's default, 0.3) and without, for a question of common words
// and one led by a rarer word, each after 3 ms asleep (as between two
// chats: the share's look-ups come from memory).
//
//	go test -run '^$' -bench Share -benchtime 300x ./memory/embedded/index/
func BenchmarkShare(b *testing.B) {
	for _, n := range storetest.Sizes(10_000, 100_000) {
		for name, text := range map[string]string{"common": "w0 w68717 wd0e2e w45302", "rarer": "what about w1a2f3 w68717 and w45302"} {
			for _, share := range []float64{0, 0.3} {
				b.Run(fmt.Sprintf("%dk/%s/share=%v", n/1000, name, share), func(b *testing.B) {
					benchLexical(b, n, text, share, func() { time.Sleep(3 * time.Millisecond) })
				})
			}
		}
	}
}

// BenchmarkMixedWords: the lexical side of a question shaped as the
// harness's question about one memory, after 3 ms asleep: four words
// found in about 0.2 %, 2.4 %, 10 % and 75 % of the memories (the
// document-at-a-time ranking, led by its rarest word).
//
//	go test -run '^$' -bench MixedWords -benchtime 300x ./memory/embedded/index/
func BenchmarkMixedWords(b *testing.B) {
	for _, n := range storetest.Sizes(10_000, 100_000) {
		b.Run(fmt.Sprintf("%dk", n/1000), func(b *testing.B) {
			text := wordsAt(benchIndex(n), 0.002, 0.024, 0.1, 0.75)
			benchLexical(b, n, text, 0.3, func() { time.Sleep(3 * time.Millisecond) })
		})
	}
}

// wordsAt is a question of the index's words whose shares of the
// memories are nearest each of shares.
func wordsAt(ix *Namespace, shares ...float64) string {
	words := make([]string, len(shares))
	for i, share := range shares {
		want, best := share*float64(ix.live), math.Inf(1)
		for term, id := range ix.terms {
			if d := math.Abs(float64(ix.post[id].n) - want); d < best || d == best && term < words[i] {
				words[i], best = term, d
			}
		}
	}
	return strings.Join(words, " ")
}

// benchLexical times the lexical side of text (the harness's depth, 47,
// and the neighbours' share around) on the index of n memories, before
// each search calling before, untimed.
func benchLexical(b *testing.B, n int, text string, around float64, before func()) {
	ix := benchIndex(n)
	q := memory.Query{Filter: memory.Filter{Namespace: "bench"}, Text: text, Limit: 47, Around: around}
	for b.Loop() {
		b.StopTimer()
		before()
		b.StartTimer()
		if len(ix.lexicalSide(&q, nil)) == 0 {
			b.Fatal("no memory holds the question's words")
		}
	}
}
