package memory

import (
	"strings"
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
// block, and whether it changed. Most texts hold none of the markers and
// are returned as they are, after one pass over their bytes.
func frame(text string) (string, bool) {
	if !mayPose(text) {
		return text, false
	}
	var b strings.Builder
	b.Grow(len(text) + 16)
	changed := false
	for rest := text; ; {
		line, more, found := strings.Cut(rest, "\n")
		if posesAsHeader(line) {
			b.WriteString(quotedMark)
			changed = true
		}
		if esc, ok := escapeTags(line); ok {
			line, changed = esc, true
		}
		b.WriteString(line)
		if !found {
			break
		}
		b.WriteByte('\n')
		rest = more
	}
	if !changed {
		return text, false
	}
	return b.String(), true
}

// mayPose is frame's fast path: false when text holds no '<', no '[' and
// no "earlier" in any case, so none of the markers.
func mayPose(text string) bool {
	return strings.ContainsAny(text, "<[") || indexFold(text, "earlier") >= 0
}

// posesAsHeader reports whether line, past white space and markdown
// marks, starts with one of vera's headers or is a date header.
func posesAsHeader(line string) bool {
	t := strings.TrimLeft(line, " \t#>*-_•\"'`")
	t = strings.TrimRight(t, " \t\r")
	if isDateHeader(t) {
		return true
	}
	for _, h := range headers {
		if len(t) >= len(h) && strings.EqualFold(t[:len(h)], h) {
			return true
		}
	}
	return false
}

// isDateHeader reports whether t is "[YYYY-MM-DD]" alone, the header of a
// day in the semantic layer.
func isDateHeader(t string) bool {
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

// escapeTags writes "<memories" and "</memories" in line, in any case,
// as "&lt;memories" and "&lt;/memories".
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
		tag := strings.TrimPrefix(rest, "/")
		if len(tag) >= len("memories") && strings.EqualFold(tag[:len("memories")], "memories") {
			if !changed {
				b.Grow(len(line) + 8)
			}
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

// indexFold is strings.Index ignoring ASCII case, for an ASCII lower-case
// sub.
func indexFold(s, sub string) int {
	n := len(sub)
	for i := 0; i+n <= len(s); i++ {
		c := s[i]
		if c >= utf8.RuneSelf || c|0x20 != sub[0] {
			continue
		}
		if strings.EqualFold(s[i:i+n], sub) {
			return i
		}
	}
	return -1
}
