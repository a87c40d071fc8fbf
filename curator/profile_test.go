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

// profileAnswer is an answer that curates nothing and writes profile.
func profileAnswer(profile string) string {
	b, _ := json.Marshal(map[string]any{"new_curated_turns": []any{}, "permanent_rules": []any{}, "deletions": []any{}, "summary": "s", "profile": profile})
	return string(b)
}

// profileInput reads the current profile the model was shown.
func profileInput(t *testing.T, user string) *promptProfile {
	t.Helper()
	var in struct {
		Profile *promptProfile `json:"current_profile"`
	}
	require.NoError(t, json.Unmarshal([]byte(user), &in))
	return in.Profile
}

// A run writes the namespace's profile; the next run is shown it, and
// its new profile replaces it while the old one stays as a past version.
func TestProfileIsWrittenThenUpdated(t *testing.T) {
	var shown []*promptProfile
	next := "Alice's sister Ana lives in Lisbon. Alice wants answers in French."
	f := newFixture(t, func(_ context.Context, system, user string) (string, error) {
		shown = append(shown, profileInput(t, user))
		assert.Contains(t, system, `"profile"`, "the prompt asks for it")
		return profileAnswer(next), nil
	})
	ctx := context.Background()
	res := f.cur.Run(ctx, Options{Namespace: "alice"})
	require.Equal(t, StatusOK, res.Status, res.Error)
	profiles := f.all(t, memory.Profile)
	require.Len(t, profiles, 1)
	assert.Equal(t, next, profiles[0].Text)
	assert.Nil(t, shown[0], "no profile yet")

	// New turns, a second run: it is shown the current profile and
	// replaces it; the first stays, superseded by the second.
	require.NoError(t, f.store.Upsert(ctx, memory.Memory{ID: memory.NewID(), Namespace: "alice", Type: memory.Raw,
		Text: "User: I start a job at the hospital on Monday\nAssistant: Congratulations!", Time: now.Add(-time.Hour)}))
	first := profiles[0]
	next = "Alice starts at the hospital on Monday. Her sister Ana lives in Lisbon."
	res = f.cur.Run(ctx, Options{Namespace: "alice"})
	require.Equal(t, StatusOK, res.Status, res.Error)
	require.NotNil(t, shown[len(shown)-1])
	assert.Equal(t, first.Text, shown[len(shown)-1].Text)
	assert.False(t, shown[len(shown)-1].WrittenByUser)

	current, err := f.cur.currentProfile(ctx, "alice")
	require.NoError(t, err)
	assert.Equal(t, next, current.Text)
	past, err := f.store.Get(ctx, first.ID)
	require.NoError(t, err)
	assert.Equal(t, memory.Profile, past.Type, "kept as a past version")
	assert.Equal(t, current.ID, past.Metadata["superseded_by"])
	assert.Empty(t, f.in(t, "bob", memory.Profile))
}

// A profile the user wrote by hand is shown as theirs, and survives a run
// whose answer brings nothing new (no profile).
func TestProfileByHandSurvivesARunWithNothingNew(t *testing.T) {
	var shown *promptProfile
	f := newFixture(t, func(_ context.Context, _, user string) (string, error) {
		shown = profileInput(t, user)
		return profileAnswer(""), nil
	})
	ctx := context.Background()
	mine := memory.Memory{ID: memory.NewID(), Namespace: "alice", Type: memory.Profile, Text: "Alice is a nurse.",
		Time: now.Add(-30 * time.Hour), Metadata: map[string]any{WrittenByUser: "user"}}
	require.NoError(t, f.store.Upsert(ctx, mine))
	res := f.cur.Run(ctx, Options{Namespace: "alice"})
	require.Equal(t, StatusOK, res.Status, res.Error)
	require.NotNil(t, shown)
	assert.True(t, shown.WrittenByUser)
	profiles := f.all(t, memory.Profile)
	require.Len(t, profiles, 1)
	assert.Equal(t, "Alice is a nurse.", profiles[0].Text)
}

// A profile corrected by hand while a run goes on is kept: the run's
// profile, made from the one before, is not written over it.
func TestProfileEditedDuringARunIsKept(t *testing.T) {
	var f *fixture
	ctx := context.Background()
	mine := memory.Memory{ID: memory.NewID(), Namespace: "alice", Type: memory.Profile, Text: "Alice is a nurse.", Time: now.Add(-30 * time.Hour)}
	f = newFixture(t, func(_ context.Context, _, _ string) (string, error) {
		edited := mine
		edited.Text, edited.Time = "Alice is a surgeon.", now
		require.NoError(t, f.store.Upsert(ctx, edited))
		return profileAnswer("Alice is a nurse with a sister in Lisbon."), nil
	})
	require.NoError(t, f.store.Upsert(ctx, mine))
	res := f.cur.Run(ctx, Options{Namespace: "alice"})
	require.Equal(t, StatusOK, res.Status, res.Error)
	current, err := f.cur.currentProfile(ctx, "alice")
	require.NoError(t, err)
	assert.Equal(t, "Alice is a surgeon.", current.Text)
}

// A dry run previews the profile and writes nothing; a long profile is
// cut to the budget.
func TestProfileDryRunAndBudget(t *testing.T) {
	long := strings.Repeat("Alice likes long walks by the sea. ", 40)
	f := newFixture(t, func(_ context.Context, _, _ string) (string, error) { return profileAnswer(long), nil })
	f.cur.ProfileTokens = 20
	ctx := context.Background()
	res := f.cur.Run(ctx, Options{Namespace: "alice", DryRun: true})
	require.Equal(t, StatusOK, res.Status, res.Error)
	assert.NotEmpty(t, res.Preview.Profile)
	assert.Empty(t, f.all(t, memory.Profile), "a dry run writes nothing")

	res = f.cur.Run(ctx, Options{Namespace: "alice"})
	require.Equal(t, StatusOK, res.Status, res.Error)
	profiles := f.all(t, memory.Profile)
	require.Len(t, profiles, 1)
	assert.LessOrEqual(t, f.cur.Tokens.Count(profiles[0].Text), 20)
	assert.Nil(t, res.Preview, "a run is no preview")
}
