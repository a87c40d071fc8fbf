package memory_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/vera-proxy/vera/memory"
)

func TestDerivedFrom(t *testing.T) {
	run1 := time.Date(2026, 11, 20, 3, 0, 0, 0, time.UTC)
	run2 := run1.Add(24 * time.Hour)
	turn := func(id, chat string, at time.Time) memory.Memory {
		return memory.Memory{ID: id, Type: memory.Raw, Time: at, Metadata: map[string]any{"source": map[string]any{"via": "chat", "chat_id": chat}}}
	}
	curated := func(id string, typ memory.Type, run time.Time, chats []any, from, until time.Time, sources ...any) memory.Memory {
		return memory.Memory{ID: id, Type: typ, Time: until, Metadata: map[string]any{
			"curated_at": run.Format(time.RFC3339), "source_ids": sources,
			"source": map[string]any{"via": "curator", "chats": chats, "from": from.Format(time.RFC3339), "until": until.Format(time.RFC3339)}}}
	}
	t1 := turn("t1", "trip", run1.Add(-2*time.Hour))
	t2 := turn("t2", "work", run1.Add(-time.Hour))
	a := curated("a", memory.Curated, run1, []any{"trip"}, t1.Time, t1.Time, "t1")
	b := curated("b", memory.Curated, run1, []any{"work"}, t2.Time, t2.Time, "t2")
	b2 := curated("b2", memory.Curated, run1, []any{"trip"}, t1.Time, t1.Time, "t1")
	later := curated("later", memory.Curated, run2, []any{"work"}, run2.Add(-time.Hour), run2.Add(-time.Hour), "t9")
	told := curated("told", memory.Curated, run2, []any{"work"}, run2.Add(-time.Hour), run2.Add(-time.Hour), "t8")
	told.Metadata[memory.MetaSeen] = []any{"b"}
	rule := curated("rule", memory.Rule, run1, []any{"trip"}, t1.Time, t1.Time, "t7")
	profile := memory.Memory{ID: "p", Type: memory.Profile, Time: run1, Metadata: map[string]any{"source": map[string]any{"via": "curator"}}}
	older := memory.Memory{ID: "p0", Type: memory.Profile, Time: run1.Add(-48 * time.Hour), Metadata: profile.Metadata}

	for _, c := range []struct {
		name string
		d, r memory.Memory
		want bool
	}{
		{"the curated memory of the turn", a, t1, true},
		{"not one of another chat", b, t1, false},
		{"the profile of the same run", profile, a, true},
		{"the profile written since a turn", profile, t2, true},
		{"not a profile written before", older, a, false},
		{"not a sibling of the same run", b, a, false},
		{"a sibling from the same turn", b2, a, true},
		{"what a later run wrote, when it did not say what it was shown", later, a, true},
		{"not what a run wrote that was not shown it", told, a, false},
		{"what a run wrote that was shown it", told, b, true},
		{"not what was written after a rule (never shown)", later, rule, false},
		{"the profile of the rule's run", profile, rule, true},
		{"not itself", a, a, false},
	} {
		assert.Equal(t, c.want, memory.DerivedFrom(c.d, c.r), c.name)
	}
}
