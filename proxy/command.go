package proxy

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"

	"github.com/vera-proxy/vera/memory"
)

// command carries out a memory command at the start of the user's own
// message: "remember that ..." stores the statement as a curated
// memory now; "forget that ..." hides the memories that hold all its
// content words, names them in X-Vera-Forgot, takes them out of running
// conversations, and keeps the request from being stored. The answer
// comes from the model as usual. A failure is logged: the chat goes on.
func (pl *pipeline) command(ctx context.Context, log *slog.Logger, h http.Header, ch *chat) {
	if pl.commands == nil || ch.untouched || ch.off || ch.temporary {
		return
	}
	kind, statement := pl.commands.Parse(ch.user)
	if ch.uncommanded {
		// Not run, since a document may have written it; but a request
		// that may be the user's to forget is never stored either.
		ch.forgetting = kind == memory.Forget
		return
	}
	ch.commanded = ch.user
	if kind == memory.Forget {
		// Never stored, in any step of its turn (a tool loop's, one
		// continuing a prefill): the fact would come straight back.
		ch.forgetting = true
	}
	if n := len(ch.msgs); n == 0 || ch.msgs[n-1].Role != "user" || ch.req.ToolLoop() {
		return // the command ran at its turn's first step
	}
	switch kind {
	case memory.Remember:
		pl.rememberThat(ctx, log, ch, statement)
	case memory.Forget:
		pl.forgetThat(ctx, log, h, ch, statement)
	}
}

// rememberThat stores statement as a curated memory of the chat's
// namespace.
func (pl *pipeline) rememberThat(ctx context.Context, log *slog.Logger, ch *chat, statement string) {
	mid, err := pl.commands.Remember(ctx, ch.ns, statement, ch.source(memory.ViaCommand))
	if err != nil {
		log.Warn("remembering at the user's request", slog.Any("error", err))
		return
	}
	log.Debug("remembered at the user's request", slog.String("memory", mid))
}

// forgetThat hides the memories that hold all of statement's content
// words, and takes them out of the running conversations
// (conversation.Set.Withdraw).
func (pl *pipeline) forgetThat(ctx context.Context, log *slog.Logger, h http.Header, ch *chat, statement string) {
	ch.forgetting = true
	ids, err := pl.commands.Forget(ctx, ch.ns, statement)
	if errors.Is(err, memory.ErrTooBroad) {
		log.Info("a request to forget named no single fact", slog.Any("error", err))
		return
	}
	if err != nil {
		log.Warn("forgetting at the user's request", slog.Any("error", err))
	}
	if len(ids) > 0 {
		if n := pl.convs.Withdraw("", ids...); n > 0 {
			log.Debug("conversations rebuild without forgotten memories", slog.Int("conversations", n))
		}
		h.Set("X-Vera-Forgot", strings.Join(ids, ","))
	}
	log.Debug("forgot at the user's request", slog.Int("memories", len(ids)))
}
