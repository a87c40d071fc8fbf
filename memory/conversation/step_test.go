package conversation

import (
	"bytes"
	"context"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/memory"
)

// A later turn keeps its conversation's plan; when the system layer's
// sources changed, the plan is rebuilt, and the request's logger hears
// why.
func TestPlanRebuiltIsLoggedWithWhy(t *testing.T) {
	cs := New(0)
	t.Cleanup(cs.Close)
	sources, recalls := "a", 0
	cs.Recaller = recallFunc(func(r memory.Request) *memory.Context {
		recalls++
		return &memory.Context{Sources: sources, System: "plan " + sources}
	})
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})).With(slog.String("request_id", "r1"))
	turn := func(n int) *memory.Context {
		msgs := chat(n)
		req := Request{NS: "alice", Thread: Thread{ChatID: "c", FirstUser: msgs[0].Content}, Msgs: msgs}
		mc, tn := cs.Layers(context.Background(), log, req, memory.Request{Namespace: "alice", Messages: msgs, ContextLength: 8192})
		require.NotNil(t, tn)
		return mc
	}

	assert.Equal(t, "plan a", turn(1).System)
	assert.Equal(t, "plan a", turn(2).System, "a later turn keeps the plan")
	assert.NotContains(t, logs.String(), "conversation plan rebuilt")

	sources = "b"
	assert.Equal(t, "plan b", turn(3).System)
	assert.Contains(t, logs.String(), `msg="conversation plan rebuilt" request_id=r1 why="the system layer changed"`)
	assert.Equal(t, 4, recalls, "one a turn, and one more for the rebuild")
}
