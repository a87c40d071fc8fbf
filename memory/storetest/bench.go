package storetest

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vera-proxy/vera/memory"
	"github.com/vera-proxy/vera/text"
)

// The benchmarks every backend runs on the same synthetic memories, so
// their figures compare.

// Tiny reports whether the benchmarks run once each (-benchtime=1x), as
// the test command runs them so that none can rot: they then run on small
// stores, and their figures mean nothing. Figures come from runs with a
// -benchtime of their own (each benchmark's comment gives its command).
func Tiny() bool {
	f := flag.Lookup("test.benchtime")
	return f != nil && f.Value.String() == "1x"
}

// Sizes returns the store sizes a benchmark runs at: full, or 1,000 when
// Tiny.
func Sizes(full ...int) []int {
	if Tiny() {
		return []int{1000}
	}
	return full
}

// AllocsPer returns the mean number of allocations of one call of f, over
// runs calls, as testing.AllocsPerRun does but without rounding down: under
// the race detector sync.Pool drops a share of what is put back at random,
// so a pooled buffer is allocated again now and then, a fraction per call
// that an integer mean would hide or round up to a whole allocation.
func AllocsPer(runs int, f func()) float64 {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	f() // warm up
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range runs {
		f()
	}
	runtime.ReadMemStats(&after)
	return float64(after.Mallocs-before.Mallocs) / float64(runs)
}

// Corpus builds n synthetic memories in namespace "bench": chat-like texts
// drawn from a Zipf-distributed vocabulary, one minute apart, with random
// dim-dimension vectors and their token counts.
func Corpus(n, dim int) []memory.Memory {
	rng := rand.New(rand.NewPCG(7, 11))
	tok, _ := text.NewTokenizer()
	ms := TextCorpus(n)
	for i := range ms {
		v := make([]float32, dim)
		for j := range v {
			v[j] = float32(rng.NormFloat64())
		}
		ms[i].Vector, ms[i].Tokens = v, tok.Count(ms[i].Text)
	}
	return ms
}

// TextCorpus is Corpus without vectors or token counts.
func TextCorpus(n int) []memory.Memory {
	rng := rand.New(rand.NewPCG(7, 11))
	vocab := make([]string, 20000)
	for i := range vocab {
		vocab[i] = fmt.Sprintf("w%x", i*2654435761%1000003)
	}
	zipf := rand.NewZipf(rand.New(rand.NewPCG(3, 5)), 1.1, 1, uint64(len(vocab)-1))
	sentence := func(words int) string {
		var b strings.Builder
		for i := range words {
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(vocab[zipf.Uint64()])
		}
		return b.String()
	}
	ms := make([]memory.Memory, n)
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range ms {
		text := memory.FormatExchange(sentence(12+rng.IntN(20)), sentence(20+rng.IntN(60)))
		ms[i] = memory.Memory{
			ID: memory.NewID(), Namespace: "bench", Type: memory.Raw, Text: text,
			Time: t0.Add(time.Duration(i) * time.Minute),
		}
	}
	return ms
}

// QueryFor returns a question built from memory m's words and a vector
// near m's.
func QueryFor(rng *rand.Rand, m memory.Memory) (string, []float32) {
	words := strings.Fields(m.Text)
	q := strings.Join([]string{words[1], words[3], words[5], "and", words[len(words)-2]}, " ") + "?"
	v := slices.Clone(m.Vector)
	for j := range v {
		v[j] += float32(rng.NormFloat64()) * 0.5
	}
	return q, v
}

// ReportP50 reports the median and 95th percentile of d in milliseconds.
func ReportP50(b *testing.B, d []time.Duration) {
	slices.Sort(d)
	b.ReportMetric(float64(d[len(d)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(d[len(d)*95/100].Microseconds())/1000, "p95-ms")
}

// BenchSearch times one search of s, holding ms, per iteration: "lexical",
// "vector" or "hybrid".
func BenchSearch(b *testing.B, s memory.Store, ms []memory.Memory, mode string) {
	rng := rand.New(rand.NewPCG(1, 1))
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		text, vec := QueryFor(rng, ms[rng.IntN(len(ms))])
		q := memory.Query{Filter: memory.Filter{Namespace: "bench"}, Threshold: 0.5, Limit: 47}
		if mode != "vector" {
			q.Text = text
		}
		if mode != "lexical" {
			q.Vector = vec
			q.Threshold = 0.3
		}
		start := time.Now()
		if _, err := s.Search(context.Background(), q); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	ReportP50(b, lat)
}

// fixedEmbedder answers instantly with a precomputed vector, so the
// injection benchmark measures vera's own work, not the model's.
type fixedEmbedder struct{ v []float32 }

func (f *fixedEmbedder) Embed(_ context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i := range out {
		out[i] = f.v
	}
	return out, nil
}

// BenchInject times the whole context build of one chat on s (system
// layer, semantic search and fill, recent layer, dedup, window fitting) on
// a realistic request, embedding excluded.
func BenchInject(b *testing.B, s memory.Store, ms []memory.Memory) {
	benchInject(b, s, ms, true, 0)
}

// BenchInjectLexical is BenchInject without an embedding model (recall
// is lexical only), with the neighbours' share around (Builder.Around:
// 0 its default, below 0 none).
func BenchInjectLexical(b *testing.B, s memory.Store, ms []memory.Memory, around float64) {
	benchInject(b, s, ms, false, around)
}

func benchInject(b *testing.B, s memory.Store, ms []memory.Memory, embed bool, around float64) {
	tok, err := text.NewTokenizer()
	if err != nil {
		b.Fatal(err)
	}
	emb := &fixedEmbedder{}
	var embedder memory.Embedder // none: lexical only
	if embed {
		embedder = emb
	}
	bl := memory.NewBuilder(s, embedder, tok)
	bl.Around = around
	bl.SystemPrompt = func() string { return "You are a helpful assistant who remembers the user." }
	rng := rand.New(rand.NewPCG(2, 2))
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		text, vec := QueryFor(rng, ms[rng.IntN(len(ms))])
		emb.v = vec
		req := memory.Request{Namespace: "bench", ContextLength: 8192, Messages: []memory.Message{
			{Role: "system", Content: "Be concise."},
			{Role: "user", Content: "Can you help me plan the week?"},
			{Role: "assistant", Content: "Of course. What is on your schedule so far, and what matters most?"},
			{Role: "user", Content: "Work deadlines on Tuesday and a dentist appointment on Thursday."},
			{Role: "assistant", Content: "Then keep Monday for deep work and book Thursday afternoon off."},
			{Role: "user", Content: text},
		}}
		start := time.Now()
		c := bl.Recall(context.Background(), req)
		lat = append(lat, time.Since(start))
		if c.Err != nil {
			b.Fatal(c.Err)
		}
		if i == 0 && len(c.Semantic) == 0 {
			b.Fatal("nothing recalled")
		}
	}
	ReportP50(b, lat)
}
