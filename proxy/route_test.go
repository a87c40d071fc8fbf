package proxy

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/vera-proxy/vera/memory"
)

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
