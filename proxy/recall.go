package proxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/vera-proxy/vera/dialect"
	"github.com/vera-proxy/vera/memory"
	"github.com/vera-proxy/vera/memory/conversation"
)

// maxMemoriesHeader is how many ids X-Vera-Memories lists at most.
const maxMemoriesHeader = 50

// recaller is memory's recall as the pipeline makes it (Server.Memory),
// for a chat outside any conversation and for the conversations alike: it
// is timed, and it never fails a chat. A failure is logged once, when it
// starts, and its end once too; the chat goes on without memory.
type recaller struct {
	memory  Recaller
	metrics *Metrics
	// down is set while memory fails.
	down atomic.Bool
}

var _ conversation.Recaller = (*recaller)(nil)

// Recall builds memory layers; log carries the request's id.
func (r *recaller) Recall(ctx context.Context, log *slog.Logger, mreq memory.Request) *memory.Context {
	start := time.Now()
	mc := r.memory.Recall(ctx, mreq)
	r.metrics.recalled(time.Since(start), mc.SemanticTokens, mc.RecentTokens, mc.RulesTokens)
	ns := slog.String("namespace", mreq.Namespace)
	switch {
	case errors.Is(mc.Err, memory.ErrLoading):
		// Expected for the first seconds after a start; healthz tells.
		log.Debug("chat answered without memory while the store loads", ns, slog.Any("error", mc.Err))
	case mc.Err != nil && r.down.CompareAndSwap(false, true):
		log.Warn("memory failing: chats are answered without it until it recovers", ns, slog.Any("error", mc.Err))
	case mc.Err != nil:
		log.Debug("chat answered without memory", ns, slog.Any("error", mc.Err))
	case r.down.CompareAndSwap(true, false):
		log.Info("memory recovered")
	}
	return mc
}

// remember gives the chat the memory its plan allows: none to an
// untouched request; to a chat whose model is sent none, its place in its
// conversation;
// else the layers recalled and written in. It returns what was injected;
// nil: nothing.
func (pl *pipeline) remember(ctx context.Context, log *slog.Logger, h http.Header, ch *chat) (*memory.Context, error) {
	p := &ch.plan
	switch {
	case ch.untouched:
		return nil, nil
	case !p.memory:
		pl.follow(ch) // no memory leaves, but the turn is still one of its conversation's
		return nil, nil
	}
	mc, err := pl.inject(ctx, log, h, ch)
	if err != nil || mc == nil {
		return mc, err
	}
	ch.private = mc.Private
	if mc.Err == nil {
		ch.injected = mc.IDs()
		pl.metrics.keptBack(pl.knownModel(p.model), mc.Withheld)
	}
	if p.fb != nil && len(mc.IDs()) > 0 &&
		(p.fallback.policy == memory.None || p.fallback.policy == memory.Shareable && !mc.Shareable) {
		// Built under a policy that sends more than the cloud's: the
		// fallback gets the chat as the client sent it.
		p.fb.memory, p.fallback.memory = false, false
	}
	return mc, nil
}

// inject recalls the memory layers and writes them into the request in its
// dialect's shape, reporting what was injected in the response headers.
func (pl *pipeline) inject(ctx context.Context, log *slog.Logger, h http.Header, ch *chat) (*memory.Context, error) {
	if pl.memory == nil {
		return nil, nil
	}
	mc := pl.layers(ctx, log, ch)
	if forward := ch.req.WithMemory(mc); forward != nil {
		body, err := dialect.Marshal(forward)
		if err != nil {
			return nil, fmt.Errorf("encoding the chat request: %w", err)
		}
		ch.body = body
	}
	setMemoryHeaders(h, mc, ch.owui)
	if pl.calibrator.Untold(ch.plan.model) {
		// An earlier prompt for this model was cut: say so once.
		h.Set("X-Vera-Context", h.Get("X-Vera-Context")+"; overflow=1")
	}
	return mc, nil
}

// layers decides what memory a chat gets: as a turn of its conversation
// (conversation.Set.Layers), unless memory is off or the request carries
// no history.
func (pl *pipeline) layers(ctx context.Context, log *slog.Logger, ch *chat) *memory.Context {
	mreq := pl.memoryRequest(ch)
	if ch.off || !ch.req.History() {
		// Memory off, or a prompt without history: no conversation.
		return pl.memory.Recall(ctx, log, mreq)
	}
	mc, turn := pl.convs.Layers(ctx, log, convRequest(ch), mreq)
	joined(ch, turn)
	return mc
}

// memoryRequest is what recall needs to know of a chat: its route's
// window and Modelfile SYSTEM (plan), the answer's cap, the messages.
func (pl *pipeline) memoryRequest(ch *chat) memory.Request {
	_, numPredict := ch.req.Options()
	// The budgets are vera's tokens; the window and the answer's cap the
	// model's.
	sc := ch.plan.scale
	mreq := memory.Request{Namespace: ch.ns, NoMemory: ch.off, ContextLength: sc.Within(ch.plan.window), ModelSystem: ch.plan.system,
		AnswerTokens: sc.Within(max(numPredict, 0)), Messages: ch.msgs, Shareable: ch.plan.policy == memory.Shareable}
	if ch.owui != nil && pl.owuiMemory != OpenWebUIDrop {
		// The model reads Open WebUI's facts: vera does not repeat them.
		// Dropped, they are vera's to tell.
		mreq.Carried, mreq.CarriedBlock = ch.owui.facts, true
	}
	if len(ch.recall) > 0 && &ch.recall[0] != &ch.msgs[0] {
		mreq.Recall = ch.recall
	}
	return mreq
}

// follow places a chat that gets no memory layers (its memory stays on
// this machine) in its conversation (conversation.Set.Follow).
func (pl *pipeline) follow(ch *chat) {
	if pl.recorder == nil || ch.off || !ch.req.History() || len(ch.msgs) == 0 {
		return // nothing is recorded, or no conversation to follow
	}
	joined(ch, pl.convs.Follow(convRequest(ch)))
}

// convRequest is what the conversation step needs of a chat.
func convRequest(ch *chat) conversation.Request {
	msgs := ch.msgs
	if ch.own != nil {
		msgs = ch.own
	}
	return conversation.Request{NS: ch.ns, Thread: threadOf(ch.chatID, ch.req), Msgs: msgs, User: ch.user, KeepUser: ch.req.ChainsByID()}
}

// joined takes a chat's turn in its conversation: a step of a Responses
// loop chained by id gets its question's user text.
func joined(ch *chat, turn *conversation.Turn) {
	ch.turn = turn
	if turn != nil && ch.user == "" {
		ch.user = turn.User
	}
}

// setMemoryHeaders reports what was injected.
func setMemoryHeaders(h http.Header, mc *memory.Context, owui *owuiBlock) {
	vc := fmt.Sprintf("semantic=%d; recent=%d; rules=%d; tokens=%d", len(mc.Semantic), len(mc.RecentIDs), len(mc.RuleIDs), mc.Tokens())
	switch {
	case errors.Is(mc.Err, memory.ErrLoading):
		// The store is loading its index: the chat went without memory.
		vc = "loading"
	default:
		if mc.Withheld > 0 {
			vc += fmt.Sprintf("; withheld=%d", mc.Withheld)
		}
		if owui != nil {
			vc += fmt.Sprintf("; owui=%d", len(owui.facts))
		}
		if mc.Compacted > 0 {
			vc += fmt.Sprintf("; compacted=%d", mc.Compacted)
		}
	}
	h.Set("X-Vera-Context", vc)
	if ids := mc.IDs(); len(ids) > 0 {
		h.Set("X-Vera-Memories", strings.Join(ids[:min(len(ids), maxMemoriesHeader)], ","))
	}
	h.Set("Access-Control-Expose-Headers", exposedHeaders)
}
