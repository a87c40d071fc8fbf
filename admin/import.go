package admin

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gin-gonic/gin"

	"github.com/vera-proxy/vera/memory"
)

// An import's memory stays bounded whatever its body: the body is read line
// by line, never held; a line longer than maxImportLine is reported and
// skipped without being held either; at most maxImportErrors bad lines
// are listed (with the count of all), each in at most maxImportError
// bytes (an error may quote a field of a megabyte); and a batch is
// written once it holds importBatch memories or maxImportBatchBytes of
// text.
const (
	// maxImportLine is the longest line POST /memories/import takes, its
	// newline (and a \r before it) not counted.
	maxImportLine       = 1 << 20
	maxImportErrors     = 100
	maxImportError      = 300
	importBatch         = 200
	maxImportBatchBytes = 4 << 20
)

// importMemories takes the export's JSONL: each line is upserted by its
// id (importing twice changes nothing); bad lines are reported by number
// and the good ones kept.
func (s *Server) importMemories(c *gin.Context) error {
	ctx := c.Request.Context()
	lines := newLineReader(c.Request.Body, maxImportLine)
	im := &importer{s: s, errs: []lineError{}}
	for n := 1; ; n++ {
		raw, long, err := lines.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return httpError(http.StatusBadRequest, "reading the body: "+err.Error())
		}
		if long {
			im.bad(n, func() string { return "the line is longer than 1 MiB, the most a line may hold" })
			continue
		}
		if err := im.line(ctx, n, bytes.TrimSpace(raw)); err != nil {
			return err
		}
	}
	if err := im.flush(ctx); err != nil {
		return err
	}
	c.JSON(http.StatusOK, gin.H{"imported": im.imported, "errors": im.errs, "error_count": im.errorCount})
	return nil
}

// lineError is one bad line of an import, as the answer lists it.
type lineError struct {
	Line  int    `json:"line"`
	Error string `json:"error"`
}

// importer is one import under way: the batch waiting to be written and
// what the answer reports.
type importer struct {
	s          *Server
	errs       []lineError
	errorCount int
	imported   int
	batch      []memory.Memory
	held       int // the batch's text bytes: lines may hold 1 MiB each
	// change is what the batch does to each memory, for its history:
	// created, edited, or "" (the same again).
	change map[string]string
}

// bad counts line n as bad and lists it, while the list has room: msg is
// only called then.
func (im *importer) bad(n int, msg func() string) {
	im.errorCount++
	if len(im.errs) < maxImportErrors {
		im.errs = append(im.errs, lineError{n, clip(msg(), maxImportError)})
	}
}

// line takes line n, trimmed: a MEMORY joins the batch, anything else is
// a bad line. Only a failure to write the store stops the import.
func (im *importer) line(ctx context.Context, n int, line []byte) error {
	if len(line) == 0 {
		return nil
	}
	if line[0] != '{' && len(im.errs) == maxImportErrors {
		// Not a JSON object, so not a MEMORY, and its error would not be
		// listed: counted without decoding (junk is cheap).
		im.errorCount++
		return nil
	}
	var in memory.JSON
	if err := json.Unmarshal(line, &in); err != nil {
		im.bad(n, func() string { return "not a MEMORY: " + jsonProblem(err) })
		return nil
	}
	if in.ID == "" {
		in.ID = memory.NewID()
	}
	if in.Timestamp.IsZero() {
		in.Timestamp = time.Now().UTC()
	}
	m := memory.Memory{ID: in.ID, Namespace: in.Namespace, Type: in.Type, Text: in.Text, Time: in.Timestamp, Model: in.Model, Metadata: in.Metadata}
	if _, ok := m.Metadata[memory.MetaSource].(map[string]any); !ok {
		// An export keeps where each memory came from; one without says
		// it came in by an import.
		m.Metadata = memory.WithSource(m.Metadata, memory.Source{Via: memory.ViaImport})
	}
	if err := m.Validate(); err != nil {
		im.bad(n, err.Error)
		return nil
	}
	if v, ok := m.Metadata[memory.MetaPrivate]; ok {
		if _, isBool := v.(bool); !isBool {
			im.bad(n, func() string { return "metadata.private: want true or false" })
			return nil
		}
	}
	if strings.TrimSpace(m.Text) == "" {
		im.bad(n, func() string { return "text is empty" })
		return nil
	}
	if err := im.s.Memories.CheckLength(m.Text); err != nil {
		im.bad(n, func() string { return "text: " + err.Error() })
		return nil
	}
	old, err := im.s.Memories.Store.Get(ctx, m.ID)
	if err == nil && old.Namespace != m.Namespace {
		im.bad(n, func() string {
			return fmt.Sprintf("id %s is a memory of another namespace: an import never moves one", m.ID)
		})
		return nil
	}
	if im.change == nil {
		im.change = map[string]string{}
	}
	switch {
	case err != nil:
		im.change[m.ID] = memory.Created
	case old.Text != m.Text || old.Type != m.Type || !reflect.DeepEqual(old.Metadata, m.Metadata):
		im.change[m.ID] = memory.Edited
	default:
		im.change[m.ID] = ""
	}
	im.batch = append(im.batch, m)
	im.held += len(m.Text)
	if len(im.batch) == importBatch || im.held >= maxImportBatchBytes {
		return im.flush(ctx)
	}
	return nil
}

// flush writes the batch.
func (im *importer) flush(ctx context.Context) error {
	if len(im.batch) == 0 {
		return nil
	}
	im.s.Memories.Prepare(ctx, im.batch)
	if err := im.s.Memories.Store.Upsert(ctx, im.batch...); err != nil {
		return httpError(http.StatusServiceUnavailable, "writing the store: "+err.Error())
	}
	ids := make([]string, len(im.batch))
	for i, m := range im.batch {
		ids[i] = m.ID
	}
	im.s.Memories.Withdraw("", ids...) // a memory replaced: its old text leaves conversations
	for _, m := range im.batch {
		if action := im.change[m.ID]; action != "" {
			im.s.Memories.History.Record(ctx, memory.ViaImport, action, m)
			im.change[m.ID] = "" // once, should the batch hold it twice
		}
	}
	clear(im.change)
	im.imported += len(im.batch)
	im.batch, im.held = im.batch[:0], 0
	return nil
}

// clip shortens s to at most n bytes, on a rune boundary, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// lineReader reads lines of at most limit bytes without ever holding a
// longer one: what is past limit is read and dropped up to the next newline.
type lineReader struct {
	r     *bufio.Reader
	limit int
	buf   []byte // the current line; reused, at most limit+2 bytes
}

func newLineReader(r io.Reader, limit int) *lineReader {
	return &lineReader{r: bufio.NewReaderSize(r, 64<<10), limit: limit}
}

// next returns the next line without its newline (nor a \r before it),
// valid until the following call, or long when the line held more than
// limit bytes (then line is nil). The last line may lack its newline; after
// it, next returns io.EOF.
func (l *lineReader) next() (line []byte, long bool, err error) {
	l.buf = l.buf[:0]
	read := false // whether any byte of this line was read
	for {
		frag, err := l.r.ReadSlice('\n')
		read = read || len(frag) > 0
		if !long {
			// limit+2: room for the \r\n, which is not counted.
			if len(l.buf)+len(frag) > l.limit+2 {
				long, l.buf = true, l.buf[:0]
			} else {
				l.buf = append(l.buf, frag...)
			}
		}
		switch {
		case err == bufio.ErrBufferFull:
			continue // the line goes on: read (or drop) the rest
		case err == io.EOF && !read:
			return nil, false, io.EOF
		case err != nil && err != io.EOF:
			return nil, false, err
		}
		if long {
			return nil, true, nil
		}
		line = bytes.TrimSuffix(l.buf, []byte("\n"))
		line = bytes.TrimSuffix(line, []byte("\r"))
		if len(line) > l.limit {
			return nil, true, nil
		}
		return line, false, nil
	}
}
