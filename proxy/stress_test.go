package proxy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ollama/ollama/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestStressEveryStreamEnds sends 2000 streamed POSTs per route at
// concurrency 4 and requires every one to end with done:true. A bare
// httputil.ReverseProxy cuts about one in a thousand of these (see
// enableFullDuplex).
func TestStressEveryStreamEnds(t *testing.T) {
	if testing.Short() {
		t.Skip("stress test")
	}
	const total, workers = 2000, 4
	up := newFakeOllama(t)
	up.delay = time.Millisecond // the cut needs the upstream to answer while the body is in flight
	client := newClient(t, startVera(t, up.srv.URL, func(s *Server) { s.Recorder = &recorder{} }))

	for _, route := range []string{"generate", "chat"} {
		t.Run(route, func(t *testing.T) {
			var ended, failed atomic.Int64
			var firstErr atomic.Value
			jobs := make(chan int)
			var wg sync.WaitGroup
			for range workers {
				wg.Go(func() {
					for range jobs {
						done := false
						var err error
						if route == "generate" {
							err = client.Generate(context.Background(), &api.GenerateRequest{Model: "llama3.2", Prompt: "hi"},
								func(r api.GenerateResponse) error { done = r.Done; return nil })
						} else {
							err = client.Chat(context.Background(), &api.ChatRequest{Model: "llama3.2",
								Messages: []api.Message{{Role: "user", Content: "hi"}}},
								func(r api.ChatResponse) error { done = r.Done; return nil })
						}
						if err == nil && done {
							ended.Add(1)
							continue
						}
						failed.Add(1)
						if err != nil {
							firstErr.CompareAndSwap(nil, err.Error())
						}
					}
				})
			}
			for i := range total {
				jobs <- i
			}
			close(jobs)
			wg.Wait()
			assert.Equal(t, int64(total), ended.Load(), "streams ending with done:true (first error: %v)", firstErr.Load())
			assert.Zero(t, failed.Load())
		})
	}
}

// TestBlobUploadStreams pushes 256 MiB through vera to a fake Ollama that
// checks the digest, and requires vera's heap not to grow with the body.
func TestBlobUploadStreams(t *testing.T) {
	if testing.Short() {
		t.Skip("large upload")
	}
	const size = 256 << 20
	blob := func() io.Reader {
		return io.LimitReader(rand.NewChaCha8([32]byte{7}), size)
	}
	h := sha256.New()
	_, err := io.Copy(h, blob())
	require.NoError(t, err)
	digest := "sha256:" + hex.EncodeToString(h.Sum(nil))

	up := newFakeOllama(t)
	client := newClient(t, startVera(t, up.srv.URL, nil))

	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	baseline := ms.HeapInuse
	var peak atomic.Uint64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				if ms.HeapInuse > peak.Load() {
					peak.Store(ms.HeapInuse)
				}
			}
		}
	}()
	err = client.CreateBlob(context.Background(), digest, blob())
	close(stop)
	<-sampled
	require.NoError(t, err, "the upstream saw the same bytes (it checks the digest)")

	// The client, vera and the fake upstream share this process: all three
	// stream, so the heap stays far below the body's size.
	growth := int64(peak.Load()) - int64(baseline)
	t.Logf("heap in use: baseline %d MiB, peak %d MiB during a %d MiB upload", baseline>>20, peak.Load()>>20, size>>20)
	assert.Less(t, growth, int64(64<<20), "heap grew by %d MiB", growth>>20)

	// A wrong digest comes back as Ollama's 400.
	err = client.CreateBlob(context.Background(), "sha256:"+hex.EncodeToString(make([]byte, 32)), io.LimitReader(rand.NewChaCha8([32]byte{1}), 1<<20))
	var se api.StatusError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, 400, se.StatusCode)
}
