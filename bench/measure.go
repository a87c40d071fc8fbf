package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"time"
)

// path is one way to Ollama: directly, through the bare proxy, through
// vera.
type path struct{ name, base string }

// interleave runs do n times per path at the given concurrency, the paths
// taking turns in every round so that the machine's noise falls on all of
// them alike. It returns each path's durations and the wall time.
func interleave(paths []path, n, conc int, do func(p path) (time.Duration, error)) (map[string][]time.Duration, time.Duration, error) {
	out := map[string][]time.Duration{}
	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	start := time.Now()
	per := max(n/conc, 1)
	for w := range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range per {
				for k := range paths {
					p := paths[(k+i+w)%len(paths)]
					d, err := do(p)
					mu.Lock()
					if err != nil && firstErr == nil {
						firstErr = fmt.Errorf("%s: %w", p.name, err)
					}
					if d >= 0 { // a negative duration: a failure do counted
						out[p.name] = append(out[p.name], d)
					}
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	return out, time.Since(start), firstErr
}

// ms is the q-th quantile of ds, in milliseconds.
func ms(ds []time.Duration, q float64) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := min(len(s)-1, int(q*float64(len(s))))
	return float64(s[i].Microseconds()) / 1000
}

var client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256, MaxConnsPerHost: 0, DisableCompression: true}}

// call sends one request and reads the whole answer.
func call(method, url, body string, header ...string) (time.Duration, error) {
	req, err := http.NewRequest(method, url, bytes.NewBufferString(body))
	if err != nil {
		return 0, err
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	start := time.Now()
	res, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	_, err = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	d := time.Since(start)
	if err == nil && res.StatusCode != http.StatusOK {
		err = fmt.Errorf("%s %s: %s", method, url, res.Status)
	}
	return d, err
}

// streamed is what one streamed chat showed its client.
type streamed struct {
	ttfb, last time.Duration
	lag        []time.Duration // per record: arrival minus the fake's send time
}

// stream sends a streamed chat and times every record.
func stream(url, body string, header ...string) (streamed, error) {
	var s streamed
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewBufferString(body))
	if err != nil {
		return s, err
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	start := time.Now()
	res, err := client.Do(req)
	if err != nil {
		return s, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return s, fmt.Errorf("%s", res.Status)
	}
	sc := bufio.NewScanner(res.Body)
	first := true
	for sc.Scan() {
		now := time.Now()
		if first {
			s.ttfb, first = now.Sub(start), false
		}
		var rec struct {
			Sent int64 `json:"sent"`
		}
		if json.Unmarshal(sc.Bytes(), &rec) == nil && rec.Sent > 0 {
			s.lag = append(s.lag, now.Sub(time.Unix(0, rec.Sent)))
		}
	}
	s.last = time.Since(start)
	return s, sc.Err()
}
