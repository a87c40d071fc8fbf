package proxy

import (
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/dialect"
	"github.com/vera-proxy/vera/memory/storetest"
)

// allowedAllocs per record: none. Under the race detector sync.Pool drops
// a share of what is put back at random, and json.Valid's pooled scanner
// (one to three allocations) is then made again: 0.5 to 1 allocation per
// record on average, measured. One allocation more per record would still
// show.
var allowedAllocs = map[bool]float64{false: 0, true: 1.25}[raceOn]

// cycle serves the same records over and over, one per Read.
type cycle struct {
	records [][]byte
	i       int
}

func (c *cycle) Read(p []byte) (int, error) {
	n := copy(p, c.records[c.i%len(c.records)])
	c.i++
	return n, nil
}

func (c *cycle) Close() error { return nil }

// TestTeeAllocatesNothingPerRecord: a record forwarded through the tee of
// each dialect costs no allocation, with the commit of the turn waiting at
// the end (the path every recorded chat takes). The answer's own text
// grows as it arrives; it is sized ahead here so that only the per-record
// work is counted.
func TestTeeAllocatesNothingPerRecord(t *testing.T) {
	cases := []struct {
		d       dialect.Dialect
		ctype   string
		records []string
	}{
		{ollamaChat, "application/x-ndjson", []string{
			`{"model":"llama3.2","created_at":"2026-11-23T03:04:42.636Z","message":{"role":"assistant","content":"Hello word \u003cb\u003e\n"},"done":false}` + "\n",
		}},
		{ollamaGenerate, "application/x-ndjson", []string{
			`{"model":"llama3.2","created_at":"2026-11-23T03:04:42.636Z","response":"word ","done":false}` + "\n",
		}},
		{openAIChat, "text/event-stream", []string{
			`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"llama3.2","choices":[{"index":0,"delta":{"role":"assistant","content":"word\n"},"finish_reason":null}]}` + "\n\n",
		}},
		{openAIResponses, "text/event-stream", []string{
			"event: response.output_text.delta\n" + `data: {"type":"response.output_text.delta","sequence_number":4,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"word "}` + "\n\n",
		}},
		{anthropicMessages, "text/event-stream", []string{
			"event: content_block_delta\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"word "}}` + "\n\n",
			"event: ping\n" + `data: {"type": "ping"}` + "\n\n",
		}},
	}
	for _, tc := range cases {
		t.Run(tc.d.String(), func(t *testing.T) {
			src := &cycle{}
			for _, r := range tc.records {
				src.records = append(src.records, []byte(r))
			}
			tee := &answerTee{d: tc.d, onEnd: onAnswer(func(string) {})}
			res := &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {tc.ctype}}}
			body := tee.wrap(res, src)
			tee.Content.Grow(1 << 20)
			p := make([]byte, 32<<10)
			read := func() {
				if _, err := body.Read(p); err != nil && err != io.EOF {
					t.Fatal(err)
				}
			}
			for range 10 {
				read() // the buffers reach their size
			}
			allocs := storetest.AllocsPer(2000, read)
			assert.LessOrEqual(t, allocs, allowedAllocs, "allocations per forwarded record")
			require.False(t, tee.Failed)
			assert.Contains(t, tee.Content.String(), "word")
		})
	}
}
