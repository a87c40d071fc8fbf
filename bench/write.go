package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// WriteRow is the write path at one concurrency: chats with memory on,
// each a turn committed to the durable queue before its answer ends.
type WriteRow struct {
	Concurrency int     `json:"concurrency"`
	TurnsPerSec float64 `json:"turns_per_s"`
}

// Write is the write path: turns per second, and the time from an
// answer's end (its turn in the durable queue) to the turn being found by
// a search.
type Write struct {
	Rows             []WriteRow `json:"rows"`
	SearchableP50MS  float64    `json:"searchable_p50_ms"`
	SearchableMaxMS  float64    `json:"searchable_max_ms"`
	SearchableProbes int        `json:"searchable_probes"`
}

func measureWrite(bin, work string, sz sizes, log io.Writer) (Write, error) {
	var w Write
	fake, err := fakeChild(1, 0)
	if err != nil {
		return w, err
	}
	defer fake.stop()
	dir := filepath.Join(work, "write")
	v, err := startVera(bin, fake.base, dir)
	if err != nil {
		return w, err
	}
	defer v.stop()
	var seq atomic.Int64
	chat := func() error {
		n := seq.Add(1)
		body := fmt.Sprintf(`{"model":"llama3.2","stream":false,"messages":[{"role":"user","content":"note %d: the parcel %d goes to locker %d"}]}`, n, n, n)
		_, err := call("POST", v.base+"/api/chat", body, "X-OpenWebUI-User-Id", "write", "X-OpenWebUI-Chat-Id", fmt.Sprintf("w-%d", n))
		return err
	}
	for _, conc := range []int{1, 8, 32} {
		fmt.Fprintf(log, "bench: write path at %d\n", conc)
		total := max(sz.requests/4, conc)
		var wg sync.WaitGroup
		var firstErr atomic.Value
		start := time.Now()
		for range conc {
			wg.Go(func() {
				for range total / conc {
					if err := chat(); err != nil {
						firstErr.CompareAndSwap(nil, err)
					}
				}
			})
		}
		wg.Wait()
		if err, _ := firstErr.Load().(error); err != nil {
			return w, err
		}
		w.Rows = append(w.Rows, WriteRow{Concurrency: conc, TurnsPerSec: float64(total/conc*conc) / time.Since(start).Seconds()})
	}
	// From done:true to searchable: a turn with a word of its own, then a
	// search for that word until it is found.
	var lat []time.Duration
	for i := range max(sz.streams/2, 3) {
		word := fmt.Sprintf("zq%dx%d", time.Now().UnixNano()%1e9, i)
		body := fmt.Sprintf(`{"model":"llama3.2","stream":false,"messages":[{"role":"user","content":"remember the word %s please"}]}`, word)
		if _, err := call("POST", v.base+"/api/chat", body, "X-OpenWebUI-User-Id", "write", "X-OpenWebUI-Chat-Id", "probe-"+word); err != nil {
			return w, err
		}
		done := time.Now()
		for {
			if found(v.base, word) {
				lat = append(lat, time.Since(done))
				break
			}
			if time.Since(done) > 10*time.Second {
				return w, fmt.Errorf("turn %q not searchable after 10 s", word)
			}
			time.Sleep(200 * time.Microsecond)
		}
	}
	w.SearchableProbes, w.SearchableP50MS, w.SearchableMaxMS = len(lat), ms(lat, 0.5), ms(lat, 1)
	return w, nil
}

// found reports whether a search of namespace "write" finds word.
func found(base, word string) bool {
	res, err := client.Get(base + "/memories?" + url.Values{"namespace": {"write"}, "q": {word}, "limit": {"5"}}.Encode())
	if err != nil {
		return false
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return false
	}
	var page struct {
		Memories []struct{ Text string } `json:"memories"`
	}
	json.NewDecoder(res.Body).Decode(&page)
	for _, m := range page.Memories {
		if strings.Contains(m.Text, word) {
			return true
		}
	}
	return false
}
