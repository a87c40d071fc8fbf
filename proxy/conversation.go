package proxy

import "log/slog"

// withdraw takes deleted or hidden memories out of the running
// conversations (conversation.Set.Withdraw): a "forget that" does.
func (s *Server) withdraw(ns string, ids ...string) {
	if s.convs == nil {
		return // no Handler yet: no conversation
	}
	if n := s.convs.Withdraw(ns, ids...); n > 0 {
		s.log.Debug("conversations rebuild without forgotten memories", slog.Int("conversations", n))
	}
}
