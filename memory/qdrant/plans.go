package qdrant

import (
	"context"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/qdrant/go-client/qdrant"

	"github.com/vera-proxy/vera/memory"
)

// Conversations' plans (memory.PlanStore) live in the collection
// "<collection>_plans", one point per conversation (a one-dimension
// vector, as Qdrant wants one), so that every instance on the same Qdrant
// forwards a conversation's prefix as the one before it did.

// planNamespace derives a plan's point id from the conversation's.
var planNamespace = uuid.MustParse("6d0c2b8e-3f5a-4c1e-9b7d-52a8e4f1c3a0")

// Payload fields of a plan's point.
const (
	planID       = "id"
	planKeys     = "keys"
	planMemories = "memories"
	planRev      = "rev"
	planUsed     = "used" // Unix milliseconds
	planBody     = "body"
)

var _ memory.PlanStore = (*Store)(nil)

// plans holds the plans collection's state: made once per process.
type plans struct {
	mu      sync.Mutex
	made    bool
	expired time.Time
}

func (s *Store) plansCollection() string { return s.collection + "_plans" }

// ensurePlans creates the plans collection and its indexes if they are
// not there.
func (s *Store) ensurePlans(ctx context.Context) error {
	s.plans.mu.Lock()
	defer s.plans.mu.Unlock()
	if s.plans.made {
		return nil
	}
	coll := s.plansCollection()
	// Made to the end even when the chat that asked has gone on: a
	// collection without its indexes would be scanned whole.
	cctx, cancel := withTimeout(context.WithoutCancel(ctx))
	defer cancel()
	exists, err := s.client.CollectionExists(cctx, coll)
	if err != nil {
		return s.wrap("plans collection", err)
	}
	if !exists {
		err = s.client.CreateCollection(cctx, &qdrant.CreateCollection{CollectionName: coll,
			VectorsConfig: qdrant.NewVectorsConfig(&qdrant.VectorParams{Size: 1, Distance: qdrant.Distance_Dot})})
		if err != nil {
			// Another instance may have made it meanwhile.
			if again, err2 := s.client.CollectionExists(cctx, coll); err2 != nil || !again {
				return s.wrap("creating "+coll, err)
			}
		}
	}
	// Creating an index that exists changes nothing: each process
	// makes sure of them once.
	wait := true
	for _, ix := range []*qdrant.CreateFieldIndexCollection{
		{FieldName: planKeys, FieldType: qdrant.FieldType_FieldTypeKeyword.Enum()},
		{FieldName: planMemories, FieldType: qdrant.FieldType_FieldTypeKeyword.Enum()},
		{FieldName: fieldNamespace, FieldType: qdrant.FieldType_FieldTypeKeyword.Enum()},
		{FieldName: planUsed, FieldType: qdrant.FieldType_FieldTypeInteger.Enum(),
			FieldIndexParams: qdrant.NewPayloadIndexParamsInt(&qdrant.IntegerIndexParams{Lookup: ptr(false), Range: ptr(true)})},
	} {
		ix.CollectionName, ix.Wait = coll, &wait
		if _, err := s.client.CreateFieldIndex(cctx, ix); err != nil {
			return s.wrap("indexing "+coll+"."+ix.FieldName, err)
		}
	}
	s.plans.made = true
	return nil
}

func planPoint(id string) *qdrant.PointId {
	return qdrant.NewID(uuid.NewSHA1(planNamespace, []byte("plan:"+id)).String())
}

// LoadPlan implements memory.PlanStore. A key saved with two plans (a
// conversation that took another's key) is the newer one's.
func (s *Store) LoadPlan(ctx context.Context, key string) (memory.Plan, error) {
	if err := s.ensurePlans(ctx); err != nil {
		return memory.Plan{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	got, err := s.client.Scroll(ctx, &qdrant.ScrollPoints{
		CollectionName: s.plansCollection(),
		Filter:         &qdrant.Filter{Must: []*qdrant.Condition{qdrant.NewMatchKeyword(planKeys, key)}},
		Limit:          ptr(uint32(8)), WithPayload: qdrant.NewWithPayload(true),
	})
	if err != nil {
		return memory.Plan{}, s.wrap("reading a conversation's plan", err)
	}
	var best memory.Plan
	found := false
	for _, pt := range got {
		p := planOf(pt.GetPayload())
		if time.Since(p.Used) > memory.PlanTTL {
			continue
		}
		if !found || p.Used.After(best.Used) {
			best, found = p, true
		}
	}
	if !found {
		return memory.Plan{}, memory.ErrNotFound
	}
	return best, nil
}

func planOf(pl map[string]*qdrant.Value) memory.Plan {
	p := memory.Plan{
		ID: pl[planID].GetStringValue(), Namespace: pl[fieldNamespace].GetStringValue(),
		Keys: strs(pl[planKeys]), Memories: strs(pl[planMemories]),
		Rev: uint64(pl[planRev].GetIntegerValue()), Used: time.UnixMilli(pl[planUsed].GetIntegerValue()).UTC(),
		Body: []byte(pl[planBody].GetStringValue()),
	}
	return p
}

func strs(v *qdrant.Value) []string {
	var out []string
	for _, x := range v.GetListValue().GetValues() {
		out = append(out, x.GetStringValue())
	}
	return out
}

func list(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// SavePlan implements memory.PlanStore.
func (s *Store) SavePlan(ctx context.Context, p memory.Plan) error {
	if err := s.ensurePlans(ctx); err != nil {
		return err
	}
	cctx, cancel := withTimeout(ctx)
	defer cancel()
	_, err := s.client.Upsert(cctx, &qdrant.UpsertPoints{CollectionName: s.plansCollection(), Wait: ptr(true), Points: []*qdrant.PointStruct{{
		Id: planPoint(p.ID), Vectors: qdrant.NewVectorsDense([]float32{1}),
		Payload: qdrant.NewValueMap(map[string]any{
			planID: p.ID, fieldNamespace: p.Namespace, planKeys: list(p.Keys), planMemories: list(p.Memories),
			planRev: int64(p.Rev), planUsed: p.Used.UnixMilli(), planBody: string(p.Body),
		}),
	}}})
	if err != nil {
		return s.wrap("saving a conversation's plan", err)
	}
	// Its keys are its own now: an older plan that held one (a chat
	// begun again under its id) lets go of it.
	others, err := s.client.Scroll(cctx, &qdrant.ScrollPoints{
		CollectionName: s.plansCollection(),
		Filter: &qdrant.Filter{
			Must:    []*qdrant.Condition{qdrant.NewMatchKeywords(planKeys, p.Keys...)},
			MustNot: []*qdrant.Condition{qdrant.NewHasID(planPoint(p.ID))},
		},
		Limit: ptr(uint32(64)), WithPayload: qdrant.NewWithPayloadInclude(planKeys),
	})
	if err != nil {
		return s.wrap("saving a conversation's plan", err)
	}
	mine := map[string]bool{}
	for _, k := range p.Keys {
		mine[k] = true
	}
	for _, o := range others {
		var left []string
		for _, k := range strs(o.GetPayload()[planKeys]) {
			if !mine[k] {
				left = append(left, k)
			}
		}
		if _, err := s.client.SetPayload(cctx, &qdrant.SetPayloadPoints{CollectionName: s.plansCollection(), Wait: ptr(true),
			Payload:        qdrant.NewValueMap(map[string]any{planKeys: list(left)}),
			PointsSelector: qdrant.NewPointsSelector(o.GetId())}); err != nil {
			return s.wrap("saving a conversation's plan", err)
		}
	}
	s.plans.mu.Lock()
	expire := time.Since(s.plans.expired) > time.Hour
	if expire {
		s.plans.expired = time.Now()
	}
	s.plans.mu.Unlock()
	if expire {
		old := float64(time.Now().Add(-memory.PlanTTL).UnixMilli())
		_, err = s.dropPlans(cctx, &qdrant.Filter{Must: []*qdrant.Condition{qdrant.NewRange(planUsed, &qdrant.Range{Lt: &old})}})
	}
	return err
}

// DropPlans implements memory.PlanStore.
func (s *Store) DropPlans(ctx context.Context, ns string, ids ...string) (int, error) {
	if ns == "" && len(ids) == 0 {
		return 0, nil
	}
	if err := s.ensurePlans(ctx); err != nil {
		return 0, err
	}
	cctx, cancel := withTimeout(ctx)
	defer cancel()
	f := &qdrant.Filter{Must: []*qdrant.Condition{qdrant.NewMatchKeyword(fieldNamespace, ns)}}
	if len(ids) > 0 {
		f = &qdrant.Filter{Must: []*qdrant.Condition{qdrant.NewMatchKeywords(planMemories, ids...)}}
	}
	return s.dropPlans(cctx, f)
}

// dropPlans deletes the plans f matches.
func (s *Store) dropPlans(ctx context.Context, f *qdrant.Filter) (int, error) {
	n, err := s.client.Count(ctx, &qdrant.CountPoints{CollectionName: s.plansCollection(), Filter: f, Exact: ptr(true)})
	if err != nil {
		return 0, s.wrap("counting plans", err)
	}
	if n == 0 {
		return 0, nil
	}
	if _, err := s.client.Delete(ctx, &qdrant.DeletePoints{CollectionName: s.plansCollection(), Wait: ptr(true), Points: qdrant.NewPointsSelectorFilter(f)}); err != nil {
		return 0, s.wrap("dropping plans", err)
	}
	return int(n), nil
}
