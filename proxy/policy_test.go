package proxy

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/memory"
)

// cloud.memory = "none" (or cloud.inject_memory = false) covers Ollama's
// own cloud models too (their names end in -cloud): no memory goes with
// them, and their turns are still stored; local models keep their memory.
func TestOllamaCloudModelsKeepMemoryLocal(t *testing.T) {
	up := newFakeOllama(t)
	rec := &recorder{}
	base := startVera(t, up.srv.URL, func(s *Server) {
		s.Memory, s.Recorder, s.Policies = &countingMemory{}, rec, Policies{Cloud: memory.None}
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

// A model's policy: [memory.models] patterns first (the longest that
// matches, with or without the tag), else cloud names and Ollama's cloud
// models get cloud.memory (shareable when unset), others everything.
func TestPolicyFor(t *testing.T) {
	ps := Policies{Models: map[string]memory.Policy{"guest*": memory.None, "guest-trusted*": memory.All, "llama3.2": memory.Shareable}}
	for model, want := range map[string]memory.Policy{
		"qwen2.5:7b":               memory.All,
		"gpt-oss:120b-cloud":       memory.Shareable,
		"kimi-k2:cloud":            memory.Shareable,
		"guest:latest":             memory.None,
		"guest-trusted:7b":         memory.All,
		"llama3.2":                 memory.Shareable,
		"llama3.2:latest":          memory.Shareable,
		"llama3.2:1b":              memory.Shareable,
		"llama3.2-vision:11b":      memory.All,
		"deepseek-v3.1:671b-cloud": memory.Shareable,
	} {
		assert.Equal(t, want, ps.policy(model, false), model)
	}
	ps.Cloud = memory.None
	assert.Equal(t, memory.None, ps.policy("gpt-oss:120b-cloud", false))
	assert.Equal(t, memory.None, ps.policy("gpt-4o", true))
	assert.Equal(t, memory.None, stricter(memory.All, memory.None))
	assert.Equal(t, memory.Shareable, stricter(memory.Shareable, memory.All))
}
