package proxy

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/vera-proxy/vera/memory"
	"github.com/vera-proxy/vera/memory/embedded"
)

// BenchmarkChatUsage is the chat path with memory on (the embedded store,
// memories recalled into every chat, the turn recorded), without and with
// the usage counts: counting must add nothing measurable, since a chat only
// adds to a map and the counts are written every 2 s in the background.
//
//	go test -run '^$' -bench ChatUsage -benchtime 400x -count 8 ./proxy/ | tee usage.txt
//	benchstat -col /usage usage.txt
func BenchmarkChatUsage(b *testing.B) {
	for _, mode := range []string{"off", "on"} {
		b.Run("usage="+mode, func(b *testing.B) {
			ctx := context.Background()
			up := newFakeOllama(&testing.T{})
			defer up.srv.Close()
			db, err := embedded.Open(ctx, b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			var ms []memory.Memory
			for i := range 200 {
				ms = append(ms, memory.Memory{ID: memory.NewID(), Namespace: memory.DefaultNamespace, Type: memory.Curated,
					Time: time.Now().Add(-time.Duration(i) * time.Minute), Text: fmt.Sprintf("User: my question %d is about topic %d\nAssistant: Noted.", i, i%7)})
			}
			if err := db.Upsert(ctx, ms...); err != nil {
				b.Fatal(err)
			}
			s := New(mustURLB(b, up.srv.URL), NewTransport(time.Minute), slog.New(slog.DiscardHandler))
			s.Memory = memory.NewBuilder(db, nil, nil)
			w := memory.NewWriter(db, db, nil, nil, nil)
			w.Start()
			defer w.Close()
			s.Recorder = w
			var usage *memory.Usage
			stop := make(chan struct{})
			var flushes sync.WaitGroup
			if mode == "on" {
				usage = memory.NewUsage(db)
				s.Usage = usage
				flushes.Go(func() {
					t := time.NewTicker(2 * time.Second)
					defer t.Stop()
					for {
						select {
						case <-stop:
							return
						case <-t.C:
							_ = usage.Flush(ctx)
						}
					}
				})
			}
			vera := httptest.NewServer(s.Handler())
			defer vera.Close()
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
			defer client.CloseIdleConnections()
			var done []time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				_, d := timeChat(b, client, vera.URL, i%200)
				done = append(done, d)
			}
			b.StopTimer()
			report(b, "done", done)
			close(stop)
			flushes.Wait()
			if usage != nil {
				if err := usage.Flush(ctx); err != nil {
					b.Fatal(err)
				}
				if n := len(usage.Of(ctx, ms[0].ID, ms[1].ID, ms[2].ID)); n == 0 {
					b.Fatal("no memory was counted: the chats recalled none")
				}
			}
		})
	}
}
