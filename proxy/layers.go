package proxy

import (
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/vera-proxy/vera/memory"
	"github.com/vera-proxy/vera/memory/conversation"
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
	at := conversation.PlaceOf(ch.ns, threadOf(ch.chatID, ch.req), ch.msgs)
	ch.at, ch.gen = at, s.convs.Generation()
	if id := s.convs.Replacing(at, time.Now()); id != "" {
		// A regenerate is not primed with the answer it replaces, nor an
		// edit with the words taken back.
		mreq.Exclude = map[string]bool{id: true}
	}
	var cv *conversation.Conversation
	if !at.First {
		cv = s.convs.Get(at.Key)
	}
	if last := s.toolLoopStep(ch, cv, &at); last != nil {
		return last
	}
	if len(ch.msgs) == 0 {
		return &memory.Context{} // chained to an answer vera forgot
	}
	var plan *memory.Context
	var blocks []conversation.Block
	if cv != nil && !s.RecallEveryTurn {
		s.convs.Locked(func() { plan, blocks = cv.Plan, slices.Clone(cv.Blocks) })
	}
	if plan == nil {
		return s.freshLayers(c, ch, cv, mreq, "")
	}
	return s.laterTurn(c, ch, cv, at, mreq, plan, blocks)
}

// toolLoopStep returns what the turn under way forwarded, for a later step
// of its agent's tool loop: no new recall. nil when the request is none.
// A step chained by id takes its question's point into at.
func (s *Server) toolLoopStep(ch *chat, cv *conversation.Conversation, at *conversation.Place) *memory.Context {
	if !at.ToolLoop || cv == nil {
		return nil
	}
	var last *memory.Context
	s.convs.Locked(func() {
		if at.Chained {
			// Each step links to the step before by its id: the loop
			// stands where its question did.
			at.Point = cv.Point
		}
		if cv.Point == at.Point {
			last = cv.Last
			if ch.user == "" {
				ch.user = cv.User // a Responses loop chained by id
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
func (s *Server) laterTurn(c *gin.Context, ch *chat, cv *conversation.Conversation, at conversation.Place, mreq memory.Request, plan *memory.Context, blocks []conversation.Block) *memory.Context {
	blocks, again := conversation.KeptBlocks(blocks, ch.msgs, at)
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
	case now.Block != "" && at.User >= 0:
		blocks = append(blocks, conversation.Block{
			Block:  memory.Block{User: at.User, Text: now.Block},
			Digest: at.UserDigest, Hits: now.Semantic, Tokens: now.SemanticTokens,
		})
	}
	out := conversation.WithBlocks(plan, blocks)
	out.Err = now.Err
	ch.conv = cv
	s.convs.Update(cv, func() {
		cv.Blocks, cv.Last, cv.Point, cv.User, cv.Advanced = blocks, out, at.Point, keptUser(ch), true
		if s.convs.Stale(ch.gen, ch.ns, out) {
			// A memory it carries was deleted during this recall.
			cv.Plan, cv.Blocks, cv.Last = nil, nil, nil
		}
	})
	return out
}

// laterRequest is a later turn's recall: only what is not in the prompt
// yet (the plan's memories, the blocks' hits, and what mreq excludes),
// with what the prompt already holds taking its part of the window.
func laterRequest(mreq memory.Request, plan *memory.Context, blocks []conversation.Block) memory.Request {
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

// follow places a chat that gets no memory layers (its memory stays on
// this machine) in its conversation, as layers would: a regenerate or an
// edit then replaces the turn it redoes, and a tool loop is stored once.
func (s *Server) follow(ch *chat) {
	if s.Recorder == nil || ch.off || ch.d == ollamaGenerate || len(ch.msgs) == 0 {
		return // nothing is recorded, or no conversation to follow
	}
	at := conversation.PlaceOf(ch.ns, threadOf(ch.chatID, ch.req), ch.msgs)
	ch.at = at
	var cv *conversation.Conversation
	if !at.First {
		cv = s.convs.Get(at.Key)
	}
	if cv == nil {
		cv = s.convs.Start(at.Key, at.Strong)
	}
	ch.conv = cv
	s.convs.Update(cv, func() {
		cv.Point, cv.NS = at.Point, ch.ns
		cv.Advanced = cv.Advanced || !at.First
	})
}

// freshLayers chooses a chat's layers afresh and makes them its
// conversation's plan (a rebuild says why).
func (s *Server) freshLayers(c *gin.Context, ch *chat, cv *conversation.Conversation, mreq memory.Request, why string) *memory.Context {
	mc := s.recall(c, mreq)
	if why != "" {
		s.log.Debug("conversation plan rebuilt", slog.String("why", why), slog.String("request_id", c.GetString(requestIDKey)))
	}
	if cv == nil || ch.at.First {
		cv = s.convs.Start(ch.at.Key, ch.at.Strong)
	}
	ch.conv = cv
	s.convs.Update(cv, func() {
		cv.Plan, cv.Blocks = nil, nil
		if mc.Err == nil && !s.RecallEveryTurn {
			// A plan made while memory failed would keep the conversation
			// without memory: the next turn tries again.
			cv.Plan = mc
		}
		cv.Last, cv.Point, cv.User, cv.NS = mc, ch.at.Point, keptUser(ch), ch.ns
		cv.Advanced = cv.Advanced || !ch.at.First
		if s.convs.Stale(ch.gen, ch.ns, mc) {
			// A memory it carries was deleted during this recall.
			cv.Plan, cv.Last = nil, nil
		}
	})
	return mc
}

// followAnswer returns the tee's onStep for a chat in a conversation: the
// conversation becomes known by what the client will send back with its
// next turn, the first answer vera gave to its first message, or the
// answer's Responses id.
func (s *Server) followAnswer(ch *chat) func(*answerTee) {
	return func(t *answerTee) {
		if answer := t.content.String(); ch.at.AnswerKey != nil && strings.TrimSpace(answer) != "" {
			s.convs.Alias(ch.conv, ch.at.AnswerKey(answer))
		}
		if t.responseID != "" {
			s.convs.Alias(ch.conv, conversation.ResponseKey(ch.ns, t.responseID))
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
