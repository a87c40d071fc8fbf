package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/memory"
	"github.com/vera-proxy/vera/memory/embedded"
)

// newMemoriesServer returns a Server whose memory routes work on an
// embedded store of their own, lexical only.
func newMemoriesServer(t *testing.T) (*Server, *embedded.DB) {
	t.Helper()
	db, err := embedded.Open(context.Background(), t.TempDir())
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	s := newTestServer(t, "http://127.0.0.1:1")
	s.Memories = &memory.Service{Store: db}
	return s, db
}

// postImport sends body to POST /memories/import from a loopback client
// and returns the recorded answer.
func postImport(s *Server, body io.Reader) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, "/memories/import", body)
	req.RemoteAddr = "127.0.0.1:5000"
	req.Host = "127.0.0.1:11434" // a loopback client names this machine
	w := httptest.NewRecorder()
	handler(s).ServeHTTP(w, req)
	return w
}

// importReport decodes a 200 answer of POST /memories/import as the client
// does.
func importReport(t *testing.T, w *httptest.ResponseRecorder) ImportReport {
	t.Helper()
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	var rep ImportReport
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &rep), w.Body.String())
	return rep
}

// goodLine is a valid MEMORY of namespace ns, its text padded with pad
// bytes.
func goodLine(ns string, i, pad int) string {
	text := fmt.Sprintf("memory %d", i)
	if pad > 0 {
		text += strings.Repeat("y", pad)
	}
	return fmt.Sprintf(`{"id":"%s","namespace":%q,"type":"curated","text":%q}`, lineID(i), ns, text)
}

// lineID is a fixed memory ID, so tests can import the same line twice.
func lineID(i int) string { return fmt.Sprintf("00000000-0000-7000-8000-%012d", i) }

func countIn(t *testing.T, db *embedded.DB, ns string) int {
	t.Helper()
	n, err := db.Count(context.Background(), memory.Filter{Namespace: ns})
	require.NoError(t, err)
	return n
}

// An import lists its first 100 bad lines and counts them all; the good
// lines among them are imported all the same.
func TestImportListsAtMost100BadLines(t *testing.T) {
	tests := []struct {
		name      string
		bad, good int
	}{
		{"none bad", 0, 5},
		{"one bad", 1, 5},
		{"exactly 100 bad", 100, 20},
		{"101 bad", 101, 20},
		{"many bad, many good", 1000, 450}, // more than two batches of 200
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, db := newMemoriesServer(t)
			var body strings.Builder
			var badLines []int // line numbers, in order
			// Two bad lines, then a good one, and so on; the rest of
			// either at the end.
			for n, b, g := 1, 0, 0; b < tt.bad || g < tt.good; n++ {
				if b < tt.bad && (n%3 != 0 || g >= tt.good) {
					b++
					badLines = append(badLines, n)
					// Bad in turn for each reason a line is refused.
					switch b % 4 {
					case 3:
						body.WriteString("[1]\n") // decoded only while listed
					case 0:
						body.WriteString("{oops\n")
					case 1:
						body.WriteString(`{"namespace":"alice","type":"curated","text":"  "}` + "\n")
					case 2:
						body.WriteString(`{"namespace":"alice","type":"bogus","text":"x"}` + "\n")
					}
					continue
				}
				g++
				body.WriteString(goodLine("alice", g, 0) + "\n")
			}
			rep := importReport(t, postImport(s, strings.NewReader(body.String())))
			assert.Equal(t, tt.good, rep.Imported)
			assert.Equal(t, tt.good, countIn(t, db, "alice"), "the good lines are in the store")
			assert.Equal(t, tt.bad, rep.ErrorCount, "error_count counts every bad line")
			require.Equal(t, min(tt.bad, 100), len(rep.Errors), "listed")
			for i, e := range rep.Errors {
				assert.Equal(t, badLines[i], e.Line, "the first bad lines, in order")
				assert.NotEmpty(t, e.Error)
			}
		})
	}
}

// A line over 1 MiB is reported by its number and skipped, never held;
// the import goes on with the next line.
func TestImportSkipsLinesOver1MiB(t *testing.T) {
	const mib = 1 << 20
	// exactly returns a valid MEMORY line of exactly n bytes.
	exactly := func(i, n int) string {
		l := goodLine("alice", i, 0)
		return goodLine("alice", i, n-len(l))
	}
	require.Len(t, exactly(9, mib), mib)
	tests := []struct {
		name     string
		middle   string // line 2, between two good lines
		nl       string // the newline of every line
		imported int
		tooLong  bool
	}{
		{"1 MiB and a byte of a MEMORY", exactly(2, mib+1), "\n", 2, true},
		{"1 MiB and a byte of a MEMORY, CRLF", exactly(2, mib+1), "\r\n", 2, true},
		{"5 MiB of x", strings.Repeat("x", 5*mib), "\n", 2, true},
		{"17 MiB of spaces", strings.Repeat(" ", 17*mib), "\n", 2, true},
		{"exactly 1 MiB: taken", exactly(2, mib), "\n", 3, false},
		{"exactly 1 MiB, CRLF: taken", exactly(2, mib), "\r\n", 3, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, db := newMemoriesServer(t)
			// The line's limit is under test here, not the text's.
			s.Memories.MaxTokens = 1 << 20
			body := goodLine("alice", 1, 0) + tt.nl + tt.middle + tt.nl + goodLine("alice", 3, 0) // no newline at the end
			rep := importReport(t, postImport(s, strings.NewReader(body)))
			assert.Equal(t, tt.imported, rep.Imported)
			assert.Equal(t, tt.imported, countIn(t, db, "alice"))
			if !tt.tooLong {
				assert.Zero(t, rep.ErrorCount)
				assert.Empty(t, rep.Errors)
				return
			}
			assert.Equal(t, 1, rep.ErrorCount)
			require.Len(t, rep.Errors, 1)
			assert.Equal(t, 2, rep.Errors[0].Line)
			assert.Contains(t, rep.Errors[0].Error, "longer than 1 MiB")
			_, err := db.Get(context.Background(), lineID(3))
			assert.NoError(t, err, "the line after the long one is imported")
		})
	}
}

// What an import keeps besides: blank lines skipped but counted, a last
// line without newline, CRLF, a second import changing nothing, and no
// memory moved to another namespace.
func TestImportKeepsItsRules(t *testing.T) {
	s, db := newMemoriesServer(t)
	body := "\r\n" + goodLine("alice", 1, 0) + "\r\n  \n" + goodLine("alice", 2, 0)
	rep := importReport(t, postImport(s, strings.NewReader(body)))
	assert.Equal(t, 2, rep.Imported)
	assert.Zero(t, rep.ErrorCount)
	assert.NotNil(t, rep.Errors, `"errors" is a list, empty`)
	rep = importReport(t, postImport(s, strings.NewReader(body)))
	assert.Equal(t, 2, rep.Imported)
	assert.Equal(t, 2, countIn(t, db, "alice"), "importing twice changes nothing")

	rep = importReport(t, postImport(s, strings.NewReader("\n"+goodLine("bob", 1, 0)+"\n")))
	assert.Zero(t, rep.Imported)
	assert.Equal(t, 1, rep.ErrorCount)
	require.Len(t, rep.Errors, 1)
	assert.Equal(t, 2, rep.Errors[0].Line)
	assert.Contains(t, rep.Errors[0].Error, "another namespace")
	assert.Zero(t, countIn(t, db, "bob"))
}

// A hostile body, streamed: the answer stays small and the heap does not
// grow with the body. The old import kept every bad line's error: 20 MB of
// "x\n" took it past 4 GB and answered 712 MB; and it held a line of up to
// 16 MiB whole.
func TestImportOfAHostileBodyStaysSmall(t *testing.T) {
	const mib = 1 << 20
	tests := []struct {
		name                 string
		size                 int
		head, fill, tail     string // the body: head, fill up to size, tail
		errorCount, imported int
	}{
		{"20 MiB of x", 20 * mib, "", "x\n", "", 10 * mib, 0},
		{"2 MiB of {", 2 * mib, "", "{\n", "", mib, 0}, // each one decoded
		{"a 20 MiB line", 20 * mib, "", "x", "", 1, 0},
		{"a 20 MiB MEMORY, then a good one", 20 * mib, `{"namespace":"alice","type":"curated","text":"`, "y", "\n" + goodLine("alice", 1, 0) + "\n", 1, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := newMemoriesServer(t)
			pr, pw := io.Pipe()
			var wg sync.WaitGroup
			wg.Go(func() {
				chunk := []byte(strings.Repeat(tt.fill, (64<<10)/len(tt.fill)))
				_, err := io.WriteString(pw, tt.head)
				for n := len(tt.head); err == nil && n < tt.size; n += len(chunk) {
					_, err = pw.Write(chunk[:min(len(chunk), tt.size-n)])
				}
				if err == nil {
					_, err = io.WriteString(pw, tt.tail)
				}
				pw.CloseWithError(err)
			})

			var w *httptest.ResponseRecorder
			peak := heapPeak(func() { w = postImport(s, pr) })
			pr.Close() // should the handler stop early, the writer stops too
			wg.Wait()
			// A reader, a line of at most 1 MiB and 100 errors are well
			// under 16 MiB; the bodies are 20 MiB, or 2 MiB of 1 Mi lines
			// that the old import kept an error of each. (The race
			// detector's shadow memory is not heap.)
			t.Logf("heap peak over the baseline: %.1f MiB", float64(peak)/(1<<20))
			assert.Less(t, peak, uint64(16<<20), "the heap grew with the body")
			assert.Less(t, w.Body.Len(), 64<<10, "the answer is small")
			rep := importReport(t, w)
			assert.Equal(t, tt.errorCount, rep.ErrorCount)
			assert.Equal(t, min(tt.errorCount, 100), len(rep.Errors), "listed") // not Len: it would print them all
			assert.Equal(t, tt.imported, rep.Imported)
		})
	}
}

// heapPeak runs f and returns how far the heap (its objects, live or not
// yet swept) rose over what it was before f, sampled every millisecond
// while f runs (runtime/metrics: no stop of the world). The collector runs
// at GOGC=20 meanwhile, so that the figure is what f holds rather than its
// garbage awaiting collection: at 100 a decoding loop's garbage alone
// reaches some 17 MiB here.
func heapPeak(f func()) uint64 {
	defer debug.SetGCPercent(debug.SetGCPercent(20))
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() uint64 {
		metrics.Read(sample)
		return sample[0].Value.Uint64()
	}
	runtime.GC()
	base := read()
	peak := base
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			peak = max(peak, read())
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	})
	f()
	close(done)
	wg.Wait()
	return max(peak, read()) - base
}

// A bad line's error never quotes a megabyte back: 100 lines whose id is
// close to 1 MiB make an answer of kilobytes.
func TestImportErrorsAreShort(t *testing.T) {
	s, _ := newMemoriesServer(t)
	huge := strings.Repeat("é", (1<<20)/2-100) // two bytes a rune: cut on a rune boundary
	var body strings.Builder
	for range 100 {
		fmt.Fprintf(&body, `{"id":"%s","namespace":"a","type":"not-a-type","text":"x"}`+"\n", huge)
	}
	w := postImport(s, strings.NewReader(body.String()))
	rep := importReport(t, w)
	require.Len(t, rep.Errors, 100)
	assert.Less(t, w.Body.Len(), 100*(maxImportError+100))
	for _, e := range rep.Errors {
		assert.LessOrEqual(t, len(e.Error), maxImportError+len("…"))
		assert.True(t, utf8.ValidString(e.Error))
	}
}

// An imported memory keeps the source its export carries; one without
// says it came in by an import.
func TestImportKeepsOrNamesTheSource(t *testing.T) {
	s, db := newMemoriesServer(t)
	body := `{"id":"` + lineID(1) + `","namespace":"a","type":"curated","text":"From an export."` +
		`,"metadata":{"source":{"via":"chat","chat_id":"c9"}}}` + "\n" +
		`{"id":"` + lineID(2) + `","namespace":"a","type":"curated","text":"From elsewhere."}` + "\n"
	w := postImport(s, strings.NewReader(body))
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	ctx := context.Background()
	kept, err := db.Get(ctx, lineID(1))
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"via": "chat", "chat_id": "c9"}, kept.Metadata["source"])
	named, err := db.Get(ctx, lineID(2))
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"via": "import"}, named.Metadata["source"])
}
