package proxy

import (
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/vera-proxy/vera/memory"
)

// layers decides what memory a chat gets, as a turn of its conversation
// (Conversations):
//   - a first turn, a conversation vera has forgotten, or any turn with
//     RecallEveryTurn: layers chosen afresh, which become the plan;
//   - a step of an agent's tool loop: what its turn forwarded, again;
//   - a later turn: the plan byte for byte, the blocks earlier turns added
//     where they were, and a block of what became relevant now at the
//     start of the user's message; the plan is rebuilt when the system
//     layer's sources changed or the conversation outgrew the window.
func (s *Server) layers(c *gin.Context, ch *chat) *memory.Context {
	mreq := s.memoryRequest(c, ch)
	if ch.off || ch.d == ollamaGenerate {
		// Memory off, or a prompt without history: no conversation.
		return s.recall(c, mreq)
	}
	at := placeOf(ch.ns, threadOf(ch.chatID, ch.req), ch.msgs)
	ch.at, ch.gen = at, s.convs.generation()
	if id := s.convs.replacing(at, time.Now()); id != "" {
		// A regenerate is not primed with the answer it replaces, nor an
		// edit with the words taken back.
		mreq.Exclude = map[string]bool{id: true}
	}
	var cv *conversation
	if !at.first {
		cv = s.convs.get(at.key)
	}
	if last := s.toolLoopStep(ch, cv, &at); last != nil {
		return last
	}
	if len(ch.msgs) == 0 {
		return &memory.Context{} // chained to an answer vera forgot
	}
	var plan *memory.Context
	var blocks []convBlock
	if cv != nil && !s.RecallEveryTurn {
		s.convs.locked(func() { plan, blocks = cv.plan, slices.Clone(cv.blocks) })
	}
	if plan == nil {
		return s.freshLayers(c, ch, cv, mreq, "")
	}
	return s.laterTurn(c, ch, cv, at, mreq, plan, blocks)
}

// toolLoopStep returns what the turn under way forwarded, for a later step
// of its agent's tool loop: no new recall. nil when the request is none.
// A step chained by id takes its question's point into at.
func (s *Server) toolLoopStep(ch *chat, cv *conversation, at *place) *memory.Context {
	if !at.toolLoop || cv == nil {
		return nil
	}
	var last *memory.Context
	s.convs.locked(func() {
		if at.chained {
			// Each step links to the step before by its id: the loop
			// stands where its question did.
			at.point = cv.point
		}
		if cv.point == at.point {
			last = cv.last
			if ch.user == "" {
				ch.user = cv.user // a Responses loop chained by id
			}
		}
	})
	if last != nil {
		ch.conv, ch.at = cv, *at
	}
	return last
}

// laterTurn keeps a later turn's plan and the blocks of the turns before,
// adds a block of what became relevant now, and rebuilds the plan when the
// system layer changed or the conversation outgrew its window.
func (s *Server) laterTurn(c *gin.Context, ch *chat, cv *conversation, at place, mreq memory.Request, plan *memory.Context, blocks []convBlock) *memory.Context {
	blocks, again := keptBlocks(blocks, ch.msgs, at)
	now := s.recall(c, laterRequest(mreq, plan, blocks))
	switch {
	case now.Err == nil && now.Sources != plan.Sources:
		return s.freshLayers(c, ch, cv, mreq, "the system layer changed")
	case now.Full:
		// Leave an eighth of the window for the conversation to grow, or
		// every next turn would rebuild again.
		mreq.Reserve = mreq.ContextLength / 8
		return s.freshLayers(c, ch, cv, mreq, "the conversation outgrew the context window")
	}
	switch {
	case again != nil:
		blocks = append(blocks, *again) // a regenerate: the same block again
	case now.Block != "" && at.user >= 0:
		blocks = append(blocks, convBlock{
			Block:  memory.Block{User: at.user, Text: now.Block},
			digest: at.userDigest, hits: now.Semantic, tokens: now.SemanticTokens,
		})
	}
	out := withBlocks(plan, blocks)
	out.Err = now.Err
	ch.conv = cv
	s.convs.update(cv, func() {
		cv.blocks, cv.last, cv.point, cv.user, cv.advanced = blocks, out, at.point, keptUser(ch), true
		if s.convs.stale(ch.gen, ch.ns, out) {
			// A memory it carries was deleted during this recall.
			cv.plan, cv.blocks, cv.last = nil, nil, nil
		}
	})
	return out
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
		for _, h := range b.hits {
			exclude[h.ID] = true
		}
	}
	mreq.Later, mreq.Exclude, mreq.Held = true, exclude, held
	return mreq
}

// follow places a chat that gets no memory layers (its memory stays on
// this machine) in its conversation, as layers would: a regenerate or an
// edit then replaces the turn it redoes, and a tool loop is stored once.
func (s *Server) follow(ch *chat) {
	if s.Recorder == nil || ch.off || ch.d == ollamaGenerate || len(ch.msgs) == 0 {
		return // nothing is recorded, or no conversation to follow
	}
	at := placeOf(ch.ns, threadOf(ch.chatID, ch.req), ch.msgs)
	ch.at = at
	var cv *conversation
	if !at.first {
		cv = s.convs.get(at.key)
	}
	if cv == nil {
		cv = s.convs.start(at.key, at.strong)
	}
	ch.conv = cv
	s.convs.update(cv, func() {
		cv.point, cv.ns = at.point, ch.ns
		cv.advanced = cv.advanced || !at.first
	})
}

// freshLayers chooses a chat's layers afresh and makes them its
// conversation's plan (a rebuild says why).
func (s *Server) freshLayers(c *gin.Context, ch *chat, cv *conversation, mreq memory.Request, why string) *memory.Context {
	mc := s.recall(c, mreq)
	if why != "" {
		s.log.Debug("conversation plan rebuilt", slog.String("why", why), slog.String("request_id", c.GetString(requestIDKey)))
	}
	if cv == nil || ch.at.first {
		cv = s.convs.start(ch.at.key, ch.at.strong)
	}
	ch.conv = cv
	s.convs.update(cv, func() {
		cv.plan, cv.blocks = nil, nil
		if mc.Err == nil && !s.RecallEveryTurn {
			// A plan made while memory failed would keep the conversation
			// without memory: the next turn tries again.
			cv.plan = mc
		}
		cv.last, cv.point, cv.user, cv.ns = mc, ch.at.point, keptUser(ch), ch.ns
		cv.advanced = cv.advanced || !ch.at.first
		if s.convs.stale(ch.gen, ch.ns, mc) {
			// A memory it carries was deleted during this recall.
			cv.plan, cv.last = nil, nil
		}
	})
	return mc
}

// keptBlocks returns the blocks of earlier turns that still stand where
// they were put (an edit of an earlier message drops its block and every
// later one), and the block of the request's own user message when it is
// asked again unchanged (a regenerate).
func keptBlocks(blocks []convBlock, msgs []memory.Message, at place) (kept []convBlock, again *convBlock) {
	users := map[int]string{}
	n := 0
	for _, m := range msgs {
		if m.Role == "user" {
			if n < at.user {
				users[n] = messageDigest(m.Content)
			}
			n++
		}
	}
	for i, b := range blocks {
		switch {
		case b.User < at.user && users[b.User] == b.digest:
			kept = append(kept, b)
			continue
		case b.User == at.user && b.digest == at.userDigest:
			again = &blocks[i]
		}
		break
	}
	return kept, again
}

// withBlocks returns plan with blocks in place, reporting their memories
// with the plan's.
func withBlocks(plan *memory.Context, blocks []convBlock) *memory.Context {
	out := *plan
	out.Semantic = slices.Clone(plan.Semantic)
	out.Blocks = make([]memory.Block, len(blocks))
	for i, b := range blocks {
		out.Blocks[i] = b.Block
		out.Semantic = append(out.Semantic, b.hits...)
		out.SemanticTokens += b.tokens
	}
	return &out
}

// followAnswer returns the tee's onStep for a chat in a conversation: the
// conversation becomes known by what the client will send back with its
// next turn, the first answer vera gave to its first message, or the
// answer's Responses id.
func (s *Server) followAnswer(ch *chat) func(*answerTee) {
	return func(t *answerTee) {
		if answer := t.content.String(); ch.at.answerKey != nil && strings.TrimSpace(answer) != "" {
			s.convs.alias(ch.conv, ch.at.answerKey(answer))
		}
		if t.responseID != "" {
			s.convs.alias(ch.conv, responseKey(ch.ns, t.responseID))
		}
	}
}

// maxKeptUser bounds the user text a conversation keeps between requests.
const maxKeptUser = 64 << 10

// keptUser is the user text a conversation keeps for the turn under way:
// only a Responses loop chained by id needs it, and only a bounded one is
// kept (a conversation must stay small).
func keptUser(ch *chat) string {
	if ch.d != openAIResponses || len(ch.user) > maxKeptUser {
		return ""
	}
	return ch.user
}
