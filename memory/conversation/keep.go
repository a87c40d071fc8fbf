package conversation

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/vera-proxy/vera/memory"
)

// A conversation's plan is kept in the store (Set.Plans), so that a
// restart, or another instance on the same Qdrant, forwards the same
// prefix byte for byte: its layers, the later blocks and where they are,
// its summary and the turns it stands for, the cut, and the turns
// recorded at each place (a regenerate after a restart still replaces).
// Each turn reads the store's copy before it plans (another instance may
// have answered the turn before) and writes its own once its answer is
// complete, before the client can send the next turn. The store is a
// cache of what was forwarded: when it cannot be reached, each instance
// goes on with its own copy, and a turn that finds none pays one full
// prompt, as before plans were kept.

// keptVersion is the layout of a kept conversation; another is not read.
const keptVersion = 1

// kept is a conversation as its plan's body holds it.
type kept struct {
	V        int          `json:"v"`
	NS       string       `json:"ns"`
	Keys     []string     `json:"keys"`
	Plan     *keptContext `json:"plan,omitempty"`
	Blocks   []keptBlock  `json:"blocks,omitempty"`
	Summary  string       `json:"summary,omitempty"`
	Covered  int          `json:"covered,omitempty"`
	KeepFrom int          `json:"keep_from,omitempty"`
	Digest   string       `json:"digest,omitempty"`
	// Ready is a summary written and not yet in the plan.
	Ready    *keptSummary `json:"ready,omitempty"`
	Turns    []keptTurn   `json:"turns,omitempty"`
	Older    []string     `json:"older,omitempty"`
	Point    string       `json:"point,omitempty"`
	Advanced bool         `json:"advanced,omitempty"`
	// User is the turn under way's user text, for a Responses tool loop
	// chained by id whose next step reaches another instance.
	User string `json:"user,omitempty"`
}

type keptSummary struct {
	UpTo int    `json:"up_to"`
	Text string `json:"text"`
}

type keptTurn struct {
	Point string    `json:"point"`
	ID    string    `json:"id"`
	At    time.Time `json:"at"`
}

type keptBlock struct {
	User    int       `json:"user"`
	Text    string    `json:"text"`
	Digest  string    `json:"digest"`
	Hits    []keptHit `json:"hits,omitempty"`
	Tokens  int       `json:"tokens"`
	Private []string  `json:"private,omitempty"`
}

// keptHit is a memory in a plan, by id: its text is in the prompt.
type keptHit struct {
	ID     string      `json:"id"`
	NS     string      `json:"ns,omitempty"`
	Type   memory.Type `json:"type"`
	Time   time.Time   `json:"time"`
	Tokens int         `json:"tokens,omitempty"`
	Score  float64     `json:"score,omitempty"`
}

// keptContext is a plan's memory.Context: what it forwards and reports.
type keptContext struct {
	System         string           `json:"system,omitempty"`
	SystemReplaces int              `json:"system_replaces,omitempty"`
	Recent         []memory.Message `json:"recent,omitempty"`
	Semantic       []keptHit        `json:"semantic,omitempty"`
	RecentIDs      []string         `json:"recent_ids,omitempty"`
	RuleIDs        []string         `json:"rule_ids,omitempty"`
	ProfileID      string           `json:"profile_id,omitempty"`
	ProfileTokens  int              `json:"profile_tokens,omitempty"`
	SemanticTokens int              `json:"semantic_tokens,omitempty"`
	RecentTokens   int              `json:"recent_tokens,omitempty"`
	RulesTokens    int              `json:"rules_tokens,omitempty"`
	SemanticBudget int              `json:"semantic_budget,omitempty"`
	RecentBudget   int              `json:"recent_budget,omitempty"`
	LexicalOnly    bool             `json:"lexical_only,omitempty"`
	SystemTokens   int              `json:"system_tokens,omitempty"`
	Sources        string           `json:"sources,omitempty"`
	KeepFrom       int              `json:"keep_from,omitempty"`
	Compacted      int              `json:"compacted,omitempty"`
	Shareable      bool             `json:"shareable,omitempty"`
	Private        []string         `json:"private,omitempty"`
}

func keepHits(hs []memory.Hit) []keptHit {
	out := make([]keptHit, len(hs))
	for i, h := range hs {
		out[i] = keptHit{ID: h.ID, NS: h.Namespace, Type: h.Type, Time: h.Time, Tokens: h.Tokens, Score: h.Score}
	}
	return out
}

func hitsOf(ks []keptHit) []memory.Hit {
	if len(ks) == 0 {
		return nil
	}
	out := make([]memory.Hit, len(ks))
	for i, k := range ks {
		out[i] = memory.Hit{Memory: memory.Memory{ID: k.ID, Namespace: k.NS, Type: k.Type, Time: k.Time, Tokens: k.Tokens}, Score: k.Score}
	}
	return out
}

func keepContext(mc *memory.Context) *keptContext {
	if mc == nil {
		return nil
	}
	return &keptContext{
		System: mc.System, SystemReplaces: mc.SystemReplaces, Recent: mc.Recent, Semantic: keepHits(mc.Semantic),
		RecentIDs: mc.RecentIDs, RuleIDs: mc.RuleIDs, ProfileID: mc.ProfileID, ProfileTokens: mc.ProfileTokens,
		SemanticTokens: mc.SemanticTokens, RecentTokens: mc.RecentTokens, RulesTokens: mc.RulesTokens,
		SemanticBudget: mc.SemanticBudget, RecentBudget: mc.RecentBudget, LexicalOnly: mc.LexicalOnly,
		SystemTokens: mc.SystemTokens, Sources: mc.Sources, KeepFrom: mc.KeepFrom, Compacted: mc.Compacted,
		Shareable: mc.Shareable, Private: mc.Private,
	}
}

func (k *keptContext) context() *memory.Context {
	if k == nil {
		return nil
	}
	return &memory.Context{
		System: k.System, SystemReplaces: k.SystemReplaces, Recent: k.Recent, Semantic: hitsOf(k.Semantic),
		RecentIDs: k.RecentIDs, RuleIDs: k.RuleIDs, ProfileID: k.ProfileID, ProfileTokens: k.ProfileTokens,
		SemanticTokens: k.SemanticTokens, RecentTokens: k.RecentTokens, RulesTokens: k.RulesTokens,
		SemanticBudget: k.SemanticBudget, RecentBudget: k.RecentBudget, LexicalOnly: k.LexicalOnly,
		SystemTokens: k.SystemTokens, Sources: k.Sources, KeepFrom: k.KeepFrom, Compacted: k.Compacted,
		Shareable: k.Shareable, Private: k.Private,
	}
}

// Timeouts of the store's plan calls: a chat never waits long for them
// (past them it goes on with this instance's copy). After a failure, the
// store is left alone for storeRest.
const (
	loadTimeout = time.Second
	saveTimeout = 2 * time.Second
	dropTimeout = 5 * time.Second
	storeRest   = 10 * time.Second
)

// keeping is the Set's side of keeping plans.
type keeping struct {
	mu      sync.Mutex
	resting time.Time // the store failed: left alone until then
}

// reachable reports whether the store may be asked now.
func (cs *Set) reachable() bool {
	if cs.Plans == nil {
		return false
	}
	cs.keeping.mu.Lock()
	defer cs.keeping.mu.Unlock()
	return time.Now().After(cs.keeping.resting)
}

// failed notes a call to the store that failed for want of the store.
func (cs *Set) failed(err error) {
	if err == nil || errors.Is(err, memory.ErrNotFound) {
		return
	}
	cs.keeping.mu.Lock()
	cs.keeping.resting = time.Now().Add(storeRest)
	cs.keeping.mu.Unlock()
}

// sync brings the conversation known by at's key up to the store's copy:
// a restart's first turn, or another instance's turn before, left it
// there. A copy this instance had saved that the store no longer holds was
// withdrawn (a memory it carried deleted elsewhere) or expired: its plan is
// rebuilt.
func (cs *Set) sync(ns string, at place) {
	if at.First && !at.Strong || !cs.reachable() {
		return
	}
	ctx, cancel := context.WithTimeout(cs.ctx, loadTimeout)
	p, err := cs.Plans.LoadPlan(ctx, memory.PlanKey(at.Key))
	cancel()
	var k kept
	switch {
	case errors.Is(err, memory.ErrNotFound):
	case err != nil:
		cs.failed(err)
		return
	case p.Namespace != ns || json.Unmarshal(p.Body, &k) != nil || k.V != keptVersion || k.NS != ns:
		return // not a plan this vera can read
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	var cv *conversation
	if e, ok := cs.keys[at.Key]; ok {
		cv = e.Value.(*conversation)
	}
	switch {
	case err != nil: // not found
		if cv != nil && cv.stored {
			// Its rev stays: the rebuilt plan is saved as newer than
			// any copy another instance still holds.
			cv.Plan, cv.Blocks, cv.Last, cv.stored = nil, nil, nil, false
		}
	case cv != nil && cv.id != p.ID && !p.Used.After(cv.synced):
		// This instance's conversation is the newer (begun or saved
		// after the store's copy, or never saved).
	case cv == nil || cv.id != p.ID:
		cv = &conversation{NS: ns, id: p.ID}
		cv.restore(&k, p.Rev)
		for _, key := range k.Keys {
			if e, ok := cs.keys[key]; ok {
				cs.unkey(e, key)
			}
			cs.add(cv, key)
		}
		if _, ok := cs.keys[at.Key]; !ok {
			cs.add(cv, at.Key)
		}
	case p.Rev > cv.rev:
		cv.restore(&k, p.Rev)
		for _, key := range k.Keys {
			if e, ok := cs.keys[key]; !ok || e.Value != cv {
				if ok {
					cs.unkey(e, key)
				}
				cs.add(cv, key)
			}
		}
		cs.account(cv)
	}
}

// restore sets cv from the store's copy k, saved as rev; cs.mu is held.
func (cv *conversation) restore(k *kept, rev uint64) {
	cv.stored, cv.synced = true, time.Now()
	cv.Plan = k.Plan.context()
	cv.Blocks = nil
	for _, b := range k.Blocks {
		cv.Blocks = append(cv.Blocks, convBlock{Block: memory.Block{User: b.User, Text: b.Text}, Digest: b.Digest, Hits: hitsOf(b.Hits), Tokens: b.Tokens, Private: b.Private})
	}
	cv.Last = nil
	if cv.Plan != nil {
		// What the turn before forwarded: a tool loop's next step
		// forwards it again.
		cv.Last = withBlocks(cv.Plan, cv.Blocks)
	}
	c := &cv.Compaction
	if c.stop != nil {
		c.stop() // the conversation went on elsewhere
	}
	// A summary still running is told it was interrupted: it is no
	// failure, only overtaken.
	*c = compaction{Summary: k.Summary, Covered: k.Covered, KeepFrom: k.KeepFrom, digest: k.Digest, arrived: c.arrived,
		grace: c.grace, running: c.running, interrupted: c.running}
	if k.Ready != nil {
		c.ready = &summaryJob{upTo: k.Ready.UpTo, text: k.Ready.Text}
	}
	cv.turns = cv.turns[:0]
	for _, t := range k.Turns {
		cv.turns = append(cv.turns, recordedTurn{point: t.Point, id: t.ID, at: t.At})
	}
	cv.older = k.Older
	cv.Point, cv.Advanced, cv.User, cv.rev = k.Point, k.Advanced, k.User, rev
}

// Keep writes the turn's conversation to the store, once its answer is
// complete and before the client hears so.
func (cs *Set) Keep(t *Turn) {
	if t == nil || t.conv == nil {
		return
	}
	cs.save(t.conv)
}

// save writes cv to the store; a conversation too large to keep is not
// (it rebuilds after a restart), nor one whose plan holds the client's
// own memory block (Open WebUI's), which vera never stores.
func (cs *Set) save(cv *conversation) {
	if !cs.reachable() {
		return
	}
	cv.saving.Lock()
	defer cv.saving.Unlock()
	var p memory.Plan
	var gen uint64
	ok := false
	cs.locked(func() {
		if !cs.filed(cv) {
			return // replaced or forgotten meanwhile: its copy is not the chat's
		}
		gen = cs.gen
		p, ok = cv.plan()
	})
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(cs.ctx, saveTimeout)
	defer cancel()
	err := cs.Plans.SavePlan(ctx, p)
	cs.failed(err)
	var withdrawn []string
	cs.locked(func() {
		if err == nil {
			cv.stored, cv.synced = true, p.Used
		} else {
			cv.sum = [32]byte{}
		}
		withdrawn = cs.withdrawnSince(gen, p.Namespace, p.Memories)
	})
	if err == nil && len(withdrawn) > 0 {
		// A memory it carries was deleted while it was being saved: the
		// store must not keep it.
		cs.drop("", withdrawn)
	}
}

// plan is cv as the store keeps it, as its next rev; false when it is
// not saved: it is too large, or unchanged since it was saved (a tool
// loop's step).
// cs.mu is held.
func (cv *conversation) plan() (memory.Plan, bool) {
	k, ids := cv.kept()
	if cv.id == "" {
		cv.id = memory.NewID()
	}
	body, err := json.Marshal(k)
	if err != nil || len(body) > memory.MaxPlanBytes {
		return memory.Plan{}, false
	}
	sum := sha256.Sum256(body)
	if cv.stored && sum == cv.sum {
		return memory.Plan{}, false
	}
	cv.sum = sum
	cv.rev++
	p := memory.Plan{ID: cv.id, Namespace: cv.NS, Rev: cv.rev, Used: time.Now().UTC(), Body: body}
	for _, key := range cv.keys {
		p.Keys = append(p.Keys, memory.PlanKey(key))
	}
	for id := range ids {
		p.Memories = append(p.Memories, id)
	}
	return p, true
}

// kept is cv as a plan's body holds it, and the ids of the memories and
// turns it quotes (its user text, its summary): erased with them. cs.mu
// is held.
func (cv *conversation) kept() (kept, map[string]bool) {
	k := kept{V: keptVersion, NS: cv.NS, Keys: cv.keys, Point: cv.Point, Advanced: cv.Advanced, User: cv.User}
	ids := map[string]bool{}
	if cv.Plan != nil && cv.Plan.CarriedBlock {
		// Its system text holds the client's own memory block, which is
		// never stored: the conversation is kept without its plan (and
		// the blocks placed after it), and rebuilds one after a restart.
		return cv.keptTurns(k, ids)
	}
	k.Plan = keepContext(cv.Plan)
	if cv.Plan != nil {
		for _, id := range cv.Plan.IDs() {
			ids[id] = true
		}
	}
	for _, b := range cv.Blocks {
		k.Blocks = append(k.Blocks, keptBlock{User: b.User, Text: b.Text, Digest: b.Digest, Hits: keepHits(b.Hits), Tokens: b.Tokens, Private: b.Private})
		for _, h := range b.Hits {
			ids[h.ID] = true
		}
	}
	return cv.keptTurns(k, ids)
}

// keptTurns adds what k keeps besides the plan: the compaction and the
// turns recorded; cs.mu is held.
func (cv *conversation) keptTurns(k kept, ids map[string]bool) (kept, map[string]bool) {
	c := &cv.Compaction
	k.Summary, k.Covered, k.KeepFrom, k.Digest = c.Summary, c.Covered, c.KeepFrom, c.digest
	if c.ready != nil {
		k.Ready = &keptSummary{UpTo: c.ready.upTo, Text: c.ready.text}
	}
	for _, t := range cv.turns {
		k.Turns = append(k.Turns, keptTurn{Point: t.point, ID: t.id, At: t.at})
		ids[t.id] = true
	}
	k.Older = cv.older
	for _, id := range cv.older {
		ids[id] = true
	}
	return k, ids
}

// filed reports whether cv is still in the set; cs.mu is held.
func (cs *Set) filed(cv *conversation) bool {
	for _, k := range cv.keys {
		if e, ok := cs.keys[k]; ok && e.Value == cv {
			return true
		}
	}
	return false
}

// withdrawnSince returns those of ids withdrawn since generation gen (all
// of them when ns was forgotten whole, or the withdrawals kept do not
// reach back so far); cs.mu is held.
func (cs *Set) withdrawnSince(gen uint64, ns string, ids []string) []string {
	if gen == cs.gen || len(ids) == 0 {
		return nil
	}
	if gen < cs.floor {
		return ids
	}
	var out []string
	for _, id := range ids {
		for _, w := range cs.withdrawals {
			if w.gen > gen && (w.ids[id] || w.ns != "" && w.ns == ns) {
				out = append(out, id)
				break
			}
		}
	}
	return out
}

// drop withdraws the store's plans that carry ids (or, with ns and no
// ids, every plan of ns), on every instance: their conversations rebuild
// at their next turn.
func (cs *Set) drop(ns string, ids []string) int {
	if cs.Plans == nil {
		return 0
	}
	ctx, cancel := context.WithTimeout(context.Background(), dropTimeout)
	defer cancel()
	n, err := cs.Plans.DropPlans(ctx, ns, ids...)
	cs.failed(err)
	return n
}
