package proxy

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// cloud.inject_memory = false covers Ollama's own cloud models too (their
// names end in -cloud): no memory goes with them, and their turns are
// still stored; local models keep their memory.
func TestOllamaCloudModelsKeepMemoryLocal(t *testing.T) {
	up := newFakeOllama(t)
	rec := &recorder{}
	base := startVera(t, up.srv.URL, func(s *Server) {
		s.Memory, s.Recorder, s.KeepMemoryLocal = &countingMemory{}, rec, true
	})
	for _, model := range []string{"gpt-oss:120b-cloud", "deepseek-v3.1:671b-cloud", "kimi-k2:cloud"} {
		res, _ := postChat(t, base, "/api/chat", `{"model":"`+model+`","messages":[{"role":"user","content":"my secret is 42"}]}`)
		require.Equal(t, http.StatusOK, res.StatusCode)
		_, _, body := up.last()
		assert.NotContains(t, string(body), "Memories", model)
		assert.Empty(t, res.Header.Get("X-Vera-Context"), model)
	}
	assert.Len(t, rec.all(), 3, "their turns are stored here")
	res, _ := postChat(t, base, "/api/chat", `{"model":"llama3.2","messages":[{"role":"user","content":"hi"}]}`)
	require.Equal(t, http.StatusOK, res.StatusCode)
	_, _, body := up.last()
	assert.Contains(t, string(body), "Memories", "a local model keeps its memory")
}
