package curator

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const validAnswer = `{"new_curated_turns":[{"content":"User: a?\nAssistant: b","source_ids":["1"]}],"permanent_rules":[],"deletions":["2"],"summary":"s"}`

func FuzzParseAnswer(f *testing.F) {
	for _, s := range []string{validAnswer, "```json\n" + validAnswer + "\n```", "Sure: " + validAnswer + " {x}", "{", "}{", `{"a":"}"}`, "", "```"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, prefix string) {
		// Whatever comes before it, a valid answer is found and read the
		// same (unless the prefix itself holds a complete answer).
		a, err := ParseAnswer(prefix + "\n" + validAnswer)
		if err != nil {
			return
		}
		b, err := json.Marshal(a)
		require.NoError(t, err)
		again, err := ParseAnswer(string(b))
		require.NoError(t, err)
		assert.Equal(t, a, again)
	})
}

func TestParseAnswer(t *testing.T) {
	for _, in := range []string{validAnswer, "```json\n" + validAnswer + "\n```", "Here: {not json} then " + validAnswer + " and {more}."} {
		a, err := ParseAnswer(in)
		require.NoError(t, err, in)
		assert.Equal(t, []string{"2"}, a.Deletions)
	}
	for _, in := range []string{"", "nothing here", `{"new_curated_turns":[],"extra":1,"permanent_rules":[],"deletions":[],"summary":""}`} {
		_, err := ParseAnswer(in)
		assert.Error(t, err, in)
	}
}
