package curator

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/memory"
)

// curatorMem is a memory the curator wrote at at.
func curatorMem(id string, typ memory.Type, text string, at time.Time) memory.Memory {
	return memory.Memory{ID: id, Namespace: "alice", Type: typ, Text: text, Time: at, Metadata: map[string]any{
		"curated_at": at.UTC().Format(time.RFC3339), "source": map[string]any{"via": "curator"}}}
}

// A withheld memory erased while the rewrite asks the model stays erased:
// the rewrite reads it again before writing.
func TestEraseDuringARewriteStands(t *testing.T) {
	ctx := context.Background()
	var f *fixture
	erased := make(chan struct{})
	f = newFixture(t, func(ctx context.Context, system, user string) (string, error) {
		require.NoError(t, f.store.Delete(ctx, "cur1")) // DELETE /memories/cur1 meanwhile
		close(erased)
		return `{"rewritten":[{"id":"cur1","text":"User: where?\nAssistant: somewhere"}]}`, nil
	})
	src := curatorMem("src", memory.Curated, "User: a\nAssistant: secret", now.Add(-72*time.Hour))
	d := curatorMem("cur1", memory.Curated, "User: where?\nAssistant: secret place", now.Add(-48*time.Hour))
	require.NoError(t, f.store.Upsert(ctx, src, d))
	w, err := memory.NewWithheld(ctx, f.store, f.store)
	require.NoError(t, err)
	f.cur.Withheld = w
	ids, err := w.Removed(ctx, src)
	require.NoError(t, err)
	require.Contains(t, ids, "cur1")
	f.cur.RewriteWithheld(ctx, "alice")
	<-erased
	_, gerr := f.store.Get(ctx, "cur1")
	assert.Error(t, gerr, "erased memory must stay erased")
}

// A second removal while a rewrite runs: the memory derived from both
// stays withheld, as the rewrite never heard of the second.
func TestASecondRemovalDuringARewriteKeepsItWithheld(t *testing.T) {
	ctx := context.Background()
	var f *fixture
	var w *memory.Withheld
	r2 := curatorMem("r2", memory.Curated, "User: b\nAssistant: second secret", now.Add(-71*time.Hour))
	f = newFixture(t, func(ctx context.Context, system, user string) (string, error) {
		ids, err := w.Removed(ctx, r2) // forgotten while the model thinks
		require.NoError(t, err)
		assert.Contains(t, ids, "cur1")
		return `{"rewritten":[{"id":"cur1","text":"User: where?\nAssistant: second secret still here"}]}`, nil
	})
	r1 := curatorMem("r1", memory.Curated, "User: a\nAssistant: first secret", now.Add(-72*time.Hour))
	d := curatorMem("cur1", memory.Curated, "User: where?\nAssistant: first secret and second secret", now.Add(-48*time.Hour))
	require.NoError(t, f.store.Upsert(ctx, r1, r2, d))
	var err error
	w, err = memory.NewWithheld(ctx, f.store, f.store)
	require.NoError(t, err)
	f.cur.Withheld = w
	_, err = w.Removed(ctx, r1)
	require.NoError(t, err)
	f.cur.RewriteWithheld(ctx, "alice")
	assert.True(t, w.Is("cur1"), "cur1 was derived from r2 too and was never rewritten without it")
	m, err := f.store.Get(ctx, "cur1")
	require.NoError(t, err)
	assert.Contains(t, m.Text, "second secret", "rewritten from what was known then")
}

// A rule is never shown to the curator: forgetting one withholds no later
// curated memory.
func TestARuleIsNoCuratorInput(t *testing.T) {
	rule := curatorMem("rule", memory.Rule, "Answer in French.", now.Add(-400*24*time.Hour))
	later := curatorMem("c", memory.Curated, "User: x\nAssistant: y", now.Add(-24*time.Hour))
	assert.False(t, memory.DerivedFrom(later, rule), "a rule is never curator input")
}

// A failed rewrite leaves the profile withheld; the nightly run is not
// shown it, so the new profile it writes cannot carry it on.
func TestTheNightlyRunIsNotShownWhatIsWithheld(t *testing.T) {
	ctx := context.Background()
	var f *fixture
	var sawSecret bool
	f = newFixture(t, func(ctx context.Context, system, user string) (string, error) {
		if strings.Contains(system, "removed some memories") {
			return "not json", nil
		}
		sawSecret = sawSecret || strings.Contains(user, "SECRETFACT")
		profile := "Alice."
		if sawSecret {
			profile = "Alice. SECRETFACT carried on."
		}
		a := map[string]any{"new_curated_turns": []any{}, "permanent_rules": []any{}, "deletions": []any{}, "summary": "", "profile": profile}
		b, _ := json.Marshal(a)
		return string(b), nil
	})
	src := f.turns[1] // raw turn, in the window
	p := curatorMem("prof", memory.Profile, "Alice. SECRETFACT.", now.Add(-2*time.Hour))
	p.Metadata["curated_at"] = now.Add(-1 * time.Hour).Format(time.RFC3339)
	require.NoError(t, f.store.Upsert(ctx, p))
	w, err := memory.NewWithheld(ctx, f.store, f.store)
	require.NoError(t, err)
	f.cur.Withheld = w
	src.Hide(now)
	require.NoError(t, f.store.Upsert(ctx, src))
	ids, err := w.Removed(ctx, f.turns[1])
	require.NoError(t, err)
	require.Contains(t, ids, "prof")
	res := f.cur.Run(ctx, Options{})
	assert.Equal(t, 1, res.FailedBatches, "the rewrite failed")
	cur, err := memory.CurrentProfile(ctx, f.store, "alice")
	require.NoError(t, err)
	require.NotNil(t, cur)
	assert.False(t, sawSecret, "never shown")
	assert.False(t, strings.Contains(cur.Text, "SECRETFACT") && !w.Is(cur.ID), "withheld text reaches chats again")
}
