package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/vera-proxy/vera/memory"
	"github.com/vera-proxy/vera/memory/embedded"
)

// MemoryRow is the chat path with memory on, minus the same chat with
// memory off, at one store size (embedded backend; the fake's embedding
// answers at once, and its time is not vera's).
type MemoryRow struct {
	Memories int     `json:"memories"`
	OffP50   float64 `json:"off_p50_ms"`
	OnP50    float64 `json:"on_p50_ms"`
	OnP95    float64 `json:"on_p95_ms"`
	AddedP50 float64 `json:"added_p50_ms"`
	StartupS float64 `json:"startup_s"`
	RSSMB    float64 `json:"rss_mb"`
}

// words is the vocabulary of the seeded memories, drawn Zipf-like so that
// a few words are common and most are rare, as in chat.
var words = strings.Fields(`lisbon porto sister brother bike garden marathon training recipe pasta
coffee tea doctor appointment flight ticket hotel museum painting guitar lesson exam deadline project
report meeting budget invoice client server deploy database backup photo camera concert ticket dog
cat vet walk park beach summer winter holiday birthday gift cake party friend wedding move apartment
rent plant water book novel author chapter film series episode game score team coach match`)

// seed writes n memories into namespace "bench" of the embedded store in
// dir, with their token counts and 64-dimension vectors, as vera would
// have stored them.
func seed(ctx context.Context, dir string, n int) error {
	db, err := embedded.Open(ctx, dir)
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.VectorSpace(ctx, "nomic-embed-text", 64); err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(1, 2))
	zipf := rand.NewZipf(rng, 1.2, 1, uint64(len(words)-1))
	base := time.Now().Add(-time.Duration(n) * time.Minute)
	batch := make([]memory.Memory, 0, 1000)
	for i := range n {
		var u, a []string
		for range 12 {
			u = append(u, words[zipf.Uint64()])
			a = append(a, words[zipf.Uint64()])
		}
		text := memory.FormatExchange(strings.Join(u, " ")+"?", strings.Join(a, " ")+".")
		vec := make([]float32, 64)
		vec[rng.IntN(64)] = 1
		vec[rng.IntN(64)] += 0.5
		batch = append(batch, memory.Memory{ID: memory.NewID(), Namespace: "bench", Type: memory.Raw, Text: text,
			Time: base.Add(time.Duration(i) * time.Minute), Tokens: 40, Vector: vec})
		if len(batch) == cap(batch) || i == n-1 {
			if err := db.Upsert(ctx, batch...); err != nil {
				return err
			}
			batch = batch[:0]
		}
	}
	return nil
}

// measureMemory measures, at each store size, a stream:false chat with
// memory on against the same chat with memory off, interleaved.
func measureMemory(ctx context.Context, bin, work string, sz sizes, rs *Resources, log io.Writer) ([]MemoryRow, error) {
	fake, err := fakeChild(1, 0)
	if err != nil {
		return nil, err
	}
	defer fake.stop()
	up := fake.base
	var rows []MemoryRow
	for _, n := range sz.stores {
		dir := filepath.Join(work, fmt.Sprintf("memory-%d", n))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		fmt.Fprintf(log, "bench: seeding %d memories\n", n)
		if err := seed(ctx, dir, n); err != nil {
			return nil, err
		}
		v, err := startVera(bin, up, dir, "VERA_EMBEDDING_MODEL=nomic-embed-text")
		if err != nil {
			return nil, err
		}
		body := `{"model":"llama3.2","stream":false,"messages":[{"role":"user","content":"When is my sister's marathon training in lisbon?"}]}`
		paths := []path{{"off", v.base}, {"on", v.base}}
		do := func(p path) (time.Duration, error) {
			mem := "off"
			if p.name == "on" {
				mem = "on"
			}
			// Each chat its own conversation: the first turn's full recall.
			return call("POST", p.base+"/api/chat", body, "X-OpenWebUI-User-Id", "bench", "X-Vera-Memory", mem,
				"X-OpenWebUI-Chat-Id", fmt.Sprintf("bench-%d", rand.Int64()))
		}
		// Warm-up: the embedder probe, the model-info cache, the index.
		if _, _, err := interleave(paths, 4, 1, do); err != nil {
			v.stop()
			return nil, err
		}
		fmt.Fprintf(log, "bench: memory on the chat path, %d memories\n", n)
		got, _, err := interleave(paths, sz.chats, 1, do)
		row := MemoryRow{Memories: n, OffP50: ms(got["off"], 0.5), OnP50: ms(got["on"], 0.5), OnP95: ms(got["on"], 0.95),
			StartupS: v.startup.Seconds(), RSSMB: v.rssMB()}
		row.AddedP50 = row.OnP50 - row.OffP50
		v.stop()
		if err != nil {
			return nil, err
		}
		rows = append(rows, row)
	}
	return rows, nil
}
