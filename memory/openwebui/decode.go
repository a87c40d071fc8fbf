package openwebui

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Decode reads the answer of GET /api/v1/memories/: a JSON list of
// memories, {"id","user_id","content","updated_at","created_at"} each,
// the times in epoch seconds (fields Open WebUI adds later are ignored).
// Its errors say what is wrong with the answer, never a Go type: the
// answer may be anything a server at a mistyped address sends.
func Decode(body []byte) ([]Memory, error) {
	body = bytes.TrimSpace(body)
	switch {
	case len(body) == 0:
		return nil, errors.New("the answer is empty")
	case body[0] == '<':
		return nil, errWebPage
	}
	if err := valid(body); err != nil {
		return nil, err
	}
	if body[0] != '[' {
		return nil, fmt.Errorf("the answer is %s, not the list of memories Open WebUI sends", whatJSON(body))
	}
	var items []json.RawMessage
	if json.Unmarshal(body, &items) != nil {
		return nil, errors.New("the answer is not a list of memories")
	}
	out := make([]Memory, 0, len(items))
	for i, raw := range items {
		m, err := decodeMemory(raw)
		if err != nil {
			return nil, fmt.Errorf("memory %d of %d in the answer: %w", i+1, len(items), err)
		}
		out = append(out, m)
	}
	return out, nil
}

// errWebPage is an answer in HTML: a sign-in page, a proxy's, or the web
// page of another server.
var errWebPage = errors.New("the answer is a web page (HTML), not the JSON of Open WebUI's memories API")

// valid returns nil when body is JSON, else where it is not.
func valid(body []byte) error {
	if json.Valid(body) {
		return nil
	}
	var v any
	err := json.Unmarshal(body, &v)
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Errorf("the answer is not valid JSON: %s at byte %d", strings.TrimPrefix(se.Error(), "json: "), se.Offset)
	}
	return errors.New("the answer is not valid JSON: it ends too soon")
}

// whatJSON says what kind of JSON value body is, with an object's
// "detail" (how Open WebUI, being FastAPI, explains itself) or its keys.
func whatJSON(body []byte) string {
	switch body[0] {
	case '{':
		var obj map[string]json.RawMessage
		_ = json.Unmarshal(body, &obj)
		var detail string
		if json.Unmarshal(obj["detail"], &detail) == nil && detail != "" {
			return fmt.Sprintf("a JSON object saying %q", clip(detail, 200))
		}
		keys := slices.Sorted(maps.Keys(obj))
		if len(keys) == 0 {
			return "an empty JSON object"
		}
		for i, k := range keys {
			keys[i] = strconv.Quote(clip(k, 40))
		}
		if len(keys) > 5 {
			keys = append(keys[:5], "…")
		}
		return "a JSON object (with " + strings.Join(keys, ", ") + ")"
	case '"':
		return "a JSON string"
	case 't', 'f':
		return "true or false"
	case 'n':
		return "null"
	}
	return "a number"
}

// decodeMemory reads one memory of the list: its id and content are
// needed (content may be empty: such a memory is skipped, not refused),
// and a time, updated_at or created_at.
func decodeMemory(raw json.RawMessage) (Memory, error) {
	var fields map[string]json.RawMessage
	if len(raw) == 0 || raw[0] != '{' || json.Unmarshal(raw, &fields) != nil {
		return Memory{}, fmt.Errorf("it is %s, not a memory (a JSON object)", whatJSON(raw))
	}
	var m Memory
	var err error
	if m.ID, err = text(fields, "id", true); err != nil {
		return m, err
	}
	if m.ID == "" {
		return m, errors.New(`its "id" is empty`)
	}
	if m.UserID, err = text(fields, "user_id", false); err != nil {
		return m, fmt.Errorf("memory %q: %w", m.ID, err)
	}
	if m.Content, err = text(fields, "content", true); err != nil {
		return m, fmt.Errorf("memory %q: %w", m.ID, err)
	}
	for _, t := range []struct {
		name string
		dst  *time.Time
	}{{"updated_at", &m.UpdatedAt}, {"created_at", &m.CreatedAt}} {
		if *t.dst, err = epoch(fields, t.name); err != nil {
			return m, fmt.Errorf("memory %q: %w", m.ID, err)
		}
	}
	if m.UpdatedAt.IsZero() && m.CreatedAt.IsZero() {
		return m, fmt.Errorf(`memory %q has no date: neither "updated_at" nor "created_at"`, m.ID)
	}
	return m, nil
}

// text reads the string field name; a missing or null one is "", or an
// error when it is needed.
func text(fields map[string]json.RawMessage, name string, needed bool) (string, error) {
	raw, ok := fields[name]
	if !ok || string(raw) == "null" {
		if needed {
			return "", fmt.Errorf("%q is missing", name)
		}
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", fmt.Errorf("%q is %s, not a string", name, whatJSON(raw))
	}
	return s, nil
}

// epoch reads the time field name; zero when it is missing, null or 0.
// Open WebUI writes memories' times in seconds (int(time.time())), but
// other tables of it in nanoseconds (time.time_ns()): a time too large
// for seconds is read in the unit that gives a date of this era, rather
// than a year past 50000.
func epoch(fields map[string]json.RawMessage, name string) (time.Time, error) {
	raw, ok := fields[name]
	if !ok || string(raw) == "null" {
		return time.Time{}, nil
	}
	var n json.Number
	if len(raw) == 0 || raw[0] == '"' || json.Unmarshal(raw, &n) != nil {
		return time.Time{}, fmt.Errorf("%q is %s, not a time in seconds", name, whatJSON(raw))
	}
	i, err := n.Int64()
	if err != nil {
		// A fraction of a second, kept to the second; a number past
		// int64 is no time.
		f, ferr := n.Float64()
		if ferr != nil || f >= 1e11 || f < 0 {
			return time.Time{}, fmt.Errorf("%q is %s: not a time in seconds", name, clip(n.String(), 40))
		}
		i = int64(f)
	}
	switch {
	case i < 0:
		return time.Time{}, fmt.Errorf("%q is %s: not a time in seconds", name, clip(n.String(), 40))
	case i == 0:
		return time.Time{}, nil
	case i < 1e11:
		return time.Unix(i, 0).UTC(), nil
	case i < 1e14:
		return time.UnixMilli(i).UTC(), nil
	case i < 1e17:
		return time.UnixMicro(i).UTC(), nil
	}
	return time.Unix(0, i).UTC(), nil
}

// clip shortens s to at most n runes, marking the cut.
func clip(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
