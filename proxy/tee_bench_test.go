package proxy

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/vera-proxy/vera/dialect"
)

// BenchmarkTee reads a 200-record answer through the tee of each dialect,
// with the commit of the turn waiting at its end, as a recorded chat
// does. No network: the tee's own work.
//
//	go test -run '^$' -bench Tee -count 8 ./proxy/ | tee new.txt
//	benchstat old.txt new.txt
func BenchmarkTee(b *testing.B) {
	const records = 200
	streams := []struct {
		d     dialect.Dialect
		ctype string
		rec   string
		end   string
	}{
		{ollamaChat, "application/x-ndjson",
			`{"model":"llama3.2","created_at":"2026-11-23T03:04:42.636Z","message":{"role":"assistant","content":"word %d\n"},"done":false}` + "\n",
			`{"model":"llama3.2","created_at":"2026-11-23T03:04:42.636Z","message":{"role":"assistant","content":""},"done":true,"done_reason":"stop"}` + "\n"},
		{openAIChat, "text/event-stream",
			`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"llama3.2","choices":[{"index":0,"delta":{"content":"word %d\n"},"finish_reason":null}]}` + "\n\n",
			"data: [DONE]\n\n"},
		{anthropicMessages, "text/event-stream",
			"event: content_block_delta\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"word %d "}}` + "\n\n",
			"event: message_stop\n" + `data: {"type":"message_stop"}` + "\n\n"},
	}
	for _, st := range streams {
		var body strings.Builder
		for i := range records {
			fmt.Fprintf(&body, st.rec, i)
		}
		body.WriteString(st.end)
		raw := []byte(body.String())
		b.Run(st.d.String(), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(raw)))
			p := make([]byte, 32<<10)
			for b.Loop() {
				tee := &answerTee{d: st.d, onEnd: onAnswer(func(string) {})}
				res := &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {st.ctype}}}
				r := tee.wrap(res, io.NopCloser(&recordReader{data: raw}))
				for {
					if _, err := r.Read(p); err != nil {
						break
					}
				}
				if _, ok := tee.Captured(); !ok {
					b.Fatal("the answer did not complete")
				}
			}
		})
	}
}

// recordReader gives data one line at a time, as a stream arrives.
type recordReader struct{ data []byte }

func (r *recordReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := bytes.IndexByte(r.data, '\n') + 1
	if n == 0 {
		n = len(r.data)
	}
	n = copy(p, r.data[:n])
	r.data = r.data[n:]
	return n, nil
}
