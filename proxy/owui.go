package proxy

import (
	"fmt"
	"strings"

	"github.com/vera-proxy/vera/dialect"
	"github.com/vera-proxy/vera/memory"
)

// Open WebUI's own memory. With "Memory" on in a user's settings, Open
// WebUI's chat_memory_handler (backend/open_webui/utils/middleware.py)
// appends its best memories for the last user message to the system
// message (or makes one), with add_or_update_system_message(append=True):
//
//	User Context:
//	1. [2025-03-14] Lives in Vienna
//	2. [Unknown Date] Has a dog named Rex
//	<blank line>
//
// It appends the heading even when it found nothing ("User Context:\n\n").
// A fact is a memory's text, which may run over several lines.

// owuiHeading opens the block.
const owuiHeading = "User Context:"

// Open WebUI's memory setting (memory.open_webui_memory).
const (
	OpenWebUIKeep = "keep" // forward the block as the client sent it
	OpenWebUIDrop = "drop" // remove it: the user's memory is vera's
)

// owuiBlock is Open WebUI's memory block found in a chat's system
// messages.
type owuiBlock struct {
	facts []string
}

// findOWUI looks for Open WebUI's memory block in the leading system
// messages of msgs: the facts it carries, and msgs without it (a copy,
// when it was found).
func findOWUI(msgs []memory.Message) (*owuiBlock, []memory.Message) {
	var found *owuiBlock
	out := msgs
	for i, m := range msgs {
		if m.Role != "system" {
			break
		}
		// Open WebUI appends the block to each text part of a message
		// whose content is a list: every block goes.
		rest, facts, ok := cutOWUI(m.Content)
		for more := ok; more; {
			var again []string
			if rest, again, more = cutOWUI(rest); more {
				facts = append(facts, again...)
			}
		}
		if !ok {
			continue
		}
		if found == nil {
			found = &owuiBlock{}
			out = append([]memory.Message(nil), msgs...)
		}
		found.facts = append(found.facts, facts...)
		out[i].Content = rest
	}
	return found, out
}

// cutOWUI finds the block in a system message's text: the text without
// it, and its facts. Only a heading on a line of its own, followed by
// numbered dated lines (or none), is the block: a system prompt that
// merely says "User Context:" keeps its words.
func cutOWUI(text string) (rest string, facts []string, ok bool) {
	from := 0
	for {
		i := strings.Index(text[from:], owuiHeading)
		if i < 0 {
			return text, nil, false
		}
		start := from + i
		from = start + len(owuiHeading)
		if start > 0 && text[start-1] != '\n' || !strings.HasPrefix(text[from:], "\n") {
			continue // not a heading of its own
		}
		end, facts, ok := owuiFacts(text, from+1)
		if !ok {
			continue
		}
		// add_or_update_system_message joined it to the text before with
		// one newline.
		head := strings.TrimSuffix(text[:start], "\n")
		tail := text[end:]
		switch {
		case head == "":
			return strings.TrimLeft(tail, "\n"), facts, true
		case strings.TrimSpace(tail) == "":
			return head, facts, true
		}
		return head + "\n" + strings.TrimLeft(tail, "\n"), facts, true
	}
}

// owuiFacts reads the numbered lines from at, up to the blank line that
// ends the block (or the text's end): where the block ends, and its
// facts. ok is false when a line before that blank is neither a fact
// nor the continuation of one.
func owuiFacts(text string, at int) (end int, facts []string, ok bool) {
	var cur strings.Builder
	flush := func() {
		if f := strings.TrimSpace(cur.String()); f != "" {
			facts = append(facts, f)
		}
		cur.Reset()
	}
	for at < len(text) {
		line, next := text[at:], len(text)
		if nl := strings.IndexByte(line, '\n'); nl >= 0 {
			line, next = line[:nl], at+nl+1
		}
		if strings.TrimSpace(line) == "" {
			if cur.Len() > 0 && numberedOn(text, next, len(facts)+2) {
				// A memory of several paragraphs: the next fact is
				// numbered on from this one.
				cur.WriteString("\n")
				at = next
				continue
			}
			flush()
			return next, facts, true
		}
		if fact, isFact := owuiFact(line); isFact {
			flush()
			cur.WriteString(fact)
		} else if cur.Len() > 0 {
			cur.WriteString("\n" + line) // a memory of several lines
		} else {
			return 0, nil, false
		}
		at = next
	}
	flush()
	return len(text), facts, true
}

// numberedOn reports whether the first fact line after at, within
// owuiLookahead bytes, is numbered want: the text between belongs to the
// fact before (a memory of several paragraphs).
func numberedOn(text string, at, want int) bool {
	limit := min(len(text), at+owuiLookahead)
	for at < limit {
		line, next := text[at:limit], limit
		if nl := strings.IndexByte(line, '\n'); nl >= 0 {
			line, next = line[:nl], at+nl+1
		}
		if _, ok := owuiFact(line); ok {
			s := strings.TrimLeft(line, " \t")
			n := 0
			for i := 0; i < len(s) && i < 4 && s[i] >= '0' && s[i] <= '9'; i++ {
				n = n*10 + int(s[i]-'0')
			}
			return n == want
		}
		at = next
	}
	return false
}

// owuiLookahead bounds how far a blank line inside a fact looks for the
// next one.
const owuiLookahead = 4 << 10

// owuiFact reads one fact line: "N. [YYYY-MM-DD] text" (a date may carry a
// time, or read "Unknown Date"), or "- [date] text".
func owuiFact(line string) (string, bool) {
	s := strings.TrimLeft(line, " \t")
	switch {
	case strings.HasPrefix(s, "- "), strings.HasPrefix(s, "* "):
		s = s[2:]
	default:
		n := 0
		for n < len(s) && n < 4 && s[n] >= '0' && s[n] <= '9' {
			n++
		}
		if n == 0 || n >= len(s) || s[n] != '.' && s[n] != ')' {
			return "", false
		}
		s = strings.TrimLeft(s[n+1:], " ")
	}
	if !strings.HasPrefix(s, "[") {
		return "", false
	}
	closing := strings.IndexByte(s, ']')
	if closing < 0 || !owuiDate(s[1:closing]) {
		return "", false
	}
	return strings.TrimSpace(s[closing+1:]), true
}

// owuiDate reports whether d is a fact's date: "Unknown Date", or
// YYYY-MM-DD with an optional time after it.
func owuiDate(d string) bool {
	if d == "Unknown Date" {
		return true
	}
	if len(d) < 10 {
		return false
	}
	for i, r := range d[:10] {
		switch {
		case i == 4 || i == 7:
			if r != '-' {
				return false
			}
		case r < '0' || r > '9':
			return false
		}
	}
	return len(d) == 10 || d[10] == ' ' || d[10] == 'T'
}

// dropOWUI takes Open WebUI's block out of the request itself, under
// OpenWebUIDrop, before anything reads it: what is forwarded, to Ollama or
// to a fallback, never holds it. The leading system messages become one,
// as the builder's would; none when only the block was in them, so that
// Ollama applies the Modelfile's SYSTEM as without it.
func (pl *pipeline) dropOWUI(ch *chat) error {
	if ch.owui == nil || pl.owuiMemory != OpenWebUIDrop {
		return nil
	}
	mc := &memory.Context{}
	var sys []string
	for _, m := range ch.msgs {
		if m.Role != "system" {
			break
		}
		mc.SystemReplaces++
		if strings.TrimSpace(m.Content) != "" {
			sys = append(sys, m.Content)
		}
	}
	mc.System = strings.Join(sys, "\n\n")
	forward := ch.req.WithMemory(mc)
	if forward == nil {
		return nil
	}
	body, err := dialect.Marshal(forward)
	if err != nil {
		return fmt.Errorf("encoding the chat request: %w", err)
	}
	req, err := ch.d.Parse(body)
	if err != nil {
		return fmt.Errorf("reading the chat request without Open WebUI's memory: %w", err)
	}
	ch.body, ch.req, ch.msgs = body, req, req.MemoryMessages()
	return nil
}
