package cloud

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func testProvider(t *testing.T, h http.HandlerFunc) *Provider {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	base, err := url.Parse(srv.URL + "/v1")
	require.NoError(t, err)
	p := New(Config{Base: base, Key: "k", Models: map[string]string{"big": "vendor/big"}}, nil)
	p.Backoff = func(int) time.Duration { return time.Millisecond }
	return p
}

func chatRequest(ctx context.Context, t *testing.T, p *Provider) *http.Request {
	r, err := http.NewRequestWithContext(ctx, http.MethodPost, p.URL().String()+"/api/chat", strings.NewReader(`{"model":"big","messages":[{"role":"user","content":"hi"}]}`))
	require.NoError(t, err)
	return r
}

// A client that hangs up cancels the cloud's request.
func TestHangUpCancelsTheCloudRequest(t *testing.T) {
	cancelled := make(chan struct{})
	p := testProvider(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, `data: {"choices":[{"delta":{"content":"Hel"}}]}`+"\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		close(cancelled)
	})
	ctx, cancel := context.WithCancel(context.Background())
	res, err := p.RoundTrip(chatRequest(ctx, t, p))
	require.NoError(t, err)
	line, err := bufio.NewReader(res.Body).ReadString('\n')
	require.NoError(t, err)
	assert.Contains(t, line, `"content":"Hel"`)
	cancel()
	res.Body.Close()
	select {
	case <-cancelled:
	case <-time.After(5 * time.Second):
		t.Fatal("the cloud request went on after the client left")
	}
}

// 429 and 5xx before any byte are retried, a bounded number of times; a
// Retry-After longer than vera waits is passed on at once.
func TestRetries(t *testing.T) {
	n := 0
	p := testProvider(t, func(w http.ResponseWriter, r *http.Request) {
		n++
		if n < 3 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, `{"choices":[{"message":{"content":"ok"}}]}`)
	})
	res, err := p.RoundTrip(chatRequest(context.Background(), t, p))
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, res.StatusCode)
	assert.Equal(t, 3, n)

	n = 0
	p = testProvider(t, func(w http.ResponseWriter, r *http.Request) {
		n++
		w.Header().Set("Retry-After", "3600")
		w.WriteHeader(http.StatusTooManyRequests)
	})
	res, err = p.RoundTrip(chatRequest(context.Background(), t, p))
	require.NoError(t, err)
	assert.Equal(t, http.StatusTooManyRequests, res.StatusCode)
	assert.Equal(t, 1, n, "an hour's wait is the client's to decide")

	n = 0
	p = testProvider(t, func(w http.ResponseWriter, r *http.Request) {
		n++
		w.WriteHeader(http.StatusBadGateway)
	})
	res, err = p.RoundTrip(chatRequest(context.Background(), t, p))
	require.NoError(t, err)
	assert.Equal(t, http.StatusBadGateway, res.StatusCode)
	assert.Equal(t, 4, n, "three retries, then the error")
	b, _ := io.ReadAll(res.Body)
	assert.Contains(t, string(b), "cloud provider 127.0.0.1")
}

// Only what the cloud needs leaves: the key, the configured headers, and
// none of the client's.
func TestOnlyTheKeyAndConfiguredHeadersLeave(t *testing.T) {
	var got http.Header
	p := testProvider(t, func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		io.WriteString(w, `{"choices":[{"message":{"content":"ok"}}]}`)
	})
	p.cfg.Headers = map[string]string{"X-Title": "vera"}
	r := chatRequest(context.Background(), t, p)
	r.Header.Set("X-OpenWebUI-User-Id", "alice")
	r.Header.Set("X-OpenWebUI-User-Email", "alice@example.com")
	r.Header.Set("Authorization", "Bearer ollama")
	_, err := p.RoundTrip(r)
	require.NoError(t, err)
	assert.Equal(t, "Bearer k", got.Get("Authorization"))
	assert.Equal(t, "vera", got.Get("X-Title"))
	assert.Empty(t, got.Get("X-OpenWebUI-User-Id"))
	assert.Empty(t, got.Get("X-OpenWebUI-User-Email"))
}

func TestModelNames(t *testing.T) {
	p := testProvider(t, func(http.ResponseWriter, *http.Request) {})
	for _, name := range []string{"big", "big:latest"} {
		m, ok := p.Model(name)
		assert.True(t, ok, name)
		assert.Equal(t, "vendor/big", m)
	}
	_, ok := p.Model("big:7b")
	assert.False(t, ok)
}

// The provider's /models is read apart from the request that needed it: a
// client that hung up does not leave every cloud window at the default;
// a failure is tried again soon.
func TestCatalogSurvivesAHangUpAndRetriesFailures(t *testing.T) {
	var fail atomic.Bool
	fail.Store(true)
	p := testProvider(t, func(w http.ResponseWriter, r *http.Request) {
		if fail.Load() {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		io.WriteString(w, `{"data":[{"id":"vendor/big","context_length":200000}]}`)
	})
	now := time.Now()
	p.Now = func() time.Time { return now }
	assert.Equal(t, DefaultContextLength, p.Window(context.Background(), "big"), "the provider fails: the default")
	fail.Store(false)
	assert.Equal(t, DefaultContextLength, p.Window(context.Background(), "big"), "a failure is kept a little while")
	now = now.Add(failedTTL + time.Second)
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	assert.Equal(t, 200000, p.Window(gone, "big"), "tried again, and a client that left does not spoil the fetch")
	assert.True(t, p.Listed(context.Background(), "big"))
}
