// Package veraai imports memories from Vera-AI, the project vera replaces:
// it reads a Vera-AI Qdrant collection and converts each point into a
// memory.Memory (`vera memories import --from-vera-ai`).
package veraai

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/qdrant/go-client/qdrant"

	"github.com/vera-proxy/vera/memory"
	veraqdrant "github.com/vera-proxy/vera/memory/qdrant"
)

// Report says what an import of a Vera-AI collection did.
type Report struct {
	Read     int `json:"read"`
	Imported int `json:"imported"`
	// Embedded counts the imported memories that got a vector from vera's
	// embedding model now; the others get one from the backfill later.
	Embedded int `json:"embedded"`
	// Undated counts points without a readable timestamp, imported with
	// the time of the import.
	Undated int `json:"undated"`
	// Skipped counts points that could not be imported, by reason.
	Skipped map[string]int `json:"skipped"`
}

// idNamespace derives stable ids for Vera-AI points with numeric ids. Its
// value must never change: points imported before keep their ids, so
// importing again replaces them. memory/qdrant's lock ids derive from the
// same value, kept in a constant of its own; the names hashed never
// overlap ("lock:"+name there, a decimal number here).
var idNamespace = uuid.MustParse("3f1c5a56-8a51-4d5e-9a8e-2b7f3e0c9d11")

// callTimeout bounds each page read from the Vera-AI collection, as the
// Qdrant store bounds its own calls.
const callTimeout = 10 * time.Second

// Convert converts one point of a Vera-AI collection: payload type (raw
// or curated), text (User:/Assistant: lines, perhaps a Timestamp: line)
// and timestamp (ISO 8601). The memory keeps the point's UUID, so
// importing twice replaces rather than duplicates. skip is the reason a
// point cannot be imported; undated is set when the time is the import's.
func Convert(id *qdrant.PointId, payload map[string]*qdrant.Value, ns string, now time.Time) (m memory.Memory, skip string, undated bool) {
	m.ID = id.GetUuid()
	if m.ID == "" {
		m.ID = uuid.NewSHA1(idNamespace, []byte(strconv.FormatUint(id.GetNum(), 10))).String()
	}
	m.Namespace = ns
	m.Type = memory.Type(payload["type"].GetStringValue())
	if !m.Type.Valid() {
		return m, fmt.Sprintf("type %q", payload["type"].GetStringValue()), false
	}
	text := payload["text"].GetStringValue()
	if text == "" {
		text = payload["content"].GetStringValue()
	}
	if u, a, ok := memory.ParseExchange(text); ok {
		m.Text = memory.FormatExchange(u, a)
	} else {
		m.Text = strings.TrimSpace(dropTimestampLine(text))
	}
	if m.Text == "" {
		return m, "no text", false
	}
	if t, ok := parseISO(payload["timestamp"].GetStringValue()); ok {
		m.Time = t
	} else {
		m.Time, undated = now.UTC(), true
	}
	m.Metadata = memory.WithSource(map[string]any{"imported_from": "vera-ai"}, memory.Source{Via: memory.ViaImport})
	for k, v := range payload {
		switch k {
		case "type", "text", "content", "timestamp":
		default:
			m.Metadata["vera_ai_"+k] = veraqdrant.ValueToAny(v)
		}
	}
	return m, "", undated
}

// dropTimestampLine removes Vera-AI's trailing "Timestamp: ..." line.
func dropTimestampLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if n := len(lines); n > 0 && strings.HasPrefix(lines[n-1], "Timestamp:") {
		lines = lines[:n-1]
	}
	return strings.Join(lines, "\n")
}

// parseISO reads the timestamps Vera-AI writes (Python's isoformat, with
// Z, an offset, or none, read as UTC).
func parseISO(s string) (time.Time, bool) {
	s = strings.TrimSpace(s)
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999", "2006-01-02 15:04:05.999999999Z07:00", "2006-01-02 15:04:05.999999999"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), true
		}
	}
	return time.Time{}, false
}

// Read pages through every point of the Vera-AI collection at url
// (no cap: next_page_offset until the end) and hands the converted
// memories to fn, a page at a time.
func Read(ctx context.Context, url, apiKey, collection, ns string, page int, fn func([]memory.Memory) error) (Report, error) {
	rep := Report{Skipped: map[string]int{}}
	cfg, addr, err := veraqdrant.ClientConfig(url)
	if err != nil {
		return rep, err
	}
	cfg.APIKey = apiKey
	c, err := qdrant.NewClient(cfg)
	if err != nil {
		return rep, fmt.Errorf("qdrant %s: %w", addr, err)
	}
	defer c.Close()
	now := time.Now()
	var offset *qdrant.PointId
	for {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		points, next, err := c.ScrollAndOffset(cctx, &qdrant.ScrollPoints{CollectionName: collection, Offset: offset,
			Limit: qdrant.PtrOf(uint32(page)), WithPayload: qdrant.NewWithPayload(true)})
		cancel()
		if err != nil {
			return rep, fmt.Errorf("reading Vera-AI collection %q at %s: %w", collection, addr, err)
		}
		var batch []memory.Memory
		for _, p := range points {
			rep.Read++
			m, skip, undated := Convert(p.GetId(), p.GetPayload(), ns, now)
			if skip != "" {
				rep.Skipped[skip]++
				continue
			}
			if undated {
				rep.Undated++
			}
			batch = append(batch, m)
		}
		if len(batch) > 0 {
			if err := fn(batch); err != nil {
				return rep, err
			}
			rep.Imported += len(batch)
		}
		if next == nil {
			return rep, nil
		}
		offset = next
	}
}
