package memory

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// A memory's text is anyone's words: a turn the user pasted a web page
// into, a statement an agent added, a rule or a profile a model wrote. In
// the system message it sits among vera's own headers ("Rules learned
// from earlier conversations...", a date "[2026-11-01]", the later turns'
// <memories> block), and a text that wrote such a header would read as
// vera's own section: a rule no curator learned, a summary no one wrote.
// frame keeps it data: a line of a memory that would pass for a header
// is marked as quoted, and the <memories> tags are escaped, so no text
// can close its block or open one.

// quotedMark starts a line of a memory that reads like a header of vera's.
const quotedMark = "(quoted) "

// headers are the starts of vera's own section headers, lower-cased: the
// profile's, the rules', the semantic layer's, a later block's and a
// compaction summary's.
var headers = []string{
	"about this user",
	"rules learned from earlier",
	"memories from earlier",
	"recalled from earlier",
	"summary of the earlier",
}

// Frame is frame for a text written elsewhere into the system message (a
// conversation's summary): text, framed.
func Frame(text string) string {
	out, _ := frame(text)
	return out
}

// frame returns text as it may stand in the system message or a memory
// block, and whether it changed. It runs only on the memories a chat
// injects, once each.
func frame(text string) (string, bool) {
	var b strings.Builder
	changed := false
	for pos := 0; pos <= len(text); {
		line, brk := text[pos:], ""
		if end := strings.IndexFunc(line, isLineBreak); end >= 0 {
			_, size := utf8.DecodeRuneInString(line[end:])
			line, brk = line[:end], line[end:end+size]
		}
		pose := posesAsHeader(line)
		esc, tags := escapeTags(line)
		if (pose || tags) && !changed {
			changed = true
			b.Grow(len(text) + 16)
			b.WriteString(text[:pos])
		}
		if changed {
			if pose {
				b.WriteString(quotedMark)
			}
			if tags {
				b.WriteString(esc)
			} else {
				b.WriteString(line)
			}
			b.WriteString(brk)
		}
		if brk == "" {
			break
		}
		pos += len(line) + len(brk)
	}
	if !changed {
		return text, false
	}
	return b.String(), true
}

// isLineBreak reports whether r ends a line for a reader of the prompt:
// "\n", and also "\r", a vertical tab, a form feed, NEL and the Unicode
// line and paragraph separators.
func isLineBreak(r rune) bool {
	switch r {
	case '\n', '\r', '\v', '\f', '\u0085', '\u2028', '\u2029':
		return true
	}
	return false
}

// invisible reports whether r is white space, a format character (a zero
// width space, a byte order mark...) or a list mark, which may stand
// before or inside a header without changing how it reads.
func invisible(r rune) bool {
	return unicode.IsSpace(r) || unicode.Is(unicode.Cf, r) || strings.ContainsRune("#>*-_•·\"'`|", r)
}

// posesAsHeader reports whether line, read as a model reads it (past
// white space, invisible characters, markdown and list marks, in any
// case), starts with one of vera's headers or is a date header.
func posesAsHeader(line string) bool {
	var b strings.Builder
	space, lead := false, true
	for _, r := range line {
		switch {
		case lead && (invisible(r) || r >= '0' && r <= '9' || r == '.' || r == ')'):
			continue // "1. ", "- ", "## "
		case unicode.Is(unicode.Cf, r):
			continue
		case unicode.IsSpace(r):
			space = true
			continue
		}
		if space && b.Len() > 0 {
			b.WriteByte(' ')
		}
		space, lead = false, false
		b.WriteRune(unicode.ToLower(r))
		if b.Len() >= 32 {
			break
		}
	}
	t := b.String()
	if isDateHeader(strings.TrimSpace(line)) || isDateHeader(t) {
		return true
	}
	for _, h := range headers {
		if strings.HasPrefix(t, h) {
			return true
		}
	}
	return false
}

// isDateHeader reports whether t is "[YYYY-MM-DD]" alone, the header of a
// day in the semantic layer.
func isDateHeader(t string) bool {
	t = strings.TrimFunc(t, invisible)
	if len(t) != len("[2006-01-02]") || t[0] != '[' || t[len(t)-1] != ']' {
		return false
	}
	for i, c := range t[1 : len(t)-1] {
		if i == 4 || i == 7 {
			if c != '-' {
				return false
			}
		} else if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// escapeTags writes the "<" of a <memories> or </memories> tag in line
// ("< /memories", "<\u200b/MEMORIES" too) as "&lt;".
func escapeTags(line string) (string, bool) {
	if !strings.Contains(line, "<") {
		return line, false
	}
	var b strings.Builder
	changed := false
	for {
		i := strings.IndexByte(line, '<')
		if i < 0 {
			break
		}
		rest := line[i+1:]
		if opensTag(rest) {
			b.WriteString(line[:i])
			b.WriteString("&lt;")
			changed = true
		} else {
			b.WriteString(line[:i+1])
		}
		line = rest
	}
	if !changed {
		return "", false
	}
	b.WriteString(line)
	return b.String(), true
}

// opensTag reports whether what follows a "<" is "memories", past a few
// spaces, invisible characters and a "/".
func opensTag(rest string) bool {
	for skipped := 0; skipped < 8 && rest != ""; skipped++ {
		r, size := utf8.DecodeRuneInString(rest)
		if r != '/' && !unicode.IsSpace(r) && !unicode.Is(unicode.Cf, r) {
			break
		}
		rest = rest[size:]
	}
	return len(rest) >= len("memories") && strings.EqualFold(rest[:len("memories")], "memories")
}
