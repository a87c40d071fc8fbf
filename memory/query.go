package memory

import (
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/vera-proxy/vera/text"
)

// The query of recall: what the last messages ask about.

// semanticQuery builds the retrieval query from the last user message and
// the two messages before it: a follow-up such as "and what about her
// sister?" needs what came before (a message of its own, standaloneTerms,
// is its own query). The lexical query then repeats the last user message
// so its terms weigh double.
func semanticQuery(msgs []Message) (query, lexical string) {
	last := -1
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == "user" && strings.TrimSpace(msgs[i].Content) != "" {
			last = i
			break
		}
	}
	if last < 0 {
		return "", ""
	}
	var before []string
	for i := last - 1; i >= 0 && len(before) < 2; i-- {
		if r := msgs[i].Role; (r == "user" || r == "assistant") && strings.TrimSpace(msgs[i].Content) != "" {
			before = append(before, clip(msgs[i].Content, 1000))
		}
	}
	slices.Reverse(before)
	cur := clip(msgs[last].Content, 4000)
	if len(text.Terms(cur)) >= standaloneTerms {
		// A message that names what it is about stands on its own: with
		// the turns before, they would outweigh it (a question about a
		// fact told long ago, after many turns on another topic, would
		// find only those turns).
		return cur, cur
	}
	query = strings.Join(append(before, cur), "\n")
	lexical = strings.Join(append(before, cur, cur), "\n")
	return query, lexical
}

// standaloneTerms is how many words that are not stop words make a user
// message its own query: "what is my locker code?" has two, a follow-up
// such as "and what about her sister?" one.
const standaloneTerms = 2

// clip keeps the end of s (the most recent words of a long message) within
// n bytes, on a rune boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[len(s)-n:]
	for len(s) > 0 && !utf8.RuneStart(s[0]) {
		s = s[1:]
	}
	return s
}
