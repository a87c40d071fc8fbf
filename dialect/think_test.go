package dialect

import (
	"io"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestStripThink(t *testing.T) {
	for in, want := range map[string]string{
		"<think>hmm, the user wants x</think>\n\nHere is x.": "Here is x.",
		"Before <think>a</think>after":                       "Before after",
		"no tags at all":                                     "no tags at all",
		"a < b and <thin":                                    "a < b and <thin",
		"<think>never closed":                                "",
		"1<think>a</think>2<think>b</think>3":                "123",
	} {
		assert.Equal(t, want, StripThink(in), in)
	}
}

// thinkRef is the filter's specification: blocks removed, with the line
// breaks that follow a closed block; an unclosed block hides the rest.
var thinkRef = regexp.MustCompile(`(?s)<think>.*?</think>[\r\n]*`)

func refStrip(s string) string {
	s = thinkRef.ReplaceAllString(s, "")
	if i := strings.Index(s, thinkOpen); i >= 0 {
		s = s[:i]
	}
	return s
}

// FuzzThinkFilter: however the text comes split, what the client sees is
// the text without its blocks.
func FuzzThinkFilter(f *testing.F) {
	f.Add("<think>plan</think>\n\nAnswer.", 3)
	f.Add("a<thi", 1)
	f.Add("<think>x</thi", 2)
	f.Add("x</think>y<think>z", 4)
	f.Fuzz(func(t *testing.T, s string, size int) {
		if size <= 0 {
			size = 1
		}
		var fl thinkFilter
		var out strings.Builder
		for rest := s; rest != ""; {
			n := min(size, len(rest))
			out.WriteString(fl.feed(rest[:n]))
			rest = rest[n:]
		}
		out.WriteString(fl.flush())
		want := refStrip(s)
		if out.String() != want {
			t.Fatalf("split %d of %q: got %q, want %q", size, s, out.String(), want)
		}
	})
}

func TestThinkNDJSON(t *testing.T) {
	stream := `{"model":"m","message":{"role":"assistant","content":"<thi"},"done":false}` + "\n" +
		`{"model":"m","message":{"role":"assistant","content":"nk>let me see</th"},"done":false}` + "\n" +
		`{"model":"m","message":{"role":"assistant","content":"ink>\nHello"},"done":false}` + "\n" +
		`{"model":"m","message":{"role":"assistant","content":" there."},"done":false}` + "\n" +
		`{"model":"m","message":{"role":"assistant","content":""},"done":true}` + "\n"
	b, err := io.ReadAll(newThinkNDJSON(io.NopCloser(strings.NewReader(stream)), true))
	require.NoError(t, err)
	assert.NotContains(t, string(b), "let me see")
	assert.NotContains(t, string(b), "think>")
	var text strings.Builder
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		i := strings.Index(line, `"content":"`)
		j := strings.Index(line[i+11:], `"`)
		text.WriteString(line[i+11 : i+11+j])
	}
	assert.Equal(t, "Hello there.", text.String())
	b, err = io.ReadAll(newThinkNDJSON(io.NopCloser(strings.NewReader(`{"model":"m","response":"<think>x</think>Hi","done":true}`)), false))
	require.NoError(t, err)
	assert.JSONEq(t, `{"model":"m","response":"Hi","done":true}`, string(b))
}

func TestThinkSSE(t *testing.T) {
	stream := "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"<thi\"}}]}\n\n" +
		": keep-alive\n\n" +
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"nk>plan</think>\\n\\nHel\"}}]}\r\n\r\n" +
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"lo <\"}}]}\n\n" +
		"data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n" +
		"data: [DONE]\n\n"
	b, err := io.ReadAll(newThinkSSE(io.NopCloser(strings.NewReader(stream)), true))
	require.NoError(t, err)
	out := string(b)
	assert.NotContains(t, out, "plan")
	assert.Contains(t, out, ": keep-alive\n\n")
	assert.Contains(t, out, "data: [DONE]\n\n")
	assert.Contains(t, out, "\r\n\r\n", "line ends kept")
	var text strings.Builder
	for _, line := range strings.Split(out, "\n") {
		if i := strings.Index(line, `"content":"`); i >= 0 {
			rest := line[i+len(`"content":"`):]
			text.WriteString(rest[:strings.Index(rest, `"`)])
		}
	}
	assert.Equal(t, "Hello <", text.String(), "a held '<' that never became a tag comes back at the end")
	b, err = io.ReadAll(newThinkSSE(io.NopCloser(strings.NewReader(`{"choices":[{"message":{"role":"assistant","content":"<think>x</think>Hi"},"finish_reason":"stop"}]}`)), false))
	require.NoError(t, err)
	assert.JSONEq(t, `{"choices":[{"message":{"role":"assistant","content":"Hi"},"finish_reason":"stop"}]}`, string(b))
}
