package proxy

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/vera-proxy/vera/memory"
)

// BenchmarkPassthrough sends the same requests straight to a fake Ollama,
// through a bare httputil.ReverseProxy, and through vera. The difference
// between the ns/op columns is the latency each proxy adds.
//
//	go test -run '^$' -bench Passthrough -count 10 ./proxy/ | tee new.txt
//	benchstat new.txt
func BenchmarkPassthrough(b *testing.B) {
	up := newFakeOllama(&testing.T{})
	defer up.srv.Close()
	target, _ := url.Parse(up.srv.URL)

	bare := httptest.NewServer(httputil.NewSingleHostReverseProxy(target))
	defer bare.Close()
	s := New(target, NewTransport(time.Minute), slog.New(slog.DiscardHandler))
	s.Recorder = &discardRecorder{}
	vera := httptest.NewServer(s.Handler())
	defer vera.Close()

	requests := []struct {
		name, method, path, body string
	}{
		{"version", http.MethodGet, "/api/version", ""},
		{"generate-stream", http.MethodPost, "/api/generate", `{"model":"llama3.2","prompt":"hi"}`},
		{"chat-stream", http.MethodPost, "/api/chat", `{"model":"llama3.2","messages":[{"role":"user","content":"hi"}]}`},
	}
	targets := []struct{ name, base string }{
		{"direct", up.srv.URL},
		{"reverseproxy", bare.URL},
		{"vera", vera.URL},
	}
	for _, rq := range requests {
		for _, tg := range targets {
			b.Run(rq.name+"/"+tg.name, func(b *testing.B) {
				client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
				defer client.CloseIdleConnections()
				b.ReportAllocs()
				for b.Loop() {
					var body io.Reader
					if rq.body != "" {
						body = strings.NewReader(rq.body)
					}
					req, _ := http.NewRequest(rq.method, tg.base+rq.path, body)
					res, err := client.Do(req)
					if err != nil {
						b.Fatal(err)
					}
					if _, err := io.Copy(io.Discard, res.Body); err != nil {
						b.Fatal(err)
					}
					res.Body.Close()
					if res.StatusCode != http.StatusOK {
						b.Fatalf("status %d", res.StatusCode)
					}
				}
			})
		}
	}
}

type discardRecorder struct{}

func (*discardRecorder) Record(context.Context, memory.Turn) error { return nil }
