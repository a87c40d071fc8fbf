package proxy

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// With strip_think, the client never sees inline thinking, also with
// memory off, and it is never stored either way.
func TestStripThinkThroughTheProxy(t *testing.T) {
	for _, strip := range []bool{true, false} {
		up := newFakeOllama(t)
		up.tokens = []string{"<thi", "nk>secret plan</think>", "\n\nHello", "."}
		rec := &recorder{}
		base := startVera(t, up.srv.URL, func(s *Server) { s.Recorder, s.StripThink = rec, strip })
		_, body := postChat(t, base, "/api/chat", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
		_, off := postChat(t, base, "/api/chat", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, "X-Vera-Memory", "off")
		if strip {
			assert.NotContains(t, body, "secret plan")
			assert.NotContains(t, off, "secret plan", "memory off too")
			assert.Contains(t, body, "Hello")
		} else {
			assert.Contains(t, body, "secret plan", "off: the client sees what the model wrote")
		}
		_, v1 := postChat(t, base, "/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hello"}]}`)
		_, v1whole := postChat(t, base, "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hey"}]}`)
		if strip {
			assert.NotContains(t, v1, "secret plan", "OpenAI's stream too")
			assert.NotContains(t, v1whole, "secret plan", "and its whole answer")
		}
		turns := rec.all()
		require.Len(t, turns, 3)
		for _, turn := range turns {
			assert.Equal(t, "Hello.", turn.Assistant, "never stored (strip_think %v)", strip)
		}
	}
}
