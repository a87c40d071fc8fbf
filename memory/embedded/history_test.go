package embedded

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/memory"
)

// The audit pages newest first, by namespace and since; a memory's
// history reads oldest first; a namespace's erasure leaves another's.
func TestHistoryPagesAndErases(t *testing.T) {
	ctx := context.Background()
	db := openQuiet(t, t.TempDir())
	t.Cleanup(func() { _ = db.Close() })
	t0 := time.Unix(1_800_000_000, 0).UTC()
	for i := range 7 {
		ns := "alice"
		if i%2 == 1 {
			ns = "bob"
		}
		require.NoError(t, db.AddHistory(ctx, memory.Entry{At: t0.Add(time.Duration(i) * time.Minute), Action: memory.Created,
			Actor: memory.ViaChat, ID: fmt.Sprintf("m%d", i), Namespace: ns}))
	}
	require.NoError(t, db.AddHistory(ctx, memory.Entry{At: t0.Add(time.Hour), Action: memory.Erased, Actor: memory.ViaAdmin, ID: "m0", Namespace: "alice"}))

	es, err := db.HistoryOf(ctx, "m0")
	require.NoError(t, err)
	require.Len(t, es, 2)
	assert.Equal(t, []string{"created", "erased"}, []string{es[0].Action, es[1].Action})
	assert.Equal(t, t0, es[0].At)

	var ids []string
	cursor := ""
	for {
		page, next, err := db.Audit(ctx, memory.AuditQuery{Namespace: "alice", Cursor: cursor, Limit: 2})
		require.NoError(t, err)
		for _, e := range page {
			ids = append(ids, e.ID+":"+e.Action)
		}
		if next == "" {
			break
		}
		cursor = next
	}
	assert.Equal(t, []string{"m0:erased", "m6:created", "m4:created", "m2:created", "m0:created"}, ids)

	page, _, err := db.Audit(ctx, memory.AuditQuery{Since: t0.Add(5 * time.Minute)})
	require.NoError(t, err)
	assert.Len(t, page, 3, "m5, m6 and the erasure")
	_, _, err = db.Audit(ctx, memory.AuditQuery{Cursor: "nope"})
	assert.ErrorIs(t, err, memory.ErrBadCursor)

	require.NoError(t, db.DeleteHistory(ctx, "alice"))
	page, _, err = db.Audit(ctx, memory.AuditQuery{})
	require.NoError(t, err)
	assert.Len(t, page, 3, "bob's stay")
	for _, e := range page {
		assert.Equal(t, "bob", e.Namespace)
	}
}
