package memory

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"time"
)

// Plan is a conversation's prompt plan as a store keeps it, so that a
// restart, or another instance on the same store, forwards the same
// prefix (memory/conversation makes and reads Body; a store only files
// it). It is small and bounded (MaxPlanBytes), and expires PlanTTL after
// its conversation was last used.
type Plan struct {
	// ID is the conversation's, for as long as it lives.
	ID        string
	Namespace string
	// Keys are what the conversation is found by (PlanKey of each of its
	// keys): a key moves to the plan saved with it last.
	Keys []string
	// Memories are the memories its prompt carries: deleting or hiding one
	// drops the plan (DropPlans), and the conversation rebuilds.
	Memories []string
	// Rev counts the plan's saves: a reader keeps its own copy unless the
	// store's is newer.
	Rev  uint64
	Used time.Time
	Body []byte
}

// PlanTTL is how long a plan is kept after its conversation's last turn;
// MaxPlanBytes bounds one plan's body (a longer one is not kept: its
// conversation rebuilds after a restart, as before plans were kept).
const (
	PlanTTL      = 30 * 24 * time.Hour
	MaxPlanBytes = 512 << 10
)

// PlanKey is the key a store files a conversation's key under: a digest,
// so that chat ids and first messages are not written out as keys.
func PlanKey(key string) string {
	sum := sha256.Sum256([]byte("plan\x00" + key))
	return hex.EncodeToString(sum[:16])
}

// PlanStore keeps conversations' plans; both stores implement it.
type PlanStore interface {
	// LoadPlan returns the plan filed under key (a PlanKey), or
	// ErrNotFound.
	LoadPlan(ctx context.Context, key string) (Plan, error)
	// SavePlan writes p by its ID, replacing the one before, and files it
	// under its keys. Plans unused for PlanTTL are dropped meanwhile.
	SavePlan(ctx context.Context, p Plan) error
	// DropPlans drops the plans that carry any of ids; with ns set and no
	// ids, every plan of namespace ns. It returns how many it dropped.
	DropPlans(ctx context.Context, ns string, ids ...string) (int, error)
}
