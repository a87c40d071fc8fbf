package process

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ollama/ollama/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/memory"
	"github.com/vera-proxy/vera/memory/embedded"
	"github.com/vera-proxy/vera/ollama/ollamatest"
	"github.com/vera-proxy/vera/tests/veratest"
)

// killAnswer is what the fake Ollama answers to every chat.
const killAnswer = "Hello from Ollama"

// TestKill9LosesNoAcknowledgedTurn is the promise that nothing is lost: the end
// of an answer reaches the client only once the turn is committed to the
// durable queue, so a kill -9 right after a client got its whole answer
// loses nothing. Each round runs many quick chats in parallel (streamed
// /api/chat, non-streamed /api/chat, streamed /v1/chat/completions), kills
// vera with SIGKILL the moment the K-th client has its whole answer, and
// checks that every answer a client got to the end of is in the store or
// in its queue, and is stored after the next start. The upstream keeps a
// stream open a moment after its last record (killTail), and the /v1
// client hangs up at data: [DONE] as SSE clients do, so a vera that sends
// the end of an answer before the turn is committed loses turns here every
// round, not only when the kill happens to fall in a commit's few
// milliseconds.
func TestKill9LosesNoAcknowledgedTurn(t *testing.T) {
	rounds, chats := 3, 150
	if testing.Short() {
		rounds, chats = 2, 60
	}
	up := ollamatest.New(t)
	upstream := httptest.NewServer(killUpstream(up.Config.Handler))
	t.Cleanup(upstream.Close)
	for r := 1; r <= rounds; r++ {
		t.Run(fmt.Sprintf("round%d", r), func(t *testing.T) { killRound(t, upstream.URL, r, chats) })
	}
}

// killRound runs one round: chats until the kill, then the checks.
func killRound(t *testing.T, upstreamURL string, round, chats int) {
	data := t.TempDir()
	env := []string{"VERA_OLLAMA_URL=" + upstreamURL, "VERA_DATA_DIR=" + data}
	p := veratest.Launch(t, env...)
	ns := fmt.Sprintf("kill-%d", round)
	tr := &http.Transport{MaxIdleConnsPerHost: 16}
	t.Cleanup(tr.CloseIdleConnections)
	hc := &http.Client{Transport: tr, Timeout: 20 * time.Second}

	killAt := int64(chats / 2)
	var (
		mu       sync.Mutex
		acked    []string
		failures []string // chats that failed before the kill
		nAck     atomic.Int64
		killed   atomic.Bool
		sent     atomic.Int64
	)
	// ack is called the moment a client has the whole answer; the K-th
	// kills vera at once, from the goroutine that saw the answer end.
	ack := func(msg string) {
		if nAck.Add(1) == killAt {
			killed.Store(true)
			_ = p.Cmd.Process.Kill()
		}
		mu.Lock()
		acked = append(acked, msg)
		mu.Unlock()
	}
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := range jobs {
				sent.Add(1)
				msg := fmt.Sprintf("kill-test round %d chat %d", round, i)
				h := http.Header{}
				h.Set("X-OpenWebUI-User-Id", ns)
				h.Set("X-OpenWebUI-Chat-Id", fmt.Sprintf("kill-%d-%d", round, i))
				var err error
				switch i % 3 {
				case 0:
					err = killChatStreamed(p.Addr, tr, h, msg, ack)
				case 1:
					err = killChatWhole(p.Addr, hc, h, msg, ack)
				default:
					err = killChatV1(p.Addr, hc, h, msg, ack)
				}
				if err != nil && !killed.Load() {
					mu.Lock()
					failures = append(failures, fmt.Sprintf("%s: %v", msg, err))
					mu.Unlock()
				}
			}
		})
	}
	for i := range chats {
		if killed.Load() {
			break
		}
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	require.Empty(t, failures, "chats failed before the kill")
	require.True(t, killed.Load(), "only %d of %d chats were answered: vera was never killed", nAck.Load(), chats)
	select {
	case <-p.Exited:
	case <-time.After(10 * time.Second):
		t.Fatal("vera did not die of SIGKILL")
	}
	mu.Lock()
	acks := slices.Clone(acked)
	mu.Unlock()

	// What the file holds right after the kill: a turn in the store or in
	// the durable queue is kept (the queue is written to the store at the
	// next start).
	kept, _ := storedTurns(t, data, ns)
	var missing []string
	for _, m := range acks {
		if kept[m] == 0 {
			missing = append(missing, m)
		}
	}
	t.Logf("round %d: %d chats sent, %d answered to the end (kill at the %dth), %d turns kept, %d answered turns missing",
		round, sent.Load(), len(acks), killAt, len(kept), len(missing))
	assert.Empty(t, missing, "turns whose whole answer reached the client but which are neither stored nor queued after kill -9")

	// The next start writes the queue to the store: every answered turn
	// ends up stored, once.
	p = veratest.Launch(t, env...)
	require.Eventually(t, func() bool { return veratest.Queued(p) == 0 }, 20*time.Second, 20*time.Millisecond,
		"the queue left by the kill is never written to the store")
	p.Stop(t)
	stored, queued := storedTurns(t, data, ns)
	assert.Zero(t, queued, "nothing left queued after a clean stop with pending 0")
	var lost, twice []string
	for _, m := range acks {
		switch stored[m] {
		case 0:
			lost = append(lost, m)
		case 1:
		default:
			twice = append(twice, m)
		}
	}
	assert.Empty(t, lost, "answered turns not stored after the restart")
	assert.Empty(t, twice, "answered turns stored more than once")
}

// killChatStreamed sends a streamed /api/chat with the official Ollama
// client and acknowledges it at the done:true record.
func killChatStreamed(addr string, tr http.RoundTripper, h http.Header, msg string, ack func(string)) error {
	u, err := url.Parse("http://" + addr)
	if err != nil {
		return err
	}
	c := api.NewClient(u, &http.Client{Transport: withHeaders{tr, h}})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var answer strings.Builder
	done := false
	err = c.Chat(ctx, &api.ChatRequest{Model: "llama3.2", Messages: []api.Message{veratest.User(msg)}}, func(r api.ChatResponse) error {
		answer.WriteString(r.Message.Content)
		if r.Done && !done && answer.String() == killAnswer {
			done = true
			ack(msg)
		}
		return nil
	})
	if err == nil && !done {
		return fmt.Errorf("stream ended without done:true (answer %q)", answer.String())
	}
	return err
}

// killChatWhole sends a non-streamed /api/chat and acknowledges it once the
// whole body is read.
func killChatWhole(addr string, hc *http.Client, h http.Header, msg string, ack func(string)) error {
	body, err := json.Marshal(map[string]any{"model": "llama3.2", "stream": false,
		"messages": []api.Message{veratest.User(msg)}})
	if err != nil {
		return err
	}
	b, err := killPost(hc, "http://"+addr+"/api/chat", h, body)
	if err != nil {
		return err
	}
	var res api.ChatResponse
	if err := json.Unmarshal(b, &res); err != nil {
		return fmt.Errorf("answer %q: %w", b, err)
	}
	if !res.Done || res.Message.Content != killAnswer {
		return fmt.Errorf("incomplete answer %q", b)
	}
	ack(msg)
	return nil
}

func killPost(hc *http.Client, u string, h http.Header, body []byte) ([]byte, error) {
	req, err := http.NewRequest(http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header = h.Clone()
	req.Header.Set("Content-Type", "application/json")
	res, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, err
	}
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("status %d: %s", res.StatusCode, b)
	}
	return b, nil
}

// killChatV1 sends a streamed /v1/chat/completions, acknowledges it at
// data: [DONE] and hangs up there, as openai-go's stream does.
func killChatV1(addr string, hc *http.Client, h http.Header, msg string, ack func(string)) error {
	body, err := json.Marshal(map[string]any{"model": "llama3.2", "stream": true,
		"messages": []map[string]string{{"role": "user", "content": msg}}})
	if err != nil {
		return err
	}
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/v1/chat/completions", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header = h.Clone()
	req.Header.Set("Content-Type", "application/json")
	res, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(res.Body)
		return fmt.Errorf("status %d: %s", res.StatusCode, b)
	}
	var answer strings.Builder
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if data == "[DONE]" {
			if answer.String() != killAnswer {
				return fmt.Errorf("[DONE] after answer %q", answer.String())
			}
			ack(msg)
			return nil
		}
		var chunk struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(data), &chunk); err != nil {
			return fmt.Errorf("chunk %q: %w", data, err)
		}
		for _, c := range chunk.Choices {
			answer.WriteString(c.Delta.Content)
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return fmt.Errorf("stream ended without [DONE] (answer %q)", answer.String())
}

// withHeaders adds h to every request sent through base.
type withHeaders struct {
	base http.RoundTripper
	h    http.Header
}

func (w withHeaders) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range w.h {
		r.Header[k] = v
	}
	return w.base.RoundTrip(r)
}

// killTail is how long the upstream keeps a streamed answer open after
// its last record ([DONE], done:true), as a busy Ollama may: a vera that
// records a turn only once the upstream body ends has then already sent
// the client the whole answer, so a kill in between loses the turn.
const killTail = 20 * time.Millisecond

// killUpstream wraps the fake Ollama's handler: a /api/chat with "stream":
// false gets one JSON object with a Content-Length, as Ollama sends (the
// fake always streams); a streamed chat (/api/chat or
// /v1/chat/completions) is held open killTail after its last record.
// Everything else goes to next unchanged.
func killUpstream(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || (r.URL.Path != "/api/chat" && r.URL.Path != "/v1/chat/completions") {
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		var req struct {
			Model  string          `json:"model"`
			Stream *bool           `json:"stream"`
			Format json.RawMessage `json:"format"`
		}
		_ = json.Unmarshal(body, &req)
		ollama := r.URL.Path == "/api/chat"
		streamed := req.Stream != nil && *req.Stream || ollama && req.Stream == nil
		switch {
		case ollama && len(req.Format) > 0: // the curator's
			next.ServeHTTP(w, r)
		case ollama && !streamed:
			b, _ := json.Marshal(map[string]any{"model": req.Model, "created_at": "2026-11-22T10:00:00Z",
				"message": map[string]string{"role": "assistant", "content": killAnswer}, "done": true, "done_reason": "stop"})
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", fmt.Sprint(len(b)))
			_, _ = w.Write(b)
		case streamed:
			next.ServeHTTP(w, r)
			w.(http.Flusher).Flush()
			time.Sleep(killTail)
		default:
			next.ServeHTTP(w, r)
		}
	})
}

// storedTurns opens the store in data (vera not running) and counts the
// raw turns of ns by user message, and the turns still queued. A turn both
// stored and queued (stored, but killed before it left the queue) counts
// once.
func storedTurns(t *testing.T, data, ns string) (map[string]int, int) {
	t.Helper()
	ctx := context.Background()
	db, err := embedded.Open(ctx, data)
	require.NoError(t, err)
	defer db.Close()
	byID := map[string]memory.Memory{}
	cursor := ""
	for {
		page, next, err := db.Scroll(ctx, memory.Filter{Namespace: ns, Types: []memory.Type{memory.Raw}}, cursor, 500)
		require.NoError(t, err)
		for _, m := range page {
			byID[m.ID] = m
		}
		if next == "" {
			break
		}
		cursor = next
	}
	queued, err := db.Pending(ctx, 1<<20)
	require.NoError(t, err)
	for _, m := range queued {
		if m.Namespace == ns {
			byID[m.ID] = m
		}
	}
	users := map[string]int{}
	for _, m := range byID {
		u, a, ok := memory.ParseExchange(m.Text)
		require.True(t, ok, "stored text %q", m.Text)
		assert.Equal(t, killAnswer, a)
		users[u]++
	}
	return users, len(queued)
}
