package proxy

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/memory"
)

// postChat sends body to path with headers (name, value pairs).
func postChat(t *testing.T, base, path, body string, headers ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+path, strings.NewReader(body))
	require.NoError(t, err)
	for i := 0; i < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return res, string(b)
}

const hiChat = `{"model":"llama3.2","messages":[{"role":"user","content":"hi"}]}`

func TestAnswerEndIsHeldAtMostASecond(t *testing.T) {
	up := newFakeOllama(t)
	rec := &recorder{gate: make(chan struct{})} // never opens: a stuck disk
	base := startVera(t, up.srv.URL, func(s *Server) { s.Recorder = rec })
	res, body := postChat(t, base, "/api/chat", hiChat)
	assert.Equal(t, http.StatusOK, res.StatusCode)
	assert.Contains(t, body, `"done":true`, "the answer ends anyway")
}

// Nothing before the final record waits: the first tokens arrive while
// the commit is still pending.
func TestOnlyTheFinalRecordWaits(t *testing.T) {
	up := newFakeOllama(t)
	rec := &recorder{gate: make(chan struct{})}
	base := startVera(t, up.srv.URL, func(s *Server) { s.Recorder = rec })
	res, err := http.Post(base+"/api/chat", "application/json", strings.NewReader(hiChat))
	require.NoError(t, err)
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	for i := range 4 {
		require.True(t, sc.Scan(), "record %d arrives while the commit waits", i)
		assert.NotContains(t, sc.Text(), `"done":true`)
	}
	close(rec.gate)
	require.True(t, sc.Scan())
	assert.Contains(t, sc.Text(), `"done":true`)
}

func TestNamespaceMustBeUTF8AndShort(t *testing.T) {
	up := newFakeOllama(t)
	rec := &recorder{}
	base := startVera(t, up.srv.URL, func(s *Server) { s.Recorder = rec })
	for name, ns := range map[string]string{"invalid UTF-8": "alice\xff", "257 bytes": strings.Repeat("a", 257)} {
		t.Run(name, func(t *testing.T) {
			res, body := postChat(t, base, "/api/chat", hiChat, "X-OpenWebUI-User-Id", ns)
			assert.Equal(t, http.StatusBadRequest, res.StatusCode)
			assert.Contains(t, body, "X-OpenWebUI-User-Id")
		})
	}
	res, _ := postChat(t, base, "/api/chat", hiChat, "X-OpenWebUI-User-Id", strings.Repeat("é", 128))
	assert.Equal(t, http.StatusOK, res.StatusCode, "256 bytes of UTF-8 are fine")
	assert.Len(t, rec.all(), 1)
}

func TestMemoryHeaderValues(t *testing.T) {
	up := newFakeOllama(t)
	mem := &fixedMemory{got: make(chan memory.Request, 1), mc: memory.Context{System: "remembered"}}
	rec := &recorder{}
	base := startVera(t, up.srv.URL, func(s *Server) { s.Memory, s.Recorder = mem, rec })
	for _, v := range []string{"off", "OFF", "false", "0", "no", "No"} {
		res, _ := postChat(t, base, "/api/chat", hiChat, "X-Vera-Memory", v)
		require.Equal(t, http.StatusOK, res.StatusCode, v)
		assert.True(t, waitFor(t, mem.got, "the memory request").NoMemory, v)
	}
	assert.Empty(t, rec.all(), "memory off stores nothing")
	for _, v := range []string{"on", "TRUE", "1", "yes"} {
		res, _ := postChat(t, base, "/api/chat", hiChat, "X-Vera-Memory", v)
		require.Equal(t, http.StatusOK, res.StatusCode, v)
		assert.False(t, waitFor(t, mem.got, "the memory request").NoMemory, v)
	}
	res, body := postChat(t, base, "/api/chat", hiChat, "X-Vera-Memory", "maybe")
	assert.Equal(t, http.StatusBadRequest, res.StatusCode)
	assert.Contains(t, body, "X-Vera-Memory")
}

// Ollama's load and unload calls carry no conversation: they go out as
// they came, so Ollama unloads instead of generating.
func TestLoadAndUnloadCallsPassUntouched(t *testing.T) {
	up := newFakeOllama(t)
	mem := &fixedMemory{got: make(chan memory.Request, 1), mc: memory.Context{System: "the operator's system prompt"}}
	rec := &recorder{}
	base := startVera(t, up.srv.URL, func(s *Server) { s.Memory, s.Recorder = mem, rec })
	for _, body := range []string{
		`{"model":"llama3.2","messages":[],"keep_alive":0}`,
		`{"model":"llama3.2", "keep_alive": "5m"}`,
		`{"model":"llama3.2","messages":null}`,
	} {
		res, _ := postChat(t, base, "/api/chat", body)
		require.Equal(t, http.StatusOK, res.StatusCode)
		_, _, got := up.last()
		assert.Equal(t, body, string(got), "byte for byte")
		assert.Empty(t, res.Header.Get("X-Vera-Context"))
	}
	select {
	case <-mem.got:
		t.Fatal("memory was asked about a load call")
	default:
	}
	assert.Empty(t, rec.all())
}

func TestModelfileSystemReachesMemory(t *testing.T) {
	up := newFakeOllama(t)
	up.system = "You are Mario."
	mem := &fixedMemory{got: make(chan memory.Request, 1)}
	base := startVera(t, up.srv.URL, func(s *Server) { s.Memory = mem })
	postChat(t, base, "/api/chat", hiChat)
	assert.Equal(t, "You are Mario.", waitFor(t, mem.got, "the memory request").ModelSystem)
	postChat(t, base, "/api/chat", `{"model":"llama3.2","messages":[{"role":"system","content":"terse"},{"role":"user","content":"hi"}]}`)
	assert.Empty(t, waitFor(t, mem.got, "the memory request").ModelSystem, "a caller's system message wins, as in Ollama")
}

func TestMemoryHeadersAndExposure(t *testing.T) {
	up := newFakeOllama(t)
	mem := &fixedMemory{mc: memory.Context{
		System: "x", RuleIDs: []string{"r1"}, Semantic: []memory.Hit{{Memory: memory.Memory{ID: "s1"}}}, RecentIDs: []string{"t1", "t2"},
		RulesTokens: 3, SemanticTokens: 5, RecentTokens: 7,
	}}
	base := startVera(t, up.srv.URL, func(s *Server) { s.Memory = mem })
	res, _ := postChat(t, base, "/api/chat", hiChat)
	assert.Equal(t, "semantic=1; recent=2; rules=1; tokens=15", res.Header.Get("X-Vera-Context"))
	assert.Equal(t, "r1,s1,t1,t2", res.Header.Get("X-Vera-Memories"))
	exposed := strings.Join(res.Header.Values("Access-Control-Expose-Headers"), ",")
	for _, h := range []string{"X-Vera-Context", "X-Vera-Memories", "X-Vera-Tier", "X-Vera-Fallback", "X-Vera-Forgot", "X-Vera-VRAM"} {
		assert.Contains(t, exposed, h)
	}
	assert.NotContains(t, exposed, "*")

	mem.mc = memory.Context{}
	res, _ = postChat(t, base, "/api/chat", hiChat)
	_, sent := res.Header["X-Vera-Memories"]
	assert.False(t, sent, "left out when nothing was injected")

	many := memory.Context{}
	for i := range 60 {
		many.RecentIDs = append(many.RecentIDs, fmt.Sprint(i))
	}
	mem.mc = many
	res, _ = postChat(t, base, "/api/chat", hiChat)
	assert.Len(t, strings.Split(res.Header.Get("X-Vera-Memories"), ","), 50, "the first 50")
}

func TestErrorsSpeakOfTheRequest(t *testing.T) {
	up := newFakeOllama(t)
	base := startVera(t, up.srv.URL, nil)
	for body, want := range map[string]string{
		`{"model":"m","messages":"hi"}`:                          `want an array, got string`,
		`{"model":"m","messages":[{"role":"user","content":5}]}`: `content`,
		`{"model":"m","messages":[`:                              "unexpected end of JSON input",
		`{"model":"m",]`:                                         "at byte",
	} {
		for _, path := range []string{"/api/chat", "/v1/chat/completions"} {
			res, got := postChat(t, base, path, body)
			assert.Equal(t, http.StatusBadRequest, res.StatusCode, body)
			assert.Contains(t, got, want, "%s %s", path, body)
			assert.NotContains(t, got, "Go value")
			assert.NotContains(t, got, "proxy.")
		}
	}
}

// A body declared over the limit is refused before it is read.
func TestOversizedBodyRefusedFromContentLength(t *testing.T) {
	up := newFakeOllama(t)
	base := startVera(t, up.srv.URL, nil)
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	require.NoError(t, err)
	defer conn.Close()
	fmt.Fprintf(conn, "POST /api/chat HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{", 300<<20)
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err, "answered without the body")
	defer res.Body.Close()
	assert.Equal(t, http.StatusRequestEntityTooLarge, res.StatusCode)
}

func TestStalledBodyIsEnded(t *testing.T) {
	up := newFakeOllama(t)
	base := startVera(t, up.srv.URL, func(s *Server) { s.BodyIdleTimeout = 200 * time.Millisecond })
	for _, path := range []string{"/api/chat", "/api/blobs/sha256:abc"} {
		t.Run(path, func(t *testing.T) {
			conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
			require.NoError(t, err)
			defer conn.Close()
			fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{\"model\"", path)
			require.NoError(t, conn.SetReadDeadline(time.Now().Add(10*time.Second)))
			res, err := http.ReadResponse(bufio.NewReader(conn), nil)
			require.NoError(t, err, "the stalled request is answered, not left open")
			res.Body.Close()
			assert.Equal(t, http.StatusRequestTimeout, res.StatusCode)
		})
	}
}

// A body that keeps flowing is never cut, however long it takes.
func TestSlowFlowingBodyIsNotCut(t *testing.T) {
	up := newFakeOllama(t)
	var got []byte
	done := make(chan struct{})
	up.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, _ = io.ReadAll(r.Body)
		close(done)
	})
	base := startVera(t, up.srv.URL, func(s *Server) { s.BodyIdleTimeout = 150 * time.Millisecond })
	pr, pw := io.Pipe()
	go func() {
		for range 10 {
			pw.Write([]byte("0123456789"))
			time.Sleep(50 * time.Millisecond)
		}
		pw.Close()
	}()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, base+"/api/blobs/sha256:abc", pr)
	require.NoError(t, err)
	req.ContentLength = 100
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	res.Body.Close()
	waitFor(t, done, "the upload")
	assert.Equal(t, http.StatusOK, res.StatusCode)
	assert.Len(t, got, 100, "every byte arrived")
}

func TestOpenAIErrorShapeForBadHeaders(t *testing.T) {
	up := newFakeOllama(t)
	base := startVera(t, up.srv.URL, nil)
	res, body := postChat(t, base, "/v1/chat/completions", hiChat, "X-Vera-Memory", "perhaps")
	assert.Equal(t, http.StatusBadRequest, res.StatusCode)
	var e struct {
		Error struct{ Message, Type string } `json:"error"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &e))
	assert.Equal(t, "invalid_request_error", e.Error.Type)
}

// Open WebUI's background tasks get no memory and are not stored; its RAG
// template is a conversation, stored as the user's own question.
func TestOpenWebUITasksAndRAG(t *testing.T) {
	up := newFakeOllama(t)
	mem := &fixedMemory{got: make(chan memory.Request, 1), mc: memory.Context{System: "remembered"}}
	rec := &recorder{}
	base := startVera(t, up.srv.URL, func(s *Server) { s.Memory, s.Recorder = mem, rec })
	chatOf := func(text string) string {
		b, _ := json.Marshal(map[string]any{"model": "llama3.2", "stream": false, "messages": []map[string]string{{"role": "user", "content": text}}})
		return string(b)
	}
	for _, tc := range []struct{ name, body, header string }{
		{"title prompt", chatOf(readFixture(t, "title_v5_current.txt")), ""},
		{"follow-ups prompt", chatOf(readFixture(t, "follow_ups.txt")), ""},
		{"tool-calling system prompt", func() string {
			b, _ := json.Marshal(map[string]any{"model": "llama3.2", "stream": false, "messages": []map[string]string{
				{"role": "system", "content": readFixture(t, "function_calling_system.txt")},
				{"role": "user", "content": "Query: what is the weather in Lisbon?"}}})
			return string(b)
		}(), ""},
		{"task header", hiChat, "X-OpenWebUI-Task"},
		{"vera task header", hiChat, "X-Vera-Task"},
	} {
		var hdr []string
		if tc.header != "" {
			hdr = []string{tc.header, "title_generation"}
		}
		res, _ := postChat(t, base, "/api/chat", tc.body, hdr...)
		require.Equal(t, http.StatusOK, res.StatusCode, tc.name)
		_, _, got := up.last()
		assert.Equal(t, tc.body, string(got), "%s: forwarded as it came", tc.name)
	}
	select {
	case <-mem.got:
		t.Fatal("memory was asked about a task")
	default:
	}
	assert.Empty(t, rec.all(), "no task is stored")

	rag := readFixture(t, "rag_v5_prepend.txt")
	res, _ := postChat(t, base, "/api/chat", chatOf(rag))
	require.Equal(t, http.StatusOK, res.StatusCode)
	got := waitFor(t, mem.got, "the memory request")
	question := "Can I keep it in the fridge while I travel for two weeks?"
	assert.Equal(t, question, got.Recall[len(got.Recall)-1].Content, "recall is about the question, not the documents")
	assert.Equal(t, rag, got.Messages[len(got.Messages)-1].Content, "the documents still size the prompt")
	require.Len(t, rec.all(), 1)
	assert.Equal(t, question, rec.all()[0].User, "the stored turn holds the user's own text")
	_, _, sent := up.last()
	assert.Contains(t, string(sent), "starter-faq.md", "the documents still reach the model")
}

// The request's log line carries the cause of an error it was answered
// with.
func TestErrorCauseOnTheLogLine(t *testing.T) {
	var logs strings.Builder
	var mu sync.Mutex
	s := New(mustURL(t, "http://127.0.0.1:1"), NewTransport(time.Second), slog.New(slog.NewTextHandler(lockedWriter{&mu, &logs}, nil)))
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	res, _ := postChat(t, srv.URL, "/api/chat", hiChat)
	assert.Equal(t, http.StatusBadGateway, res.StatusCode)
	mu.Lock()
	defer mu.Unlock()
	assert.Regexp(t, `msg=request .*status=502 .*error=".*connection refused`, logs.String())
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
