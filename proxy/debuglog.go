package proxy

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vera-proxy/vera/memory"
)

// DebugLog writes one JSON line per chat to dir/debug_YYYY-MM-DD.log (UTC
// date): what was injected and what was forwarded. It holds message
// contents, so it is only on with general.debug. One goroutine owns the
// file; a chat never waits for the disk (lines beyond a full buffer are
// counted and dropped).
type DebugLog struct {
	dir     string
	log     *slog.Logger
	lines   chan debugLine
	done    chan struct{}
	dropped atomic.Int64
	once    sync.Once
}

type debugLine struct {
	at   time.Time
	line []byte
}

// NewDebugLog starts the writer for dir.
func NewDebugLog(dir string, logger *slog.Logger) *DebugLog {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	d := &DebugLog{dir: dir, log: logger, lines: make(chan debugLine, 1024), done: make(chan struct{})}
	go d.run()
	return d
}

// Close writes what is buffered and stops.
func (d *DebugLog) Close() {
	d.once.Do(func() {
		close(d.lines)
		<-d.done
	})
}

type debugHit struct {
	ID      string  `json:"id"`
	Type    string  `json:"type"`
	Tokens  int     `json:"tokens"`
	Score   float64 `json:"score"`
	Cosine  float64 `json:"cosine,omitempty"`
	Lexical float64 `json:"lexical,omitempty"`
}

// Chat records one chat.
func (d *DebugLog) Chat(requestID, ns, model string, mc *memory.Context, forwarded []byte, answerLen int, complete bool, route map[string]any) {
	e := map[string]any{
		"time": time.Now().UTC().Format(time.RFC3339Nano), "request_id": requestID,
		"namespace": ns, "model": model, "answer_chars": answerLen, "complete": complete,
	}
	if route != nil {
		e["route"] = route // the tier decision and its scores
	}
	if mc != nil {
		hits := make([]debugHit, len(mc.Semantic))
		for i, h := range mc.Semantic {
			hits[i] = debugHit{ID: h.ID, Type: string(h.Type), Tokens: h.Tokens, Score: h.Score, Cosine: h.Cosine, Lexical: h.Lexical}
		}
		e["semantic"] = map[string]any{"ids": hits, "tokens": mc.SemanticTokens, "budget": mc.SemanticBudget, "lexical_only": mc.LexicalOnly}
		e["recent"] = map[string]any{"ids": mc.RecentIDs, "tokens": mc.RecentTokens, "budget": mc.RecentBudget}
		if mc.Err != nil {
			e["error"] = mc.Err.Error()
		}
	}
	var fwd struct {
		Messages json.RawMessage `json:"messages"`
	}
	if json.Unmarshal(forwarded, &fwd) == nil {
		e["messages"] = fwd.Messages
	}
	b, err := json.Marshal(e)
	if err != nil {
		return
	}
	select {
	case d.lines <- debugLine{at: time.Now().UTC(), line: b}:
	default:
		d.dropped.Add(1)
	}
}

func (d *DebugLog) run() {
	defer close(d.done)
	var (
		f    *os.File
		date string
	)
	defer func() {
		if f != nil {
			f.Close()
		}
	}()
	for l := range d.lines {
		if day := l.at.Format("2006-01-02"); day != date || f == nil {
			if f != nil {
				f.Close()
				f = nil
			}
			if err := os.MkdirAll(d.dir, 0o750); err != nil {
				d.log.Warn("debug log", slog.Any("error", err))
				continue
			}
			var err error
			f, err = os.OpenFile(filepath.Join(d.dir, fmt.Sprintf("debug_%s.log", day)), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o640)
			if err != nil {
				d.log.Warn("debug log", slog.Any("error", err))
				continue
			}
			date = day
		}
		if _, err := f.Write(append(l.line, '\n')); err != nil {
			d.log.Warn("debug log", slog.Any("error", err))
		}
	}
}
