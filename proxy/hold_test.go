package proxy

import (
	"bufio"
	"bytes"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/dialect"
)

// chunky returns its data in pieces of random sizes, sometimes empty.
type chunky struct {
	data []byte
	rng  *rand.Rand
}

func (c *chunky) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := min(len(p), len(c.data), c.rng.IntN(7))
	copy(p, c.data[:n])
	c.data = c.data[n:]
	return n, nil
}

func (c *chunky) Close() error { return nil }

// Whatever the chunking of the upstream and the size of the reads, every
// byte comes out once and in order, onEnd runs once, and it runs before
// the final record is whole at the client.
func TestHeldEndSurvivesAnyChunking(t *testing.T) {
	ndjson := `{"message":{"content":"Hel"},"done":false}` + "\n" + `{"message":{"content":"lo"},"done":false}` + "\n" + `{"message":{"content":""},"done":true}` + "\n"
	sse := "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hello\"}}]}\n\ndata: [DONE]\n\n"
	object := `{"message":{"role":"assistant","content":"Hello"},"done":true}`
	gen := `{"model":"m","response":"Hel","done":false}` + "\n" + `{"model":"m","response":"lo","done":false}` + "\n" + `{"model":"m","response":"","done":true,"context":[1,2]}` + "\n"
	rs, ms := responsesStream(true, "Hel", "lo"), messagesStream(true, "Hel", "lo")
	ro, mo := responsesObject(true, "Hello"), messagesObject(true, "Hello")
	finalLineEnd := func(body, marker string) int {
		i := strings.Index(body, marker) + len(marker)
		return i + strings.IndexByte(body[i:], '\n')
	}
	cases := []struct {
		name, body, ctype string
		d                 dialect.Dialect
		finalEnd          int // how many bytes make the final record whole
	}{
		{"ndjson", ndjson, "application/x-ndjson", ollamaChat, len(ndjson) - 1},
		{"sse", sse, "text/event-stream", openAIChat, strings.Index(sse, "[DONE]") + len("[DONE]")},
		{"object", object, "application/json", ollamaChat, len(object)},
		{"generate ndjson", gen, "application/x-ndjson", ollamaGenerate, len(gen) - 1},
		{"responses sse", rs, "text/event-stream", openAIResponses, finalLineEnd(rs, "event: response.completed\ndata:")},
		{"responses object", ro, "application/json", openAIResponses, len(ro)},
		{"messages sse", ms, "text/event-stream", anthropicMessages, finalLineEnd(ms, "event: message_stop\ndata:")},
		{"messages object", mo, "application/json", anthropicMessages, len(mo)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			require.Positive(t, tc.finalEnd)
			for seed := range uint64(300) {
				rng := rand.New(rand.NewPCG(seed, 1))
				var out bytes.Buffer
				ends := 0
				tee := &answerTee{d: tc.d}
				tee.onEnd = onAnswer(func(answer string) {
					ends++
					assert.Less(t, out.Len(), tc.finalEnd, "seed %d: the final record reached the client before the commit", seed)
					assert.Equal(t, "Hello", answer)
				})
				res := &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {tc.ctype}}}
				body := tee.wrap(res, &chunky{data: []byte(tc.body), rng: rng})
				for {
					p := make([]byte, 1+rng.IntN(8))
					n, err := body.Read(p)
					out.Write(p[:n])
					if err == io.EOF {
						break
					}
					require.NoError(t, err)
				}
				require.Equal(t, tc.body, out.String(), "seed %d", seed)
				require.Equal(t, 1, ends, "seed %d", seed)
				answer, ok := tee.Captured()
				assert.True(t, ok, "seed %d", seed)
				assert.Equal(t, "Hello", answer)
			}
		})
	}
}

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
