package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/vera-proxy/vera/memory"
	"github.com/vera-proxy/vera/memory/embedded"
	"github.com/vera-proxy/vera/memory/qdrant"
	"github.com/vera-proxy/vera/text"
)

// MemoryRow is the chat path with memory on, minus the same chat with
// memory off, at one store size (embedded backend; the fake's embedding
// answers at once, and its time is not vera's).
type MemoryRow struct {
	// Backend is "embedded", "qdrant" (a real server,
	// VERA_TEST_QDRANT_URL) or "qdrant stand-in" (the in-process test
	// server: an exact scan, not Qdrant's speed).
	Backend  string `json:"backend"`
	Memories int    `json:"memories"`
	// Dialect is the route the chats went to.
	Dialect  string  `json:"dialect"`
	OffP50   float64 `json:"off_p50_ms"`
	OnP50    float64 `json:"on_p50_ms"`
	OnP95    float64 `json:"on_p95_ms"`
	AddedP50 float64 `json:"added_p50_ms"`
	// OwnP50 is AddedP50 less the embedding's round trip (EmbedP50MS in
	// the results): vera's own memory work, the turn's durable commit
	// included (the end of the answer waits for it).
	OwnP50 float64 `json:"own_p50_ms"`
	// RecallP50 is the same for chats with memory in a temporary chat
	// (Open WebUI's "local:" ids), whose turns are not stored: the recall
	// alone, without the commit's fsync, which depends on the disk.
	RecallP50 float64 `json:"recall_p50_ms"`
	// StartupS is the time from exec until vera accepts connections,
	// ReadyS until its chats get memory (the store's index loaded from
	// its snapshot); RebuildStartupS and RebuildReadyS are the same on a
	// first start after an upgrade (no snapshot: the index rebuilt from
	// the file). Embedded store only.
	StartupS        float64 `json:"startup_s"`
	ReadyS          float64 `json:"ready_s"`
	RebuildStartupS float64 `json:"rebuild_startup_s,omitempty"`
	RebuildReadyS   float64 `json:"rebuild_ready_s,omitempty"`
	RSSMB           float64 `json:"rss_mb"`
	// RawMB is the raw size of what the store holds: the texts' bytes
	// and the vectors' float32s.
	RawMB float64 `json:"raw_mb"`
}

// dialects are the five routes memory works on, each asking the same first
// question (%s) in its own shape.
var dialects = []struct{ route, body string }{
	{"/api/chat", `{"model":"llama3.2","stream":false,"messages":[{"role":"user","content":"%s"}]}`},
	{"/api/generate", `{"model":"llama3.2","stream":false,"prompt":"%s"}`},
	{"/v1/chat/completions", `{"model":"llama3.2","messages":[{"role":"user","content":"%s"}]}`},
	{"/v1/responses", `{"model":"llama3.2","input":"%s"}`},
	{"/v1/messages", `{"model":"llama3.2","max_tokens":64,"messages":[{"role":"user","content":"%s"}]}`},
}

// commonWords labels the row whose question is made of the store's most
// common words only: the lexical index's worst case.
const commonWords = "/api/chat, common words only"

// unknownWords labels the row whose question has no word of the seeded
// memories (only the turns the harness stores as it asks hold them, a
// few hundred): its lexical side has next to nothing to rank, so the row
// is what every other part of memory costs (the embedding, the vector
// side, reading and packing the hits, the commit). The vector side still
// recalls memories for it.
const unknownWords = "/api/chat, no word the store holds"

// unknownQuestion is that question: the seeded words are all "w" and
// hexadecimal digits.
const unknownQuestion = "what about zebras, quartz, nimbus and ferrules?"

// vocab is the vocabulary of the seeded memories: 20,000 made-up words
// drawn Zipf-like (s = 1.1), as in the in-process benchmarks
// (storetest.TextCorpus), so that a few words are in most memories and
// most words in few, as in chat.
var vocab = func() []string {
	v := make([]string, 20000)
	for i := range v {
		v[i] = fmt.Sprintf("w%x", i*2654435761%1000003)
	}
	return v
}()

// seeded is what seeding wrote: its raw size (texts and vectors), a
// question about one of the memories, and a question of the four most
// common words.
type seeded struct {
	raw              int64
	question, common string
}

// seed writes n memories into namespace "bench" of the embedded store in
// dir, with their token counts and 64-dimension vectors, as vera would
// have stored them.
func seed(ctx context.Context, dir string, n int) (seeded, error) {
	db, err := embedded.Open(ctx, dir)
	if err != nil {
		return seeded{}, err
	}
	return fill(ctx, db, n)
}

// seedQdrant does what seed does, into a Qdrant collection.
func seedQdrant(ctx context.Context, url, collection string, n int) (seeded, error) {
	q, err := qdrant.Open(ctx, qdrant.Options{URL: url, Collection: collection})
	if err != nil {
		return seeded{}, err
	}
	return fill(ctx, q, n)
}

// fill seeds an open store of either backend, and closes it.
func fill(ctx context.Context, s interface {
	VectorSpace(ctx context.Context, model string, dim int) (bool, error)
	Upsert(ctx context.Context, ms ...memory.Memory) error
	Close() error
}, n int) (seeded, error) {
	defer s.Close()
	if _, err := s.VectorSpace(ctx, "nomic-embed-text", 64); err != nil {
		return seeded{}, err
	}
	return generate(n, func(ms []memory.Memory) error { return s.Upsert(ctx, ms...) })
}

// generate makes n memories of namespace "bench", a batch at a time:
// a user message of 12 to 31 words and an answer of 20 to 79.
func generate(n int, write func([]memory.Memory) error) (seeded, error) {
	out := seeded{common: strings.Join(vocab[:4], " ") + "?"}
	// The token counts vera would have stored: the builder trusts them,
	// and a made-up one lets it pack more than the window takes.
	count, err := exchangeTokens()
	if err != nil {
		return seeded{}, err
	}
	rng := rand.New(rand.NewPCG(1, 2))
	zipf := rand.NewZipf(rand.New(rand.NewPCG(3, 5)), 1.1, 1, uint64(len(vocab)-1))
	sentence := func(words int) []int {
		s := make([]int, words)
		for i := range s {
			s[i] = int(zipf.Uint64())
		}
		return s
	}
	base := time.Now().Add(-time.Duration(n) * time.Minute)
	batch := make([]memory.Memory, 0, 1000)
	for i := range n {
		u, a := sentence(12+rng.IntN(20)), sentence(20+rng.IntN(60))
		if i == n/2 {
			out.question = strings.Join([]string{"what", "about", vocab[u[1]], vocab[u[3]], vocab[u[5]], "and", vocab[a[len(a)-2]]}, " ") + "?"
		}
		text, tokens := count(u, a)
		vec := make([]float32, 64)
		vec[rng.IntN(64)] = 1
		vec[rng.IntN(64)] += 0.5
		batch = append(batch, memory.Memory{ID: memory.NewID(), Namespace: "bench", Type: memory.Raw, Text: text,
			Time: base.Add(time.Duration(i) * time.Minute), Tokens: tokens, Vector: vec})
		out.raw += int64(len(text) + 4*len(vec))
		if len(batch) == cap(batch) || i == n-1 {
			if err := write(batch); err != nil {
				return seeded{}, err
			}
			batch = batch[:0]
		}
	}
	return out, nil
}

// exchangeTokens returns what makes a turn of the words u and a of vocab
// ("User: u?\nAssistant: a."), and its token count. The count is the
// tokenizer's without tokenizing each turn (a million of them would take
// minutes): every word, after its space, is a piece of its own, so a
// turn's count is the framing's and its words'.
func exchangeTokens() (func(u, a []int) (string, int), error) {
	tok, err := text.NewTokenizer()
	if err != nil {
		return nil, err
	}
	words := make([]int, len(vocab))
	for i, w := range vocab {
		words[i] = tok.Count(" " + w)
	}
	fixed := tok.Count(memory.FormatExchange("w?", "w.")) - 2*tok.Count(" w")
	join := func(ws []int) string {
		s := make([]string, len(ws))
		for i, w := range ws {
			s[i] = vocab[w]
		}
		return strings.Join(s, " ")
	}
	return func(u, a []int) (string, int) {
		n := fixed
		for _, w := range u {
			n += words[w]
		}
		for _, w := range a {
			n += words[w]
		}
		return memory.FormatExchange(join(u)+"?", join(a)+"."), n
	}, nil
}

// measureMemory measures, at each store size, a stream:false chat with
// memory on against the same chat with memory off, interleaved.
func measureMemory(ctx context.Context, bin, work string, sz sizes, log io.Writer) ([]MemoryRow, float64, error) {
	rows, embed, err := measureMemoryOn(ctx, bin, work, sz.stores, sz.chats, "embedded", "", log)
	if err != nil || sz.large {
		return rows, embed, err
	}
	// Qdrant: a real one when VERA_TEST_QDRANT_URL names it, else the
	// stand-in in a process of its own (an exact scan: labelled so, its
	// times are not Qdrant's). The stand-in stops at 10k memories.
	url, backend := os.Getenv("VERA_TEST_QDRANT_URL"), "qdrant"
	stores := sz.stores
	if url == "" {
		q, err := startChild("qdrant")
		if err != nil {
			return nil, 0, err
		}
		defer q.stop()
		url, backend = q.base, "qdrant stand-in"
		stores = slices.DeleteFunc(slices.Clone(stores), func(n int) bool { return n > 10000 })
	}
	more, _, err := measureMemoryOn(ctx, bin, work, stores, sz.chats, backend, url, log)
	return append(rows, more...), embed, err
}

// measureMemoryOn measures the memory figures on one backend: the
// embedded store, or the Qdrant at qdrantURL.
func measureMemoryOn(ctx context.Context, bin, work string, stores []int, chats int, backend, qdrantURL string, log io.Writer) ([]MemoryRow, float64, error) {
	fake, err := fakeChild(1, 0)
	if err != nil {
		return nil, 0, err
	}
	defer fake.stop()
	up := fake.base
	embed, err := embedRoundTrip(up, max(chats, 20))
	if err != nil {
		return nil, 0, err
	}
	var rows []MemoryRow
	for _, n := range stores {
		dir := filepath.Join(work, fmt.Sprintf("memory-%s-%d", strings.ReplaceAll(backend, " ", "-"), n))
		fmt.Fprintf(log, "bench: seeding %d memories (%s)\n", n, backend)
		sd, env, err := seedStore(ctx, dir, n, qdrantURL)
		if err != nil {
			return nil, 0, err
		}
		var rebuilt [2]time.Duration
		if qdrantURL == "" {
			// A first start after an upgrade: no snapshot of the index.
			if err := os.Remove(filepath.Join(dir, embedded.SnapshotName)); err != nil && !os.IsNotExist(err) {
				return nil, 0, err
			}
			if rebuilt, err = startAndLoad(bin, up, dir, env); err != nil {
				return nil, 0, err
			}
		}
		v, err := startVera(bin, up, dir, env...)
		if err != nil {
			return nil, 0, err
		}
		readyIn, err := v.ready()
		if err != nil {
			v.stop()
			return nil, 0, err
		}
		routes := memoryRoutes(sd, qdrantURL != "")
		for _, dl := range routes {
			fmt.Fprintf(log, "bench: memory on the chat path, %d memories (%s), %s\n", n, backend, dl.name)
			row, err := measureRoute(v, dl, chats)
			if err != nil {
				v.stop()
				return nil, 0, err
			}
			row.Backend, row.Memories = backend, n
			row.StartupS, row.ReadyS, row.RawMB = v.startup.Seconds(), readyIn.Seconds(), float64(sd.raw)/(1<<20)
			row.RebuildStartupS, row.RebuildReadyS = rebuilt[0].Seconds(), rebuilt[1].Seconds()
			row.OwnP50 = row.AddedP50 - embed
			row.RecallP50 -= embed
			rows = append(rows, row)
		}
		rss := v.rssMB()
		for i := len(rows) - len(routes); i < len(rows); i++ {
			rows[i].RSSMB = rss
		}
		v.stop()
	}
	return rows, embed, nil
}

// memoryRoute is one request the memory benchmark times.
type memoryRoute struct{ name, path, body string }

// memoryRoutes are the requests timed on a store seeded as sd: every
// dialect on the embedded store, and the worst cases of the lexical index;
// /api/chat alone on Qdrant.
func memoryRoutes(sd seeded, qdrant bool) []memoryRoute {
	var routes []memoryRoute
	for _, dl := range dialects {
		routes = append(routes, memoryRoute{dl.route, dl.route, fmt.Sprintf(dl.body, sd.question)})
	}
	routes = append(routes, memoryRoute{commonWords, dialects[0].route, fmt.Sprintf(dialects[0].body, sd.common)},
		memoryRoute{unknownWords, dialects[0].route, fmt.Sprintf(dialects[0].body, unknownQuestion)})
	if qdrant {
		routes = routes[:1]
	}
	return routes
}

// measureRoute times chats of dl on v with memory off, on, and in a
// temporary chat, interleaved, after a warm-up. The row holds the route's
// latencies; RecallP50 still includes the embedding's round trip.
func measureRoute(v *veraProc, dl memoryRoute, chats int) (MemoryRow, error) {
	paths := []path{{"off", v.base}, {"on", v.base}, {"temporary", v.base}}
	do := func(p path) (time.Duration, error) {
		// Each chat its own conversation: the first turn's full
		// recall. A temporary chat has memory, and is not stored.
		mem, chat := p.name, fmt.Sprintf("bench-%d", rand.Int64())
		if p.name == "temporary" {
			mem, chat = "on", "local:"+chat
		}
		return call("POST", p.base+dl.path, dl.body, "X-OpenWebUI-User-Id", "bench", "X-Vera-Memory", mem,
			"X-OpenWebUI-Chat-Id", chat)
	}
	// Warm-up: the embedder probe, the model-info cache, the index.
	if _, _, err := interleave(paths, 4, 1, do); err != nil {
		return MemoryRow{}, fmt.Errorf("%s: %w", dl.name, err)
	}
	if err := injects(v.base+dl.path, dl.body); err != nil {
		return MemoryRow{}, err
	}
	got, _, err := interleave(paths, chats, 1, do)
	if err != nil {
		return MemoryRow{}, fmt.Errorf("%s: %w", dl.name, err)
	}
	row := MemoryRow{Dialect: dl.name, OffP50: ms(got["off"], 0.5), OnP50: ms(got["on"], 0.5), OnP95: ms(got["on"], 0.95)}
	row.AddedP50 = row.OnP50 - row.OffP50
	row.RecallP50 = ms(got["temporary"], 0.5) - row.OffP50
	return row, nil
}

// startAndLoad starts vera on dir, waits until its chats get memory, and
// stops it (which keeps the index's snapshot), returning the times until
// it listened and until it was ready.
func startAndLoad(bin, up, dir string, env []string) ([2]time.Duration, error) {
	v, err := startVera(bin, up, dir, env...)
	if err != nil {
		return [2]time.Duration{}, err
	}
	defer v.stop()
	ready, err := v.ready()
	return [2]time.Duration{v.startup, ready}, err
}

// embedRoundTrip is the p50, in ms, of the fake's embedding round trip,
// measured apart: the fake answers it in constant time, and a chat with
// memory on makes one.
func embedRoundTrip(up string, n int) (float64, error) {
	var trips []time.Duration
	for range n {
		d, err := call("POST", up+"/api/embed", `{"model":"nomic-embed-text","input":["What did we say about the trip?"]}`)
		if err != nil {
			return 0, fmt.Errorf("embedding: %w", err)
		}
		trips = append(trips, d)
	}
	return ms(trips, 0.5), nil
}

// seedStore seeds n memories into the embedded store in dir, or into a new
// collection of the Qdrant at qdrantURL, and returns vera's environment
// for that store.
func seedStore(ctx context.Context, dir string, n int, qdrantURL string) (seeded, []string, error) {
	env := []string{"VERA_EMBEDDING_MODEL=nomic-embed-text"}
	if qdrantURL == "" {
		sd, err := seed(ctx, dir, n)
		return sd, env, err
	}
	collection := fmt.Sprintf("bench_%d_%d", n, time.Now().UnixNano())
	sd, err := seedQdrant(ctx, qdrantURL, collection, n)
	return sd, append(env, "VERA_QDRANT_URL="+qdrantURL, "VERA_QDRANT_COLLECTION="+collection), err
}

// injects checks that a chat with memory on through url was given
// memories, so that no figure measures a path that skipped recall.
func injects(url, body string) error {
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("X-OpenWebUI-User-Id", "bench")
	req.Header.Set("X-OpenWebUI-Chat-Id", fmt.Sprintf("bench-%d", rand.Int64()))
	res, err := client.Do(req)
	if err != nil {
		return err
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	got := res.Header.Get("X-Vera-Context")
	if res.StatusCode != http.StatusOK || !strings.Contains(got, "semantic=") || strings.Contains(got, "semantic=0;") {
		return fmt.Errorf("%s: memory was not injected (status %d, X-Vera-Context %q)", url, res.StatusCode, got)
	}
	return nil
}
