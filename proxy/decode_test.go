package proxy

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/memory"
)

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
