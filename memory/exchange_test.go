package memory

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestParseExchange(t *testing.T) {
	for _, tc := range []struct {
		name, text, user, assistant string
		ok                          bool
	}{
		{"raw turn", "User: hi\nAssistant: hello", "hi", "hello", true},
		{"multi-line sides", "User: line one\nline two\nAssistant: a\n\nb", "line one\nline two", "a\n\nb", true},
		{"crlf", "User: hi\r\nAssistant: hello\r\n", "hi", "hello", true},
		{"vera-ai timestamp line dropped", "User: hi\nAssistant: hello\nTimestamp: 2026-01-01T00:00:00Z", "hi", "hello", true},
		{"assistant word inside user text", "User: my Assistant: Bob\nAssistant: ok", "my Assistant: Bob", "ok", true},
		{"free form", "The user's cat is called Miso.", "", "", false},
		{"no answer", "User: hi", "", "", false},
		{"empty answer", "User: hi\nAssistant:   ", "", "", false},
		{"empty user", "User:\nAssistant: x", "", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, a, ok := ParseExchange(tc.text)
			assert.Equal(t, tc.ok, ok)
			assert.Equal(t, tc.user, u)
			assert.Equal(t, tc.assistant, a)
		})
	}
}

func FuzzParseExchange(f *testing.F) {
	f.Add("hi", "hello")
	f.Add("a\nb", "Timestamp: x")
	f.Add("", "x")
	f.Add("User: nested", "Assistant: nested")
	f.Fuzz(func(t *testing.T, user, assistant string) {
		text := FormatExchange(user, assistant)
		u, a, ok := ParseExchange(text)
		// Parsing any text never panics, and what it returns is trimmed.
		_, _, _ = ParseExchange(user)
		if !ok {
			return
		}
		assert.Equal(t, strings.TrimSpace(u), u)
		assert.Equal(t, strings.TrimSpace(a), a)
		// A turn whose sides hold no line starting "Assistant:" or
		// "Timestamp:" comes back exactly.
		clean := func(s string) bool {
			return !strings.Contains(s, "\nAssistant:") && !strings.Contains(s, "\nTimestamp:") &&
				!strings.HasPrefix(strings.TrimSpace(s), "Assistant:") && !strings.Contains(s, "\r")
		}
		if clean(user) && clean(assistant) && strings.TrimSpace(user) != "" && strings.TrimSpace(assistant) != "" {
			assert.Equal(t, strings.TrimSpace(user), u)
			assert.Equal(t, strings.TrimSpace(assistant), a)
		}
	})
}
