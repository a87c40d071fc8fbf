package proxy

import (
	"log/slog"

	"github.com/gin-gonic/gin"

	"github.com/vera-proxy/vera/memory"
	"github.com/vera-proxy/vera/memory/conversation"
)

// layers decides what memory a chat gets: as a turn of its conversation
// (conversation.Set.Layers), unless memory is off or the request carries
// no history.
func (s *Server) layers(c *gin.Context, ch *chat) *memory.Context {
	mreq := s.memoryRequest(ch)
	if ch.off || !ch.req.History() {
		// Memory off, or a prompt without history: no conversation.
		return s.recall(c, mreq)
	}
	mc, turn := s.convs.Layers(s.convRequest(ch), mreq, conversation.Step{
		Recall:    func(r memory.Request) *memory.Context { return s.recall(c, r) },
		EveryTurn: s.RecallEveryTurn,
		Rebuilt: func(why string) {
			s.log.Debug("conversation plan rebuilt", slog.String("why", why), slog.String("request_id", c.GetString(requestIDKey)))
		},
	})
	s.joined(ch, turn)
	return mc
}

// follow places a chat that gets no memory layers (its memory stays on
// this machine) in its conversation (conversation.Set.Follow).
func (s *Server) follow(ch *chat) {
	if s.Recorder == nil || ch.off || !ch.req.History() || len(ch.msgs) == 0 {
		return // nothing is recorded, or no conversation to follow
	}
	s.joined(ch, s.convs.Follow(s.convRequest(ch)))
}

// convRequest is what the conversation step needs of a chat.
func (s *Server) convRequest(ch *chat) conversation.Request {
	return conversation.Request{NS: ch.ns, Thread: threadOf(ch.chatID, ch.req), Msgs: ch.msgs, User: ch.user, KeepUser: ch.req.ChainsByID()}
}

// joined takes a chat's turn in its conversation: a step of a Responses
// loop chained by id gets its question's user text.
func (s *Server) joined(ch *chat, turn *conversation.Turn) {
	ch.turn = turn
	if turn != nil && ch.user == "" {
		ch.user = turn.User
	}
}
