package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/memory"
)

// The contract of the conversation plans a store keeps.

// testPlans checks that conversation plans are kept, read back, and dropped
// with the memories they carry.
func testPlans(ctx context.Context, t *testing.T, fresh func(*testing.T) memory.Store) {
	ps, ok := fresh(t).(memory.PlanStore)
	require.True(t, ok, "the store keeps conversations' plans")
	now := time.Now().UTC().Truncate(time.Millisecond)
	a := memory.Plan{ID: "conv-a", Namespace: "a", Keys: []string{memory.PlanKey("k1"), memory.PlanKey("k2")},
		Memories: []string{"m1", "m2"}, Rev: 1, Used: now, Body: []byte(`{"plan":"a"}`)}
	b := memory.Plan{ID: "conv-b", Namespace: "b", Keys: []string{memory.PlanKey("k3")}, Memories: []string{"m2", "m3"}, Rev: 1, Used: now, Body: []byte(`{"plan":"b"}`)}
	require.NoError(t, ps.SavePlan(ctx, a))
	require.NoError(t, ps.SavePlan(ctx, b))
	got, err := ps.LoadPlan(ctx, memory.PlanKey("k2"))
	require.NoError(t, err)
	assert.Equal(t, a.ID, got.ID)
	assert.Equal(t, a.Namespace, got.Namespace)
	assert.Equal(t, a.Body, got.Body)
	assert.Equal(t, uint64(1), got.Rev)
	assert.True(t, now.Equal(got.Used), "%v %v", now, got.Used)
	_, err = ps.LoadPlan(ctx, memory.PlanKey("nope"))
	assert.ErrorIs(t, err, memory.ErrNotFound)

	// A save replaces by id; its keys move with it.
	a.Rev, a.Body, a.Keys = 2, []byte(`{"plan":"a2"}`), []string{memory.PlanKey("k1"), memory.PlanKey("k4")}
	a.Used = now.Add(time.Second)
	require.NoError(t, ps.SavePlan(ctx, a))
	got, err = ps.LoadPlan(ctx, memory.PlanKey("k4"))
	require.NoError(t, err)
	assert.Equal(t, uint64(2), got.Rev)
	assert.Equal(t, `{"plan":"a2"}`, string(got.Body))

	// A key saved with another plan moves to it, and the plan it left
	// no longer answers to it, even once the new one is dropped.
	c := memory.Plan{ID: "conv-c", Namespace: "a", Keys: []string{memory.PlanKey("k4")}, Memories: []string{"m7"}, Rev: 1, Used: now.Add(2 * time.Second), Body: []byte(`{"plan":"c"}`)}
	require.NoError(t, ps.SavePlan(ctx, c))
	got, err = ps.LoadPlan(ctx, memory.PlanKey("k4"))
	require.NoError(t, err)
	assert.Equal(t, "conv-c", got.ID)
	_, err = ps.DropPlans(ctx, "", "m7")
	require.NoError(t, err)
	_, err = ps.LoadPlan(ctx, memory.PlanKey("k4"))
	assert.ErrorIs(t, err, memory.ErrNotFound, "the older plan let go of the key")
	got, err = ps.LoadPlan(ctx, memory.PlanKey("k1"))
	require.NoError(t, err)
	assert.Equal(t, "conv-a", got.ID, "and keeps its others")

	// A plan unused for PlanTTL is not found.
	old := memory.Plan{ID: "conv-old", Namespace: "a", Keys: []string{memory.PlanKey("k9")}, Rev: 1, Used: now.Add(-memory.PlanTTL - time.Hour), Body: []byte(`{}`)}
	require.NoError(t, ps.SavePlan(ctx, old))
	_, err = ps.LoadPlan(ctx, memory.PlanKey("k9"))
	assert.ErrorIs(t, err, memory.ErrNotFound)

	// Deleting a memory drops every plan that carries it.
	n, err := ps.DropPlans(ctx, "", "m2")
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	for _, k := range []string{"k1", "k3"} {
		_, err = ps.LoadPlan(ctx, memory.PlanKey(k))
		assert.ErrorIs(t, err, memory.ErrNotFound, k)
	}

	// A namespace forgotten drops its plans only.
	require.NoError(t, ps.SavePlan(ctx, a))
	require.NoError(t, ps.SavePlan(ctx, b))
	n, err = ps.DropPlans(ctx, "a")
	require.NoError(t, err)
	assert.Equal(t, 2, n, "conv-a and the expired conv-old: conv-c went with its memory")
	_, err = ps.LoadPlan(ctx, memory.PlanKey("k1"))
	assert.ErrorIs(t, err, memory.ErrNotFound)
	_, err = ps.LoadPlan(ctx, memory.PlanKey("k3"))
	assert.NoError(t, err)
}
