package conversation

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/memory"
)

// memPlans is a memory.PlanStore in a map, as both stores behave
// (memory/storetest checks them): a save can be held (hold) to race it.
type memPlans struct {
	mu    sync.Mutex
	plans map[string]memory.Plan // by id
	keys  map[string]string      // key → id
	hold  chan struct{}          // when set, SavePlan waits for it
}

func newMemPlans() *memPlans {
	return &memPlans{plans: map[string]memory.Plan{}, keys: map[string]string{}}
}

func (m *memPlans) LoadPlan(_ context.Context, key string) (memory.Plan, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p, ok := m.plans[m.keys[key]]
	if !ok {
		return memory.Plan{}, memory.ErrNotFound
	}
	return p, nil
}

func (m *memPlans) SavePlan(_ context.Context, p memory.Plan) error {
	m.mu.Lock()
	hold := m.hold
	m.mu.Unlock()
	if hold != nil {
		<-hold
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.plans[p.ID] = p
	for _, k := range p.Keys {
		m.keys[k] = p.ID
	}
	return nil
}

func (m *memPlans) DropPlans(_ context.Context, ns string, ids ...string) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for id, p := range m.plans {
		drop := len(ids) == 0 && p.Namespace == ns
		for _, x := range ids {
			for _, y := range p.Memories {
				drop = drop || x == y
			}
		}
		if drop {
			delete(m.plans, id)
			n++
		}
	}
	return n, nil
}

// held is a recall whose semantic layer carries the memories of ids
// (their text: "memory <id>"), on every turn, later turns included.
func held(ids *[]string) Recaller {
	return recallFunc(func(r memory.Request) *memory.Context {
		mc := &memory.Context{Sources: "s"}
		if r.Later {
			return mc
		}
		var texts []string
		for _, id := range *ids {
			mc.Semantic = append(mc.Semantic, memory.Hit{Memory: memory.Memory{ID: id, Namespace: "alice", Type: memory.Curated}})
			texts = append(texts, "memory "+id)
		}
		mc.System = strings.Join(texts, "\n")
		return mc
	})
}

// recallFunc is a Recaller of a function.
type recallFunc func(memory.Request) *memory.Context

func (f recallFunc) Recall(_ context.Context, _ *slog.Logger, r memory.Request) *memory.Context {
	return f(r)
}

// turnOn runs one turn of chat "c" through cs with history msgs and keeps
// its conversation, as the proxy does once the answer is complete.
func turnOn(t *testing.T, cs *Set, msgs []memory.Message) *memory.Context {
	t.Helper()
	req := Request{NS: "alice", Thread: Thread{ChatID: "c", FirstUser: msgs[0].Content}, Msgs: msgs}
	mc, tn := cs.Layers(context.Background(), nil, req, memory.Request{Namespace: "alice", Messages: msgs, ContextLength: 8192})
	require.NotNil(t, tn)
	cs.Record(tn, memory.NewID(), time.Now())
	cs.Keep(tn)
	return mc
}

func chat(n int) []memory.Message {
	var msgs []memory.Message
	for i := range n {
		msgs = append(msgs, memory.Message{Role: "user", Content: "question " + string(rune('a'+i))})
		if i < n-1 {
			msgs = append(msgs, memory.Message{Role: "assistant", Content: "answer " + string(rune('a'+i))})
		}
	}
	return msgs
}

// Two instances on one store, the turns alternating: each turn forwards
// the plan the turn before saved; a memory deleted through one is never
// forwarded again by either, even by the one whose copy is older.
func TestKeptPlansAcrossInstances(t *testing.T) {
	store := newMemPlans()
	a, b := New(0), New(0)
	a.Plans, b.Plans = store, store
	t.Cleanup(a.Close)
	t.Cleanup(b.Close)
	ids := []string{"m1", "m2"}
	a.Recaller, b.Recaller = held(&ids), held(&ids)

	first := turnOn(t, a, chat(1))
	require.Contains(t, first.System, "memory m1")
	ids = []string{"m9"} // what a fresh recall would choose now
	assert.Equal(t, first.System, turnOn(t, b, chat(2)).System, "b forwards a's plan")
	assert.Equal(t, first.System, turnOn(t, a, chat(3)).System, "and a b's")
	assert.Equal(t, first.System, turnOn(t, b, chat(4)).System)

	// m1 is deleted through b: the store drops the plan, b rebuilds.
	ids = []string{"m2"}
	b.Withdraw("", "m1")
	rebuilt := turnOn(t, b, chat(5))
	assert.NotContains(t, rebuilt.System, "memory m1")
	// a still holds its older copy, with m1: the store's newer one wins.
	next := turnOn(t, a, chat(6))
	assert.NotContains(t, next.System, "memory m1", "a takes b's rebuilt plan, not its own older copy")
	assert.Equal(t, rebuilt.System, next.System)
}

// A save under way when a memory it carries is deleted does not leave
// the memory in the store.
func TestSaveRacingAWithdrawal(t *testing.T) {
	store := newMemPlans()
	a := New(0)
	a.Plans = store
	t.Cleanup(a.Close)
	ids := []string{"m1"}
	a.Recaller = held(&ids)
	store.hold = make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		turnOn(t, a, chat(1))
	}()
	time.Sleep(50 * time.Millisecond) // the save is under way
	a.Withdraw("", "m1")
	close(store.hold)
	<-done
	_, err := store.LoadPlan(context.Background(), memory.PlanKey("chat\x00alice\x00c"))
	assert.ErrorIs(t, err, memory.ErrNotFound, "the plan saved with m1 was dropped again")
}

// A plan made under one memory policy is never sent under another: a
// later turn for a model whose policy differs rebuilds, even when its
// recall fails, and a tool loop's next step is recalled afresh.
func TestAPlanIsNotSentUnderAnotherPolicy(t *testing.T) {
	cs := New(0)
	t.Cleanup(cs.Close)
	failing := false
	cs.Recaller = recallFunc(func(r memory.Request) *memory.Context {
		mc := &memory.Context{Sources: "s", Shareable: r.Shareable}
		if failing {
			mc.Err = errors.New("store down")
			return mc
		}
		if !r.Shareable && !r.Later {
			mc.System = "memory PRIVATEzz"
		}
		return mc
	})
	msgs := chat(1)
	req := Request{NS: "alice", Thread: Thread{ChatID: "c", FirstUser: msgs[0].Content}, Msgs: msgs}
	mc, tn := cs.Layers(context.Background(), nil, req, memory.Request{Namespace: "alice", Messages: msgs, ContextLength: 8192})
	require.Contains(t, mc.System, "PRIVATEzz")
	cs.Record(tn, memory.NewID(), time.Now())
	cs.Keep(tn)

	failing = true
	msgs = chat(2)
	req = Request{NS: "alice", Thread: Thread{ChatID: "c", FirstUser: msgs[0].Content}, Msgs: msgs}
	mc, _ = cs.Layers(context.Background(), nil, req, memory.Request{Namespace: "alice", Messages: msgs, ContextLength: 8192, Shareable: true})
	assert.NotContains(t, mc.System, "PRIVATEzz", "a shareable turn never gets the plan made under all")
	assert.True(t, mc.Shareable)

	// A tool loop: the question under all, its next step under shareable.
	failing = false
	loop := append(chat(1), memory.Message{Role: "assistant", Content: ""}, memory.Message{Role: "tool", Content: "21C"})
	req = Request{NS: "alice", Thread: Thread{ChatID: "loop", FirstUser: loop[0].Content}, Msgs: loop[:1]}
	mc, tn = cs.Layers(context.Background(), nil, req, memory.Request{Namespace: "alice", Messages: loop[:1], ContextLength: 8192})
	require.Contains(t, mc.System, "PRIVATEzz")
	cs.Keep(tn)
	req.Msgs, req.Thread.ToolLoop = loop, true
	mc, _ = cs.Layers(context.Background(), nil, req, memory.Request{Namespace: "alice", Messages: loop, ContextLength: 8192, Shareable: true})
	assert.NotContains(t, mc.System, "PRIVATEzz", "the next step, for a shareable model, is recalled afresh")
}
