package proxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"

	"github.com/vera-proxy/vera/dialect"
	"github.com/vera-proxy/vera/proxy/tier"
	"github.com/vera-proxy/vera/proxy/vram"
)

// Tier routing ([routing]): a virtual model name is sent to the
// light, medium or complex model the message calls for, in the route
// step, before recall, so memory is sized for the model that answers.

// Routing is what the route step needs of [routing].
type Routing struct {
	Router *tier.Router
	// Virtual is routed automatically; Deep always to complex.
	Virtual, Deep string
	// Models are the tier models (a cloud name may be one).
	Models map[tier.Tier]string
}

// virtual reports whether model is one of the virtual names.
func (r *Routing) virtual(model string) bool {
	if r == nil {
		return false
	}
	return sameModel(model, r.Virtual) || sameModel(model, r.Deep)
}

// sameModel compares names as Ollama does: no tag means :latest.
func sameModel(a, b string) bool {
	if b == "" {
		return false
	}
	if !strings.Contains(a, ":") {
		a += ":latest"
	}
	if !strings.Contains(b, ":") {
		b += ":latest"
	}
	return a == b
}

// tierModel returns the model of t, or of the nearest configured tier
// (medium first).
func (r *Routing) tierModel(t tier.Tier) (tier.Tier, string) {
	if m := r.Models[t]; m != "" {
		return t, m
	}
	for _, alt := range []tier.Tier{tier.Medium, tier.Light, tier.Complex} {
		if m := r.Models[alt]; m != "" {
			return alt, m
		}
	}
	return t, ""
}

// routeTier sends a chat for a virtual name to its tier's model: it
// rewrites the request (model, and a /think prefix taken off with think
// set), and reports the choice in X-Vera-Tier. It returns the name the
// answer must carry back, "" when the chat is not for a virtual name.
func (pl *pipeline) routeTier(ctx context.Context, log *slog.Logger, h http.Header, ch *chat) (string, error) {
	asked := ch.req.ModelName()
	if !pl.routing.virtual(asked) {
		return "", nil
	}
	var d tier.Decision
	if ch.untouched {
		// A background task (a title, search queries...) or a load call:
		// the light model, never a flush for the complex one.
		d = tier.Decision{Tier: tier.Light, By: "task"}
	} else {
		d = pl.routing.Router.Classify(ctx, ch.user, sameModel(asked, pl.routing.Deep))
	}
	ch.unrouted = ch.body
	t, model, err := pl.retargetChat(ctx, ch, d.Tier, d.Think)
	if err != nil {
		return "", err
	}
	h.Set("X-Vera-Tier", string(t)+" "+model)
	pl.metrics.routed(string(t), d.By)
	ch.route = map[string]any{"asked": asked, "tier": string(t), "model": model, "by": d.By, "rule": d.Rule, "scores": d.Scores, "url": d.URL, "think": d.Think}
	log.Debug("routed", "asked", asked, "tier", string(t), "model", model, "by", d.By, "rule", d.Rule, "scores", fmt.Sprint(d.Scores))
	return asked, nil
}

// retargetChat rewrites the chat as it came (ch.unrouted) for the model of
// tier want: the model name, and for a /think prefix (strip) the prefix
// off the last user text, with thinking asked of a model that can think.
// What memory reads follows: the user's own question stays as decode took
// it (the RAG template's query, say), less the prefix.
func (pl *pipeline) retargetChat(ctx context.Context, ch *chat, want tier.Tier, strip bool) (tier.Tier, string, error) {
	t, model := pl.routing.tierModel(want)
	if model == "" {
		return t, "", httpError(http.StatusServiceUnavailable, fmt.Sprintf("model %q routes to tiers, and no tier model is set ([routing] light, medium, complex)", ch.req.ModelName()), nil)
	}
	think := strip
	if think {
		// Ask for thinking only of a model that can: others refuse it.
		caps := pl.catalog.capabilities(ctx, model)
		think = caps == nil || slices.Contains(caps, "thinking")
	}
	body, err := ch.d.Retarget(ch.unrouted, model, strip, think)
	if err != nil {
		return t, "", httpError(http.StatusBadRequest, err.Error(), nil)
	}
	req, err := ch.d.Parse(body)
	if err != nil {
		return t, "", httpError(http.StatusBadRequest, err.Error(), nil)
	}
	ch.body, ch.req = body, req
	if !ch.untouched {
		shared := len(ch.recall) == 0 || len(ch.msgs) == 0 || &ch.recall[0] == &ch.msgs[0]
		ch.msgs = req.MemoryMessages()
		if strip {
			ch.user = dialect.StripThinkPrefix(ch.user)
		}
		if shared {
			ch.recall = ch.msgs
		}
	}
	return t, model, nil
}

// makeRoom runs the VRAM step for a chat that goes to Ollama: a large
// model gets the GPU to itself first; other chats wait while that is
// being done. When the room cannot be made in time, a routed chat goes to
// the medium tier instead (rerouted), and a chat that named its model
// goes on with X-Vera-VRAM: flush-timeout. It returns what to run once
// the answer is over.
func (pl *pipeline) makeRoom(ctx context.Context, log *slog.Logger, h http.Header, ch *chat, asked string) (func(), error) {
	if pl.vram == nil || ch.plan.cloud {
		return func() {}, nil // the cloud's, not this GPU's
	}
	after, err := pl.vram.Before(ctx, ch.req.ModelName())
	switch {
	case err == nil:
		pl.metrics.flushed("ok")
		return after, nil
	case ctx.Err() != nil:
		return after, httpError(StatusClientClosed, "client closed request", err)
	case !errors.Is(err, vram.ErrFlushTimeout):
		// Ollama's /api/ps failed: go on without the flush.
		log.Warn("VRAM flush skipped", "model", ch.req.ModelName(), "error", err)
		return after, nil
	}
	pl.metrics.flushed("timeout")
	h.Set("X-Vera-VRAM", "flush-timeout")
	if asked == "" || pl.routing == nil {
		return after, nil // the model the chat named, serialised still
	}
	if _, medium := pl.routing.tierModel(tier.Medium); medium == "" || sameModel(medium, ch.req.ModelName()) {
		return after, nil
	}
	after() // the large model will not answer this chat
	return func() {}, pl.rerouteMedium(ctx, log, h, ch, asked)
}

// rerouteMedium sends a routed chat whose large model found no room to
// the medium tier's model.
func (pl *pipeline) rerouteMedium(ctx context.Context, log *slog.Logger, h http.Header, ch *chat, asked string) error {
	instead := ch.req.ModelName()
	t, medium, err := pl.retargetChat(ctx, ch, tier.Medium, ch.route != nil && ch.route["think"] == true)
	if err != nil {
		return err
	}
	_ = pl.route(ctx, ch) // a cloud medium model goes to the cloud
	log.Warn("VRAM flush timed out: the chat goes to the medium tier", "asked", asked, "instead_of", instead, "model", medium)
	h.Set("X-Vera-Tier", string(t)+" "+medium)
	return nil
}
