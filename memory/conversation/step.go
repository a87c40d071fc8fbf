package conversation

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/vera-proxy/vera/memory"
)

// Request is what the conversation step needs of a chat, whatever its
// dialect.
type Request struct {
	NS     string
	Thread Thread
	Msgs   []memory.Message
	// User is the user text the turn is stored with; a step of a
	// Responses tool loop chained by id carries none (Turn.User).
	User string
	// KeepUser: the dialect chains requests by id, carrying no history;
	// the turn's user text is kept (at most maxKeptUser bytes) for the
	// loop's later steps.
	KeepUser bool
}

// Recaller chooses a chat's layers (the proxy's recall step, in front of
// memory.Builder); log carries the request's attributes.
type Recaller interface {
	Recall(ctx context.Context, log *slog.Logger, req memory.Request) *memory.Context
}

// step is one Layers call, the conversation step of a chat: the
// request's context, and its logger, which hears why a conversation's
// plan was rebuilt.
type step struct {
	ctx context.Context
	log *slog.Logger
}

// recall chooses layers through the Recaller; none without one.
func (cs *Set) recall(st step, mreq memory.Request) *memory.Context {
	if cs.Recaller == nil {
		return &memory.Context{}
	}
	return cs.Recaller.Recall(st.ctx, st.log, mreq)
}

// Turn is a request's turn in its conversation: what recording its
// answer (Record) and following it (Answered) need.
type Turn struct {
	conv *conversation
	at   place
	gen  uint64
	// User is the turn's user text: its question's, for a step of a
	// Responses loop chained by id.
	User string
	// arrived is when the request came: a summary is not started once a
	// later request of its conversation has come.
	arrived time.Time
}

// maxKeptUser bounds the user text a conversation keeps between requests.
const maxKeptUser = 64 << 10

// Layers decides what memory a chat gets, as a turn of its conversation,
// recalling through the Set's Recaller with ctx and log:
//   - a first turn, a conversation forgotten, or any turn with EveryTurn:
//     layers chosen afresh, which become the plan;
//   - a step of an agent's tool loop: what its turn forwarded, again;
//   - a later turn: the plan byte for byte, the blocks earlier turns added
//     where they were, and a block of what became relevant now at the
//     start of the user's message; the plan is rebuilt when the system
//     layer's sources changed or the conversation outgrew the window.
//
// mreq is the chat's recall; the turn a regenerate or an edit replaces is
// never recalled into it. The Turn is nil when the chat has no place in a
// conversation (chained to an answer forgotten).
func (cs *Set) Layers(ctx context.Context, log *slog.Logger, req Request, mreq memory.Request) (*memory.Context, *Turn) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	st := step{ctx: ctx, log: log}
	at := placeOf(req.NS, req.Thread, req.Msgs)
	cs.sync(req.NS, at)
	t := &Turn{at: at, gen: cs.generation(), User: req.User, arrived: time.Now()}
	if id := cs.replacing(at, time.Now()); id != "" {
		// A regenerate is not primed with the answer it replaces, nor an
		// edit with the words taken back.
		mreq.Exclude = map[string]bool{id: true}
	}
	var cv *conversation
	if !at.First {
		cv = cs.get(at.Key)
	}
	if cv != nil {
		cs.interrupt(cv, t.arrived)
		cs.checkCompaction(cv, at, req.Msgs)
	}
	if last := cs.toolLoopStep(t, cv, &at, mreq.Shareable); last != nil {
		return last, t
	}
	if len(req.Msgs) == 0 {
		return &memory.Context{}, nil // chained to an answer forgotten
	}
	if cv != nil && !at.ToolLoop {
		if cs.takeReady(cv) {
			return cs.fresh(req, t, cv, mreq, st, "the conversation was compacted"), t
		}
	}
	var plan *memory.Context
	var blocks []convBlock
	if cv != nil && !cs.EveryTurn {
		cs.locked(func() { plan, blocks = cv.Plan, slices.Clone(cv.Blocks) })
	}
	if plan == nil {
		return cs.fresh(req, t, cv, mreq, st, ""), t
	}
	return cs.later(req, t, cv, at, mreq, st, plan, blocks), t
}

// toolLoopStep returns what the turn under way forwarded, for a later step
// of its agent's tool loop: no new recall. nil when the request is none.
// A step chained by id takes its question's point into at.
func (cs *Set) toolLoopStep(t *Turn, cv *conversation, at *place, shareable bool) *memory.Context {
	if !at.ToolLoop || cv == nil {
		return nil
	}
	var last *memory.Context
	cs.locked(func() {
		if at.Chained {
			// Each step links to the step before by its id: the loop
			// stands where its question did.
			at.Point = cv.Point
		}
		if cv.Point == at.Point && cv.Last != nil && cv.Last.Shareable == shareable {
			// Under the policy it was built for only: a step for
			// another model is recalled afresh.
			last = cv.Last
			if t.User == "" {
				t.User = cv.User // a Responses loop chained by id
			}
		}
	})
	if last != nil {
		t.conv, t.at = cv, *at
	}
	return last
}

// later keeps a later turn's plan and the blocks of the turns before, adds
// a block of what became relevant now, and rebuilds the plan when the
// system layer changed or the conversation outgrew its window.
func (cs *Set) later(req Request, t *Turn, cv *conversation, at place, mreq memory.Request, st step, plan *memory.Context, blocks []convBlock) *memory.Context {
	if plan.Shareable != mreq.Shareable {
		// Made under another policy (another model): never sent under
		// this one, even when recall fails now.
		return cs.fresh(req, t, cv, mreq, st, "the model's memory policy changed")
	}
	blocks, again := keptBlocks(blocks, req.Msgs, at)
	lreq := laterRequest(tailRequest(mreq, plan.KeepFrom), plan, blocks)
	// A block never takes the room the conversation grows in: a block
	// that filled it would have the next turn rebuild, and the block of
	// the rebuilt plan's next turn fill it again, turn after turn.
	lreq.Reserve = growRoom(mreq)
	now := cs.recall(st, lreq)
	// While recall fails the plan stands, unless it holds the client's
	// own memory block, which changed: the old one is never sent again.
	if now.Sources != plan.Sources && (now.Err == nil || plan.CarriedBlock) {
		return cs.fresh(req, t, cv, mreq, st, "the system layer changed")
	}
	full := now.Full && (plan.KeepFrom == 0 || cs.over(withBlocks(plan, blocks), req.Msgs, mreq.PromptRoom()))
	// A conversation already cut whose block finds no room (and, when
	// it could tell, a memory the prompt lacks: a turn cut long ago, say)
	// moves its cut now, not a few turns later.
	if full || (now.Crowded || now.Full) && plan.KeepFrom > 0 {
		crowded := now.Crowded
		p, kept, moved := cs.recut(cv, plan, blocks, req.Msgs, mreq)
		if moved {
			plan, blocks = p, kept
		}
		if moved || crowded {
			// Once cut, the room left (less the room to grow) is the
			// block's: the memory the question needs may be longer than
			// a turn's share of a small window.
			lreq = laterRequest(tailRequest(mreq, plan.KeepFrom), plan, blocks)
			lreq.Reserve, lreq.Roomy = growRoom(mreq), crowded
			now = cs.recall(st, lreq)
			full = now.Full
		}
		if full {
			return cs.fresh(req, t, cv, mreq, st, "the conversation outgrew the context window")
		}
	}
	switch {
	case again != nil:
		blocks = append(blocks, *again) // a regenerate: the same block again
	case now.Block != "" && at.User >= 0:
		blocks = append(blocks, convBlock{
			Block:  memory.Block{User: at.User, Text: now.Block},
			Digest: at.UserDigest, Hits: now.Semantic, Tokens: now.SemanticTokens, Private: now.Private,
		})
	}
	out := withBlocks(plan, blocks)
	out.Err = now.Err
	if !at.Chained {
		cs.due(cv, req.Msgs, mreq, out)
	}
	t.conv = cv
	cs.update(cv, func() {
		cv.Blocks, cv.Last, cv.Point, cv.User, cv.Advanced = blocks, out, at.Point, keptUser(req, t.User), true
		if cs.stale(t.gen, req.NS, out) {
			// A memory it carries was deleted during this recall.
			cv.Plan, cv.Blocks, cv.Last = nil, nil, nil
		}
	})
	return out
}

// recut moves a conversation's cut on, as far as a compaction would
// keep, and keeps its plan's system message byte for byte: Ollama's
// prompt cache then holds up to the first turn left out, and only the
// turns after it are read again (a rebuild would read the whole prompt).
// The blocks of the turns left out go with them. It reports false when
// the cut cannot move, or the plan would not fit even so: the plan is
// rebuilt.
func (cs *Set) recut(cv *conversation, plan *memory.Context, blocks []convBlock, msgs []memory.Message, mreq memory.Request) (*memory.Context, []convBlock, bool) {
	if cs.CompactAt <= 0 {
		return nil, nil, false
	}
	r := mreq.PromptRoom()
	keep := cs.cutFor(msgs, int(float64(r)*cs.CompactAt/3))
	// Only a cut that frees room for several turns moves: one that
	// freed a turn's worth would move again at the next turn.
	if grow := growRoom(mreq); keep <= plan.KeepFrom || cs.weight(msgs, plan.KeepFrom, keep, grow) < grow {
		return nil, nil, false
	}
	p := *plan
	p.KeepFrom = keep
	var kept []convBlock
	for _, b := range blocks {
		if b.User >= keep {
			kept = append(kept, b)
		}
	}
	if cs.over(withBlocks(&p, kept), msgs, r-growRoom(mreq)) {
		return nil, nil, false
	}
	cs.update(cv, func() {
		cv.Plan = &p
		cv.Compaction.KeepFrom, cv.Compaction.digest = keep, coveredDigest(msgs, keep)
	})
	return &p, kept, true
}

// laterRequest is a later turn's recall: only what is not in the prompt
// yet (the plan's memories, the blocks' hits, and what mreq excludes),
// with what the prompt already holds taking its part of the window.
func laterRequest(mreq memory.Request, plan *memory.Context, blocks []convBlock) memory.Request {
	exclude := maps.Clone(mreq.Exclude)
	if exclude == nil {
		exclude = map[string]bool{}
	}
	for _, id := range plan.IDs() {
		exclude[id] = true
	}
	held := []string{plan.System}
	for _, m := range plan.Recent {
		held = append(held, m.Content)
	}
	for _, b := range blocks {
		held = append(held, b.Text)
		for _, h := range b.Hits {
			exclude[h.ID] = true
		}
	}
	mreq.Later, mreq.Exclude, mreq.Held = true, exclude, held
	return mreq
}

// fresh chooses a chat's layers afresh and makes them its conversation's
// plan (a rebuild says why).
func (cs *Set) fresh(req Request, t *Turn, cv *conversation, mreq memory.Request, st step, why string) *memory.Context {
	// Leave the conversation room to grow, or its next turns would
	// rebuild again.
	mreq.Reserve = max(mreq.Reserve, growRoom(mreq))
	keep, covered, summary := 0, 0, ""
	if cv != nil && !t.at.First && !t.at.Chained {
		cs.locked(func() { keep, covered, summary = cv.Compaction.KeepFrom, cv.Compaction.Covered, cv.Compaction.Summary })
	}
	mc, keep := cs.recallCompacted(mreq, st, keep, covered, summary)
	if why != "" {
		st.log.Debug("conversation plan rebuilt", slog.String("why", why))
	}
	if cv == nil || t.at.First {
		cv = cs.start(req.NS, t.at.Key, t.at.Strong)
	}
	t.conv = cv
	if !t.at.Chained {
		cs.update(cv, func() { cv.Compaction.KeepFrom, cv.Compaction.digest = keep, coveredDigest(req.Msgs, keep) })
		cs.due(cv, req.Msgs, mreq, mc)
	}
	cs.update(cv, func() {
		cv.Plan, cv.Blocks = nil, nil
		if mc.Err == nil && !cs.EveryTurn {
			// A plan made while memory failed would keep the conversation
			// without memory: the next turn tries again.
			cv.Plan = mc
		}
		cv.Last, cv.Point, cv.User = mc, t.at.Point, keptUser(req, t.User)
		cv.Advanced = cv.Advanced || !t.at.First
		if cs.stale(t.gen, req.NS, mc) {
			// A memory it carries was deleted during this recall.
			cv.Plan, cv.Last = nil, nil
		}
	})
	return mc
}

// Follow places a chat that gets no memory layers (its memory stays on
// this machine) in its conversation, as Layers would: a regenerate or an
// edit then replaces the turn it redoes, and a tool loop is stored once.
func (cs *Set) Follow(req Request) *Turn {
	at := placeOf(req.NS, req.Thread, req.Msgs)
	cs.sync(req.NS, at)
	var cv *conversation
	if !at.First {
		cv = cs.get(at.Key)
	}
	if cv == nil {
		cv = cs.start(req.NS, at.Key, at.Strong)
	}
	cs.update(cv, func() {
		cv.Point = at.Point
		cv.Advanced = cv.Advanced || !at.First
	})
	return &Turn{conv: cv, at: at, User: req.User}
}

// Record notes that the turn's answer was recorded as turn id, and returns
// the ID of the turn it replaces (a regenerate or an edit), if any.
func (cs *Set) Record(t *Turn, id string, now time.Time) (replaces string) {
	cs.locked(func() { replaces = t.conv.replace(t.at.Point, id, now, t.at.Strong) })
	return replaces
}

// Answered makes the turn's conversation known by what the client will
// send back with its next turn: the first answer given to its first
// message, or the answer's Responses id.
func (cs *Set) Answered(t *Turn, ns, answer, responseID string) {
	if t.at.AnswerKey != nil && strings.TrimSpace(answer) != "" {
		cs.alias(t.conv, t.at.AnswerKey(answer))
	}
	if responseID != "" {
		cs.alias(t.conv, responseKey(ns, responseID))
	}
}

// keptUser is the user text a conversation keeps for the turn under way:
// only a loop chained by id needs it, and only a bounded one is kept (a
// conversation must stay small).
func keptUser(req Request, user string) string {
	if !req.KeepUser || len(user) > maxKeptUser {
		return ""
	}
	return user
}

// withBlocks returns plan with blocks in place, reporting their memories
// with the plan's.
func withBlocks(plan *memory.Context, blocks []convBlock) *memory.Context {
	out := *plan
	out.Semantic = slices.Clone(plan.Semantic)
	out.Private = slices.Clone(plan.Private)
	out.Blocks = make([]memory.Block, len(blocks))
	for i, b := range blocks {
		out.Blocks[i] = b.Block
		out.Semantic = append(out.Semantic, b.Hits...)
		out.SemanticTokens += b.Tokens
		for _, why := range b.Private {
			if !slices.Contains(out.Private, why) {
				out.Private = append(out.Private, why)
			}
		}
	}
	return &out
}

// growRoom is the room a plan leaves its conversation to grow in before
// it must be rebuilt or compacted: an eighth of the window.
func growRoom(mreq memory.Request) int { return mreq.Window() / 8 }
