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

// The curator's answer marks a curated memory, a rule or the profile
// private; one it leaves unmarked is still marked by the detectors when
// it holds what they find; the others are not private.
func TestTheCuratorMarksMemoriesPrivate(t *testing.T) {
	ctx := context.Background()
	var f *fixture
	f = newFixture(t, func(context.Context, string, string) (string, error) {
		b, _ := json.Marshal(map[string]any{
			"new_curated_turns": []map[string]any{
				{"content": "User: What did the doctor say?\nAssistant: Ana was diagnosed with diabetes.", "source_ids": []string{f.turns[1].ID}, "private": true},
				{"content": "User: What is my bank login?\nAssistant: Your password is Hunter2-secret.", "source_ids": []string{f.turns[2].ID}},
				{"content": "User: Where does Ana live?\nAssistant: In Lisbon.", "source_ids": []string{f.turns[1].ID}},
			},
			"permanent_rules": []map[string]any{{"rule": "Never mention Ana's debts.", "target_file": "systemprompt.md", "private": true}},
			"deletions":       []string{}, "summary": "s",
			"profile": "Alice, whose sister Ana has diabetes.", "profile_private": true,
		})
		return string(b), nil
	})
	res := f.cur.Run(ctx, Options{})
	require.Equal(t, StatusOK, res.Status, res.Error)
	all, _, err := f.store.Scroll(ctx, memory.Filter{Namespace: "alice", Types: []memory.Type{memory.Curated, memory.Rule, memory.Profile}}, "", 100)
	require.NoError(t, err)
	why := map[string][]string{}
	for _, m := range all {
		if memory.IsPrivate(m) {
			why[m.Text] = memory.PrivateWhy(m)
		}
	}
	find := func(part string) []string {
		for text, w := range why {
			if strings.Contains(text, part) {
				return w
			}
		}
		return nil
	}
	assert.Equal(t, []string{"curator"}, find("diagnosed"))
	assert.Equal(t, []string{"password"}, find("Hunter2"), "a missing mark: the detectors")
	assert.Equal(t, []string{"curator"}, find("debts"))
	assert.Equal(t, []string{"curator"}, find("Alice, whose sister"))
	assert.Nil(t, find("In Lisbon"), "not private")
}
