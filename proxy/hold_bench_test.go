package proxy

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vera-proxy/vera/memory"
	"github.com/vera-proxy/vera/memory/embedded"
)

// BenchmarkHeldEnd measures what holding the end of an answer until its
// turn is committed costs: the time from sending a streamed chat
// to reading its done:true record, with the real writer committing to the
// embedded store's queue (fsync'd, grouped), against the same chat with
// nothing recorded. It also times the first record, which must not move.
//
//	go test -run '^$' -bench HeldEnd -benchtime 400x -count 5 ./proxy/ | tee held.txt
//	benchstat held.txt
func BenchmarkHeldEnd(b *testing.B) {
	for _, conc := range []int{1, 16} {
		for _, mode := range []string{"none", "held"} {
			b.Run(fmt.Sprintf("c%d/%s", conc, mode), func(b *testing.B) {
				up := newFakeOllama(&testing.T{})
				defer up.srv.Close()
				s := New(mustURLB(b, up.srv.URL), NewTransport(time.Minute), slog.New(slog.DiscardHandler))
				if mode == "held" {
					db, err := embedded.Open(context.Background(), b.TempDir())
					if err != nil {
						b.Fatal(err)
					}
					defer db.Close()
					w := memory.NewWriter(db, db, nil, nil, nil)
					w.Start()
					defer w.Close()
					s.Recorder = w
				}
				vera := httptest.NewServer(s.Handler())
				defer vera.Close()
				client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conc}}
				defer client.CloseIdleConnections()

				var mu sync.Mutex
				var first, end []time.Duration
				work := make(chan int)
				var wg sync.WaitGroup
				for range conc {
					wg.Go(func() {
						for i := range work {
							f, e := timeChat(b, client, vera.URL, i)
							mu.Lock()
							first, end = append(first, f), append(end, e)
							mu.Unlock()
						}
					})
				}
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					work <- i
				}
				close(work)
				wg.Wait()
				report(b, "first", first)
				report(b, "done", end)
			})
		}
	}
}

// timeChat sends one streamed chat and returns when its first and its last
// (done:true) records arrived.
func timeChat(b *testing.B, client *http.Client, base string, i int) (first, done time.Duration) {
	start := time.Now()
	body := fmt.Sprintf(`{"model":"llama3.2","messages":[{"role":"user","content":"question %d"}]}`, i)
	res, err := client.Post(base+"/api/chat", "application/json", strings.NewReader(body))
	if err != nil {
		b.Error(err)
		return
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		if first == 0 {
			first = time.Since(start)
		}
		if strings.Contains(sc.Text(), `"done":true`) {
			done = time.Since(start)
		}
	}
	if done == 0 {
		b.Error("no done record")
	}
	return first, done
}

func report(b *testing.B, name string, d []time.Duration) {
	slices.Sort(d)
	us := func(q int) float64 { return float64(d[min(len(d)-1, len(d)*q/100)].Microseconds()) }
	b.ReportMetric(us(50), name+"-p50-us")
	b.ReportMetric(us(99), name+"-p99-us")
}

func mustURLB(b *testing.B, s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		b.Fatal(err)
	}
	return u
}
