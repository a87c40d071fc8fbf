package dialect

import (
	"bytes"
	"encoding/json"

	"github.com/vera-proxy/vera/memory"
)

// A conversation's later turns carry the memories that became relevant to
// them as a block at the start of their user message: every common chat
// template renders a user message where it stands, whereas several move
// every system message to the top.

// keptFrom tells which of the caller's messages go out under a
// compaction (memory.Context.KeepFrom): msgs[start:lead], the messages
// before the first user message (a developer's instructions, an opening
// greeting), which are never cut, then msgs[from:], from the keep-th user
// message (isUser tells which) on; users is how many user messages are
// left out. Without a compaction, or when there are fewer user messages
// than keep, every message goes (lead = from = start).
func keptFrom(n, start, keep int, isUser func(i int) bool) (lead, from, users int) {
	if keep <= 0 {
		return start, start, 0
	}
	lead = -1
	for i := start; i < n; i++ {
		if !isUser(i) {
			continue
		}
		if lead < 0 {
			lead = i
		}
		if users == keep {
			return lead, i, users
		}
		users++
	}
	return start, start, 0
}

// blockAt returns the memory block of the user-th user message, or "".
func blockAt(blocks []memory.Block, user int) string {
	for _, b := range blocks {
		if b.User == user {
			return b.Text
		}
	}
	return ""
}

// prefixContent puts block before a message's content, which is a string
// or an array of parts: the first text part (of type partType) gets it,
// else a text part is put first. Content it cannot read is left alone.
func prefixContent(content json.RawMessage, block, partType string) json.RawMessage {
	c := bytes.TrimSpace(content)
	switch {
	case len(c) == 0 || string(c) == "null":
		return stringContent(block)
	case c[0] == '"':
		var s string
		if json.Unmarshal(c, &s) != nil {
			return content
		}
		return stringContent(block + s)
	case c[0] != '[':
		return content
	}
	var parts []map[string]json.RawMessage
	if json.Unmarshal(c, &parts) != nil {
		return content
	}
	for _, p := range parts {
		var typ, text string
		_ = json.Unmarshal(p["type"], &typ)
		if typ != partType || json.Unmarshal(p["text"], &text) != nil {
			continue
		}
		p["text"] = stringContent(block + text)
		out, err := Marshal(parts)
		if err != nil {
			return content
		}
		return out
	}
	first, _ := Marshal(map[string]string{"type": partType, "text": block})
	out, err := Marshal(append([]json.RawMessage{first}, rawParts(c)...))
	if err != nil {
		return content
	}
	return out
}

// rawParts splits a JSON array into its elements, as they are.
func rawParts(array []byte) []json.RawMessage {
	var parts []json.RawMessage
	_ = json.Unmarshal(array, &parts)
	return parts
}

// withField returns the JSON object obj with key set to v; obj as it is
// when it is not an object.
func withField(obj json.RawMessage, key string, v json.RawMessage) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(obj, &m) != nil || m == nil {
		return obj
	}
	m[key] = v
	out, err := Marshal(m)
	if err != nil {
		return obj
	}
	return out
}
