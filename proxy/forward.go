package proxy

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
)

// forward sends the chat's body to its plan's upstream in place of the
// request's own, teeing the answer through tee when it is set; the answer
// of a chat for a virtual name (asked) names it. It returns only once the
// whole answer went out (a broken stream panics with
// http.ErrAbortHandler inside ServeHTTP).
func (pl *pipeline) forward(w http.ResponseWriter, r *http.Request, ch *chat, tee *answerTee, asked string) {
	p := ch.plan
	out := r.Clone(r.Context())
	out.Body = io.NopCloser(bytes.NewReader(ch.body))
	out.ContentLength = int64(len(ch.body))
	out.Header.Del("Content-Length")
	out.GetBody = nil
	var rename *[2]string
	if asked != "" {
		rename = &[2]string{ch.req.ModelName(), asked}
	}
	rp := pl.fw.reverseProxy(p.up, ch.d, tee, rename, pl.stripThink)
	if h := w.Header(); h.Get("X-Vera-Context") != "" {
		modify := rp.ModifyResponse
		rp.ModifyResponse = func(res *http.Response) error {
			// Before the answer's headers are copied and sent.
			switch {
			case refused(res.StatusCode):
				dropMemoryHeaders(h)
			case p.fallback != nil && !p.fallback.memory && res.Header.Get("X-Vera-Fallback") != "":
				// The fallback's plan answered, and it was sent no memory.
				dropMemoryHeaders(h)
				h.Set("X-Vera-Context", emptyContext)
			}
			return modify(res)
		}
	}
	rp.ServeHTTP(w, out)
}

// renamer gives a response body with every `"model":"<from>"` as
// `"model":"<to>"`, also when the bytes come split: the answer names the
// model the client asked for.
type renamer struct {
	io.ReadCloser
	from, to []byte
	pending  []byte // read, not yet given
	out      []byte // given next
	buf      []byte // what each read fills
	eof      error
}

func newRenamer(body io.ReadCloser, from, to string) *renamer {
	f, _ := json.Marshal(from)
	t, _ := json.Marshal(to)
	return &renamer{ReadCloser: body, from: append([]byte(`"model":`), f...), to: append([]byte(`"model":`), t...)}
}

func (r *renamer) Read(p []byte) (int, error) {
	for len(r.out) == 0 {
		if r.eof != nil {
			return 0, r.eof
		}
		if r.buf == nil {
			r.buf = make([]byte, 32<<10)
		}
		n, err := r.ReadCloser.Read(r.buf)
		buf := r.buf
		r.pending = append(r.pending, buf[:n]...)
		replaced := bytes.ReplaceAll(r.pending, r.from, r.to)
		keep := 0
		if err == nil {
			// A pattern may start in the last bytes: keep them back.
			keep = min(len(r.from)-1, len(replaced))
			for keep > 0 && !bytes.HasPrefix(r.from, replaced[len(replaced)-keep:]) {
				keep--
			}
		} else {
			r.eof = err
		}
		r.out = append(r.out, replaced[:len(replaced)-keep]...)
		r.pending = append(r.pending[:0], replaced[len(replaced)-keep:]...)
	}
	n := copy(p, r.out)
	r.out = r.out[n:]
	return n, nil
}
