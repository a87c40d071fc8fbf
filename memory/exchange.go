package memory

import "strings"

// FormatExchange renders a turn as the text that is stored, embedded and
// injected: the exchange itself, with no timestamp line (a date would only
// add noise to its embedding).
func FormatExchange(user, assistant string) string {
	return "User: " + strings.TrimSpace(user) + "\nAssistant: " + strings.TrimSpace(assistant)
}

// ParseExchange splits a stored text in "User: ...\nAssistant: ..." form (a
// raw turn, or a curated memory written by the curator) back into its two
// sides. The answer starts at the first line beginning with "Assistant:". A
// trailing "Timestamp: ..." line, as Vera-AI writes, is dropped. ok is false
// when text is not in that form (a free-form memory).
func ParseExchange(text string) (user, assistant string, ok bool) {
	text = strings.TrimSpace(strings.ReplaceAll(text, "\r\n", "\n"))
	rest, found := strings.CutPrefix(text, "User:")
	if !found {
		return "", "", false
	}
	var i int
	switch {
	case strings.HasPrefix(rest, "Assistant:"):
		i = 0
	default:
		j := strings.Index(rest, "\nAssistant:")
		if j < 0 {
			return "", "", false
		}
		i = j + 1
	}
	user = strings.TrimSpace(rest[:i])
	assistant = strings.TrimSpace(rest[i+len("Assistant:"):])
	if k := strings.LastIndex(assistant, "\nTimestamp:"); k >= 0 && !strings.Contains(assistant[k+1:], "\n") {
		assistant = strings.TrimSpace(assistant[:k])
	}
	if user == "" || assistant == "" {
		return "", "", false
	}
	return user, assistant, true
}
