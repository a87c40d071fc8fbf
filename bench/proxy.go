package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"sync"
	"time"
)

// Latency is a distribution's p50 and p99, in ms.
type Latency struct {
	P50 float64 `json:"p50_ms"`
	P99 float64 `json:"p99_ms"`
}

func latency(ds []time.Duration) Latency { return Latency{ms(ds, 0.50), ms(ds, 0.99)} }

// OverheadRow is one route at one concurrency, on the three paths.
type OverheadRow struct {
	Route        string  `json:"route"`
	Concurrency  int     `json:"concurrency"`
	Direct       Latency `json:"direct"`
	Bare         Latency `json:"bare_proxy"`
	Vera         Latency `json:"vera"`
	VeraAddedP50 float64 `json:"vera_added_p50_ms"`
	BareAddedP50 float64 `json:"bare_added_p50_ms"`
	VeraRPS      float64 `json:"vera_rps"`
	// BareFailures counts the bare proxy's failed requests (Go's
	// ReverseProxy is known to cut some, golang/go#40747).
	BareFailures int `json:"bare_failures,omitempty"`
}

// StreamRow is one path's streamed chat.
type StreamRow struct {
	Path    string  `json:"path"`
	TTFBP50 float64 `json:"ttfb_p50_ms"`
	LagP50  float64 `json:"lag_p50_ms"`
	LagP99  float64 `json:"lag_p99_ms"`
	LastP50 float64 `json:"last_p50_ms"`
	// Cut counts streams that ended in an error; only the bare proxy's
	// are tolerated (golang/go#40747), any other fails the run.
	Cut int `json:"cut"`
}

// Resources are vera's footprint.
type Resources struct {
	IdleRSSMB    float64 `json:"idle_rss_mb"`
	Streams      int     `json:"streams"`
	StreamsRSSMB float64 `json:"streams_rss_mb"`
	StartupS     float64 `json:"startup_s"`
}

// measureProxy measures overhead and streaming with memory off, on the
// three paths interleaved.
func measureProxy(ctx context.Context, bin, work string, sz sizes, log io.Writer) ([]OverheadRow, []StreamRow, Resources, error) {
	var rs Resources
	fake, err := fakeChild(sz.chunks, time.Millisecond)
	if err != nil {
		return nil, nil, rs, err
	}
	defer fake.stop()
	up := fake.base
	bareProc, err := bareChild(up)
	if err != nil {
		return nil, nil, rs, err
	}
	defer bareProc.stop()
	bare := bareProc.base
	dir := filepath.Join(work, "proxy")
	v, err := startVera(bin, up, dir)
	if err != nil {
		return nil, nil, rs, err
	}
	defer v.stop()
	rs.StartupS = v.startup.Seconds()
	time.Sleep(200 * time.Millisecond) // let start-up work settle before the idle figure
	rs.IdleRSSMB = v.rssMB()
	paths := []path{{"direct", up}, {"bare", bare}, {"vera", v.base}}
	rows, err := measureOverhead(paths, sz, log)
	if err != nil {
		return nil, nil, rs, err
	}
	streams, err := measureStreams(paths, sz, log)
	if err != nil {
		return nil, nil, rs, err
	}
	rs.Streams = 32
	if rs.StreamsRSSMB, err = streamsRSS(bin, work, sz, rs.Streams); err != nil {
		return nil, nil, rs, err
	}
	return rows, streams, rs, nil
}

// streamBody is the chat the streaming figures ask for.
const streamBody = `{"model":"llama3.2","messages":[{"role":"user","content":"Tell me a story."}]}`

// measureOverhead is the latency each path adds on Ollama's plain routes
// and a chat without memory, at concurrency 1 and 32, and vera's
// throughput at 32.
func measureOverhead(paths []path, sz sizes, log io.Writer) ([]OverheadRow, error) {
	chat := `{"model":"llama3.2","stream":false,"messages":[{"role":"user","content":"How are you?"}]}`
	routes := []struct {
		name, method, path, body string
	}{
		{"/api/tags", http.MethodGet, "/api/tags", ""},
		{"/api/show", http.MethodPost, "/api/show", `{"model":"llama3.2"}`},
		{"/api/chat stream:false, memory off", http.MethodPost, "/api/chat", chat},
	}
	var rows []OverheadRow
	for _, rt := range routes {
		for _, conc := range []int{1, 32} {
			fmt.Fprintf(log, "bench: overhead %s at %d\n", rt.name, conc)
			var mu sync.Mutex
			bareFailures := 0
			got, _, err := interleave(paths, sz.requests, conc, func(p path) (time.Duration, error) {
				d, err := call(rt.method, p.base+rt.path, rt.body, "X-Vera-Memory", "off")
				if err != nil && p.name == "bare" {
					mu.Lock()
					bareFailures++
					mu.Unlock()
					return -1, nil
				}
				return d, err
			})
			if err != nil {
				return nil, err
			}
			row := OverheadRow{Route: rt.name, Concurrency: conc, Direct: latency(got["direct"]), Bare: latency(got["bare"]), Vera: latency(got["vera"]), BareFailures: bareFailures}
			row.VeraAddedP50, row.BareAddedP50 = row.Vera.P50-row.Direct.P50, row.Bare.P50-row.Direct.P50
			// Throughput: vera alone, at 32.
			if conc == 32 {
				_, wall, err := interleave(paths[2:], sz.requests, conc, func(p path) (time.Duration, error) {
					return call(rt.method, p.base+rt.path, rt.body, "X-Vera-Memory", "off")
				})
				if err != nil {
					return nil, err
				}
				row.VeraRPS = float64(max(sz.requests/conc, 1)*conc) / wall.Seconds()
			}
			rows = append(rows, row)
		}
	}
	return rows, nil
}

// measureStreams is each path's time to first byte, lag between records
// and time to the last record of a streamed chat.
func measureStreams(paths []path, sz sizes, log io.Writer) ([]StreamRow, error) {
	fmt.Fprintf(log, "bench: streaming, %d records\n", sz.chunks)
	type streamStats struct {
		ttfb, last, lag []time.Duration
		cut             int
	}
	stats := map[string]*streamStats{}
	for _, p := range paths {
		stats[p.name] = &streamStats{}
	}
	var mu sync.Mutex
	_, _, err := interleave(paths, sz.streams, 1, func(p path) (time.Duration, error) {
		s, err := stream(p.base+"/api/chat", streamBody, "X-Vera-Memory", "off")
		mu.Lock()
		defer mu.Unlock()
		st := stats[p.name]
		if err != nil {
			st.cut++
			if p.name == "bare" {
				return -1, nil
			}
			return -1, err
		}
		st.ttfb, st.last, st.lag = append(st.ttfb, s.ttfb), append(st.last, s.last), append(st.lag, s.lag...)
		return s.last, nil
	})
	if err != nil {
		return nil, err
	}
	var streams []StreamRow
	for _, p := range paths {
		st := stats[p.name]
		streams = append(streams, StreamRow{Path: p.name, TTFBP50: ms(st.ttfb, 0.5), LagP50: ms(st.lag, 0.5), LagP99: ms(st.lag, 0.99), LastP50: ms(st.last, 0.5), Cut: st.cut})
	}
	return streams, nil
}

// streamsRSS is vera's peak RSS, in MB, under n concurrent slow streams.
func streamsRSS(bin, work string, sz sizes, n int) (float64, error) {
	slow, err := fakeChild(max(sz.chunks, 50), 5*time.Millisecond)
	if err != nil {
		return 0, err
	}
	defer slow.stop()
	v, err := startVera(bin, slow.base, filepath.Join(work, "streams"))
	if err != nil {
		return 0, err
	}
	defer v.stop()
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() { defer wg.Done(); stream(v.base+"/api/chat", streamBody, "X-Vera-Memory", "off") }()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	peak := 0.0
	for {
		select {
		case <-done:
			return peak, nil
		case <-time.After(20 * time.Millisecond):
			peak = max(peak, v.rssMB())
		}
	}
}
