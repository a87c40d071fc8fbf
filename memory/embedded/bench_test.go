package embedded

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vera-proxy/vera/memory"
)

// benchDim is nomic-embed-text's dimension.
const benchDim = 768

// corpus builds n synthetic memories in one namespace: chat-like texts
// drawn from a Zipf-distributed vocabulary, with random unit vectors.
func corpus(n int) []memory.Memory {
	rng := rand.New(rand.NewPCG(7, 11))
	tok, _ := memory.NewTokenizer()
	ms := textCorpus(n)
	for i := range ms {
		v := make([]float32, benchDim)
		for j := range v {
			v[j] = float32(rng.NormFloat64())
		}
		ms[i].Vector, ms[i].Tokens = v, tok.Count(ms[i].Text)
	}
	return ms
}

// textCorpus is corpus without vectors or token counts, one minute apart.
func textCorpus(n int) []memory.Memory {
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
	ms := corpus(n)
	for i := 0; i < n; i += 2000 {
		if err := db.Upsert(context.Background(), ms[i:min(i+2000, n)]...); err != nil {
			b.Fatal(err)
		}
	}
	benchDBs[n], benchMs[n] = db, ms
	return db, ms
}

// queryFor returns a question built from memory m's words and a vector
// near m's.
func queryFor(rng *rand.Rand, m memory.Memory) (string, []float32) {
	words := strings.Fields(m.Text)
	q := strings.Join([]string{words[1], words[3], words[5], "and", words[len(words)-2]}, " ") + "?"
	v := slices.Clone(m.Vector)
	for j := range v {
		v[j] += float32(rng.NormFloat64()) * 0.5
	}
	return q, v
}

// p50 reports the median of the recorded durations in milliseconds.
func reportP50(b *testing.B, d []time.Duration) {
	slices.Sort(d)
	b.ReportMetric(float64(d[len(d)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(d[len(d)*95/100].Microseconds())/1000, "p95-ms")
}

// BenchmarkSearch: one hybrid (or lexical) search of a namespace.
//
//	go test -run '^$' -bench Search -benchtime 200x ./memory/embedded/
func BenchmarkSearch(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		for _, mode := range []string{"lexical", "vector", "hybrid"} {
			b.Run(fmt.Sprintf("%dk/%s", n/1000, mode), func(b *testing.B) {
				db, ms := benchDB(b, n)
				rng := rand.New(rand.NewPCG(1, 1))
				lat := make([]time.Duration, 0, b.N)
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					text, vec := queryFor(rng, ms[rng.IntN(len(ms))])
					q := memory.Query{Filter: memory.Filter{Namespace: "bench"}, Threshold: 0.5, Limit: 47}
					if mode != "vector" {
						q.Text = text
					}
					if mode != "lexical" {
						q.Vector = vec
						q.Threshold = 0.3
					}
					start := time.Now()
					if _, err := db.Search(context.Background(), q); err != nil {
						b.Fatal(err)
					}
					lat = append(lat, time.Since(start))
				}
				reportP50(b, lat)
			})
		}
	}
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

// BenchmarkInject: the whole context build of one chat (system layer,
// semantic search and fill, recent layer, dedup, window fitting) on a
// realistic request, embedding excluded.
//
//	go test -run '^$' -bench Inject -benchtime 200x ./memory/embedded/
func BenchmarkInject(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("%dk", n/1000), func(b *testing.B) {
			db, ms := benchDB(b, n)
			tok, err := memory.NewTokenizer()
			if err != nil {
				b.Fatal(err)
			}
			emb := &fixedEmbedder{}
			bl := memory.NewBuilder(db, emb, tok)
			bl.SystemPrompt = func() string { return "You are a helpful assistant who remembers the user." }
			rng := rand.New(rand.NewPCG(2, 2))
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				text, vec := queryFor(rng, ms[rng.IntN(len(ms))])
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
				c := bl.Build(context.Background(), req)
				lat = append(lat, time.Since(start))
				if c.Err != nil {
					b.Fatal(c.Err)
				}
				if i == 0 && len(c.Semantic) == 0 {
					b.Fatal("nothing recalled")
				}
			}
			reportP50(b, lat)
		})
	}
}
