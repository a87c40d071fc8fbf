// Command bench measures vera side by side with Ollama reached directly
// and through a bare httputil.ReverseProxy, in one interleaved run, against
// a fake Ollama that answers at once. It prints a table and
// writes the figures as JSON.
//
//	go run ./bench [--quick | --large] [--json FILE]
//
// --quick runs every measurement at a tiny size (CI runs it, so the
// harness cannot rot); figures from it mean nothing. --large measures
// memory on the chat path at 1M memories (seeded into the data directory
// directly), with start-up and RSS, and nothing else.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"text/tabwriter"
	"time"
)

func main() {
	if runChild() {
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// sizes are how much each measurement does.
type sizes struct {
	requests int   // per path and route
	chunks   int   // records of the streamed chat
	streams  int   // streamed chats per path
	stores   []int // memories in the store, for the memory figures
	chats    int   // chats per store size
	large    bool  // the memory figures at 1M only
}

func sizesFor(quick, large bool) sizes {
	switch {
	case quick:
		return sizes{requests: 8, chunks: 10, streams: 2, stores: []int{100}, chats: 4}
	case large:
		return sizes{stores: []int{200_000, 1_000_000}, chats: 200, large: true}
	}
	return sizes{requests: 2000, chunks: 200, streams: 50, stores: []int{1000, 10000, 100000}, chats: 200}
}

// Results is the harness's JSON.
type Results struct {
	Machine   string        `json:"machine"`
	Quick     bool          `json:"quick"`
	Large     bool          `json:"large,omitempty"`
	Overhead  []OverheadRow `json:"overhead"`
	Streaming []StreamRow   `json:"streaming"`
	Memory    []MemoryRow   `json:"memory"`
	// EmbedP50MS is the fake's embedding round trip, which each chat with
	// memory on makes once: reported apart from vera's own work.
	EmbedP50MS float64         `json:"embed_p50_ms"`
	Resources  Resources       `json:"resources"`
	Quality    Quality         `json:"quality"`
	Write      Write           `json:"write"`
	Cache      Cache           `json:"prompt_cache"`
	Took       float64         `json:"took_s"`
	Notes      []string        `json:"notes,omitempty"`
	Extra      json.RawMessage `json:"extra,omitempty"`
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	quick := fs.Bool("quick", false, "tiny sizes, for CI")
	large := fs.Bool("large", false, "memory on the chat path at 200k and 1M memories, and nothing else")
	jsonOut := fs.String("json", "", "write the figures as JSON to this file")
	veraBin := fs.String("vera", "", "the vera binary (default: built from this checkout)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *quick && *large {
		return fmt.Errorf("--quick and --large: choose one")
	}
	start := time.Now()
	work, err := os.MkdirTemp("", "vera-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	bin := *veraBin
	if bin == "" {
		if bin, err = buildVera(work); err != nil {
			return err
		}
	}
	sz := sizesFor(*quick, *large)
	res := Results{Machine: fmt.Sprintf("%s/%s, %d CPUs", runtime.GOOS, runtime.GOARCH, runtime.NumCPU()), Quick: *quick, Large: *large}
	fmt.Fprintf(stderr, "bench: %s\n", res.Machine)

	if !sz.large {
		if res.Overhead, res.Streaming, res.Resources, err = measureProxy(ctx, bin, work, sz, stderr); err != nil {
			return err
		}
	}
	if res.Memory, res.EmbedP50MS, err = measureMemory(ctx, bin, work, sz, stderr); err != nil {
		return err
	}
	if sz.large {
		res.Took = time.Since(start).Seconds()
		return report(stdout, res, *jsonOut)
	}
	if res.Write, err = measureWrite(bin, work, sz, stderr); err != nil {
		return err
	}
	if res.Cache, err = measureCache(bin, work, stderr); err != nil {
		return err
	}
	if res.Quality, err = measureQuality(bin, *quick, stderr); err != nil {
		return err
	}
	res.Took = time.Since(start).Seconds()
	return report(stdout, res, *jsonOut)
}

// report prints the table, then the JSON (or writes it to jsonOut).
func report(stdout io.Writer, res Results, jsonOut string) error {
	printTable(stdout, res)
	b, _ := json.MarshalIndent(res, "", "  ")
	if jsonOut != "" {
		return os.WriteFile(jsonOut, append(b, '\n'), 0o644)
	}
	fmt.Fprintln(stdout)
	fmt.Fprintln(stdout, string(b))
	return nil
}

func printTable(w io.Writer, r Results) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "PROXY OVERHEAD\troute\tconc\tdirect p50/p99 ms\tbare proxy p50/p99\tvera p50/p99\tvera added / bare added (p50)\tvera rps\n")
	for _, o := range r.Overhead {
		fmt.Fprintf(tw, "\t%s\t%d\t%.3f / %.3f\t%.3f / %.3f\t%.3f / %.3f\t%.3f / %.3f ms\t%.0f\n", o.Route, o.Concurrency,
			o.Direct.P50, o.Direct.P99, o.Bare.P50, o.Bare.P99, o.Vera.P50, o.Vera.P99, o.VeraAddedP50, o.BareAddedP50, o.VeraRPS)
	}
	fmt.Fprintf(tw, "STREAMING\tpath\tttfb p50 ms\tper-record lag p50/p99 ms\tto last record p50 ms\tstreams cut\n")
	for _, s := range r.Streaming {
		fmt.Fprintf(tw, "\t%s\t%.3f\t%.3f / %.3f\t%.3f\t%d\n", s.Path, s.TTFBP50, s.LagP50, s.LagP99, s.LastP50, s.Cut)
	}
	fmt.Fprintf(tw, "MEMORY ON THE CHAT PATH\tbackend, memories, route\toff p50 ms\ton p50 (p95) ms\tadded p50 ms\tless embedding (%.3f ms)\trecall alone (temporary chat)\tlistening / memory s (rebuilt: s)\tRSS MiB (raw data MiB)\n", r.EmbedP50MS)
	for _, m := range r.Memory {
		fmt.Fprintf(tw, "\t%s, %d, %s\t%.3f\t%.3f (%.3f)\t%.3f\t%.3f\t%.3f\t%.2f / %.2f (%.2f / %.2f)\t%.0f (%.0f)\n", m.Backend, m.Memories, m.Dialect, m.OffP50, m.OnP50, m.OnP95, m.AddedP50, m.OwnP50, m.RecallP50,
			m.StartupS, m.ReadyS, m.RebuildStartupS, m.RebuildReadyS, m.RSSMB, m.RawMB)
	}
	if r.Large {
		tw.Flush()
		fmt.Fprintf(w, "took %.0f s\n", r.Took)
		return
	}
	fmt.Fprintf(tw, "RESOURCES\tRSS idle %.0f MiB\tRSS under %d streams %.0f MiB\tstart-up %.2f s\n", r.Resources.IdleRSSMB, r.Resources.Streams, r.Resources.StreamsRSSMB, r.Resources.StartupS)
	for _, row := range r.Write.Rows {
		fmt.Fprintf(tw, "WRITE PATH\tconcurrency %d\t%.0f turns/s\n", row.Concurrency, row.TurnsPerSec)
	}
	fmt.Fprintf(tw, "\tdone to searchable\tp50 %.2f ms\tmax %.2f ms (%d probes)\n", r.Write.SearchableP50MS, r.Write.SearchableMaxMS, r.Write.SearchableProbes)
	fmt.Fprintf(tw, "PROMPT CACHE\t10-turn chat\tshare repeated, vera: %s\tmean %.3f\tdirect: all %.0f\n", fmtShares(r.Cache.Vera), r.Cache.VeraMean, minShare(r.Cache.Direct))
	for _, l := range r.Quality.Locomo {
		var q struct {
			Budget         int     `json:"budget"`
			EvidenceRecall float64 `json:"evidence_recall"`
			TokensMean     float64 `json:"tokens_mean"`
			P50MS          float64 `json:"p50_ms"`
		}
		json.Unmarshal(l, &q)
		fmt.Fprintf(tw, "LOCOMO (lexical%s)\tbudget %d\trecall %.3f\ttokens %.0f\tp50 %.2f ms\n", cvNote(l), q.Budget, q.EvidenceRecall, q.TokensMean, q.P50MS)
	}
	var rt struct {
		Accuracy float64 `json:"accuracy"`
	}
	json.Unmarshal(r.Quality.Routing, &rt)
	fmt.Fprintf(tw, "ROUTING (no embedding model%s)\taccuracy %.3f\n", cvNote(r.Quality.Routing), rt.Accuracy)
	tw.Flush()
	fmt.Fprintf(w, "took %.0f s\n", r.Took)
}

// cvNote says ", cross-validated" of an evaluation's JSON that was.
func cvNote(raw json.RawMessage) string {
	var v struct {
		Method string `json:"method"`
	}
	if json.Unmarshal(raw, &v) == nil && v.Method != "" {
		return ", cross-validated"
	}
	return ""
}

func fmtShares(xs []float64) string {
	var out []string
	for _, x := range xs {
		out = append(out, fmt.Sprintf("%.2f", x))
	}
	return strings.Join(out, " ")
}

func minShare(xs []float64) float64 {
	m := 1.0
	for _, x := range xs {
		m = min(m, x)
	}
	return m
}
