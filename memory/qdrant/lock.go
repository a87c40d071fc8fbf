package qdrant

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/qdrant/go-client/qdrant"
)

// lockNamespace derives the id of a named lock's point. Its value is the
// one the Vera-AI import used when the two shared a constant: changing it
// would let an old and a new vera hold the same lock at once.
var lockNamespace = uuid.MustParse("3f1c5a56-8a51-4d5e-9a8e-2b7f3e0c9d11")

// lockSettle is how long Lock waits before reading its claim back, unless
// the Store says otherwise: two instances claiming at once both write, and
// the last write wins.
const lockSettle = 300 * time.Millisecond

// Lock takes a named lock shared by every vera instance on this Qdrant
// (the curator's: one run at a time across instances). Qdrant has no
// compare-and-set, so the lock is a point in the collection
// "<collection>_locks": an instance claims a free or expired lock, waits,
// and holds it only if its claim is still the one stored. A crashed
// holder's lock expires after ttl. ok is false when another instance holds
// it.
func (s *Store) Lock(ctx context.Context, name string, ttl time.Duration) (release func(), ok bool, err error) {
	coll := s.collection + "_locks"
	if err := s.ensureLocks(ctx, coll); err != nil {
		return nil, false, err
	}
	id := qdrant.NewID(uuid.NewSHA1(lockNamespace, []byte("lock:"+name)).String())
	me := uuid.NewString()
	holder := func() (string, time.Time, error) {
		cctx, cancel := withTimeout(ctx)
		defer cancel()
		got, err := s.client.Get(cctx, &qdrant.GetPoints{CollectionName: coll, Ids: []*qdrant.PointId{id}, WithPayload: qdrant.NewWithPayload(true)})
		if err != nil || len(got) == 0 {
			return "", time.Time{}, err
		}
		p := got[0].GetPayload()
		return p["owner"].GetStringValue(), time.UnixMilli(p["expires"].GetIntegerValue()), nil
	}
	owner, expires, err := holder()
	if err != nil {
		return nil, false, s.wrap("lock "+name, err)
	}
	if owner != "" && time.Now().Before(expires) {
		return nil, false, nil
	}
	cctx, cancel := withTimeout(ctx)
	_, err = s.client.Upsert(cctx, &qdrant.UpsertPoints{CollectionName: coll, Wait: ptr(true), Points: []*qdrant.PointStruct{{
		Id: id, Vectors: qdrant.NewVectorsDense([]float32{1}),
		Payload: qdrant.NewValueMap(map[string]any{"owner": me, "name": name, "expires": time.Now().Add(ttl).UnixMilli()}),
	}}})
	cancel()
	if err != nil {
		return nil, false, s.wrap("lock "+name, err)
	}
	select {
	case <-time.After(cmp.Or(s.lockSettle, lockSettle)):
	case <-ctx.Done():
		return nil, false, ctx.Err()
	}
	if owner, _, err = holder(); err != nil {
		return nil, false, s.wrap("lock "+name, err)
	}
	if owner != me {
		return nil, false, nil
	}
	return func() {
		if owner, _, err := holder(); err == nil && owner == me {
			cctx, cancel := withTimeout(context.WithoutCancel(ctx))
			defer cancel()
			_, _ = s.client.Delete(cctx, &qdrant.DeletePoints{CollectionName: coll, Wait: ptr(true), Points: qdrant.NewPointsSelector(id)})
		}
	}, true, nil
}

// ensureLocks creates the locks collection if it is not there.
func (s *Store) ensureLocks(ctx context.Context, coll string) error {
	cctx, cancel := withTimeout(ctx)
	defer cancel()
	exists, err := s.client.CollectionExists(cctx, coll)
	if err != nil {
		return s.wrap("locks collection", err)
	}
	if exists {
		return nil
	}
	err = s.client.CreateCollection(cctx, &qdrant.CreateCollection{CollectionName: coll,
		VectorsConfig: qdrant.NewVectorsConfig(&qdrant.VectorParams{Size: 1, Distance: qdrant.Distance_Dot})})
	if err != nil {
		// Another instance may have made it meanwhile.
		if again, err2 := s.client.CollectionExists(cctx, coll); err2 == nil && again {
			return nil
		}
		return s.wrap(fmt.Sprintf("creating %s", coll), err)
	}
	return nil
}
