package curator

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/memory"
)

// What the curator's model writes is capped at memory.max_turn_tokens as
// a chat's turn is: a rule, the profile (even with a profile budget above
// the cap) and a curated memory keep their head and tail around a "[…]"
// marker. The old curator stored a rule of any length, and a 3.9 MB rule
// joined every chat of its namespace.
func TestCuratorCapsWhatItWrites(t *testing.T) {
	const limit = 64
	long := func(head, tail string) string {
		return head + strings.Repeat(" and the middle goes on and on", 2000) + tail
	}
	tests := []struct {
		name   string
		answer func(f *fixture) map[string]any
		typ    memory.Type
		head   string
		tail   string
	}{
		{"a rule", func(*fixture) map[string]any {
			return map[string]any{"permanent_rules": []map[string]any{{"rule": long("Always answer in French", "or else."), "target_file": "systemprompt.md"}}}
		}, memory.Rule, "Always answer in French", "or else."},
		{"the profile", func(*fixture) map[string]any {
			return map[string]any{"profile": long("Alice is a nurse", "in Lisbon.")}
		}, memory.Profile, "Alice is a nurse", "in Lisbon."},
		{"a curated memory", func(f *fixture) map[string]any {
			return map[string]any{"new_curated_turns": []map[string]any{{
				"content": "User: Where does my sister live?\nAssistant: " + long("Ana lives", "in Lisbon."), "source_ids": []string{f.turns[1].ID}}}}
		}, memory.Curated, "User: Where does my sister live?\nAssistant: Ana lives", "in Lisbon."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var f *fixture
			f = newFixture(t, func(context.Context, string, string) (string, error) {
				a := map[string]any{"new_curated_turns": []any{}, "permanent_rules": []any{}, "deletions": []any{}, "summary": "s"}
				for k, v := range tt.answer(f) {
					a[k] = v
				}
				b, _ := json.Marshal(a)
				return string(b), nil
			})
			f.cur.MaxTokens = limit
			f.cur.ProfileTokens = 1000 // above the cap: the cap still holds
			res := f.cur.Run(context.Background(), Options{Namespace: "alice"})
			require.Equal(t, StatusOK, res.Status, res.Error)

			var got *memory.Memory
			for _, m := range f.all(t, tt.typ) {
				if m.Model == f.cur.ModelName {
					got = &m
				}
			}
			require.NotNil(t, got, "written")
			assert.LessOrEqual(t, f.cur.Tokens.Count(got.Text), limit, "within the cap")
			assert.Equal(t, f.cur.Tokens.Count(got.Text), got.Tokens, "its count is its text's")
			assert.Contains(t, got.Text, "[…]", "the cut is marked")
			assert.True(t, strings.HasPrefix(got.Text, tt.head), got.Text)
			assert.True(t, strings.HasSuffix(got.Text, tt.tail), got.Text)
		})
	}
}
