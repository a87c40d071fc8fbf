package proxy

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/vera-proxy/vera/dialect"
	"github.com/vera-proxy/vera/memory"
)

// maxHold bounds how long the end of an answer waits for its turn to be
// committed: past it the answer ends anyway and health says why.
const maxHold = time.Second

// teeFor returns the tee that reads the answer, ending in the chat's
// turnEnd; nil when nothing needs the answer.
func (pl *pipeline) teeFor(ctx context.Context, log *slog.Logger, ch *chat) *answerTee {
	record := pl.recorder != nil && !ch.off && !ch.untouched && !ch.temporary
	if record && !ch.forgetting && !ch.uncommanded && pl.commands != nil && ch.user != ch.commanded {
		// The user text came from the conversation after command ran (a
		// Responses loop chained by id).
		kind, _ := pl.commands.Parse(ch.user)
		ch.forgetting = kind == memory.Forget
	}
	record = record && !ch.forgetting
	// A request chained by previous_response_id carries only its newest
	// messages: its count says nothing of what vera sent.
	learn := pl.calibrator != nil && !ch.untouched && ch.plan.window > 0 && ch.req.PreviousResponseID() == ""
	use := pl.usage != nil && len(ch.injected) > 0
	if !record && !learn && !use && (pl.debug == nil || ch.untouched) {
		return nil
	}
	tee := &answerTee{d: ch.d}
	end := &turnEnd{pl: pl, ch: ch, log: log, learn: learn, use: use}
	if record && strings.TrimSpace(ch.user) != "" {
		end.record = &memory.Turn{Namespace: ch.ns, Model: ch.req.ModelName(), User: ch.user, Source: ch.source(memory.ViaChat), Private: ch.private}
		end.ctx = context.WithoutCancel(ctx)
	}
	if learn || ch.turn != nil || use || end.record != nil {
		tee.onEnd = end
	}
	return tee
}

// turnEnd is what a chat does once its answer ended cleanly, before the
// client can tell, in order: the model's tokens learnt from the answer,
// the conversation told the answer, the turn committed, the conversation
// kept for its next turn, and the memories' use noted.
type turnEnd struct {
	pl  *pipeline
	ch  *chat
	log *slog.Logger
	// learn: the calibrator learns the model's tokens from the answer;
	// use: the memories injected are counted (Server.Usage).
	learn, use bool
	// record is the turn to commit, its answer still to come; nil: none.
	// ctx is the request's, which it outlives.
	record *memory.Turn
	ctx    context.Context
}

var _ answerEnd = (*turnEnd)(nil)

func (e *turnEnd) answered(a *dialect.Answer) {
	pl, ch := e.pl, e.ch
	if e.learn {
		// Off the chat path: it must not block.
		p := ch.plan
		pl.calibrator.learn(calibration{model: p.model, d: ch.d, body: ch.body, reported: a.PromptTokens, window: p.window, prior: p.prior})
	}
	if ch.turn != nil {
		// Before the client can send the next request.
		pl.convs.Answered(ch.turn, ch.ns, a.Content.String(), a.ResponseID)
	}
	if text, ok := turnAnswer(a); ok && e.record != nil {
		e.commit(text)
	}
	if ch.turn != nil {
		// Its next turn may come as soon as the client hears this one
		// is complete.
		pl.convs.Keep(ch.turn)
	}
	if e.use {
		// Note adds to a map, flushed in the background.
		pl.usage.Note(ch.ns, ch.injected, time.Now().UTC())
	}
}

// commit commits the finished turn to the durable queue, waiting at most
// maxHold, so that the client has its whole answer only once the turn
// survives a crash. Who the namespace is is noted with a turn stored only:
// a request that stores nothing (a load call, memory off) adds no
// namespace.
func (e *turnEnd) commit(answer string) {
	pl, ch, t := e.pl, e.ch, *e.record
	// Thinking is never stored, also when a model writes it inline.
	t.Assistant, t.Time = dialect.StripThink(ch.prefill+answer), time.Now().UTC()
	if ch.turn != nil {
		// A regenerate or an edit replaces the turn recorded at its
		// place in the conversation.
		t.ID = memory.NewID()
		t.Replaces = pl.convs.Record(ch.turn, t.ID, t.Time)
	}
	ctx, cancel := context.WithTimeout(e.ctx, maxHold)
	defer cancel()
	if err := pl.recorder.Record(ctx, t); err != nil {
		e.log.Debug("answer released before its turn was committed", slog.Any("error", err))
		return
	}
	pl.directory.Note(ch.ns, ch.name, ch.email, t.Time)
}
