package proxy

import (
	"context"
	"fmt"
	"net/http"
	"path"
	"strings"

	"github.com/vera-proxy/vera/cloud"
	"github.com/vera-proxy/vera/memory"
)

// plan is where a chat goes and what goes with it. The route step decides
// it once; every later step reads it, and the answer's X-Vera-Context
// comes from the plan that answered (the fallback's, when it did).
type plan struct {
	model string // the model that answers, after tier routing
	// cloud: a cloud name, with no Modelfile and the provider's window.
	cloud bool
	up    upstream
	// policy is what the chat is sent of memory (Policies); memory:
	// anything at all.
	policy memory.Policy
	memory bool
	// fallback answers while Ollama cannot be reached (cloud.fallback_model),
	// with its own memory decision; nil: none. fb is its transport.
	fallback *plan
	fb       *fallback
	// window is the context window memory is sized for (the request's
	// num_ctx, else the model's or the provider's, at most what the model
	// was trained for), in the model's tokens; 0: unknown, the builder's
	// default.
	window int
	// scale is how many of the model's tokens one of vera's makes: what
	// was learnt of its answers, else prior.
	scale, prior memory.Scale
	// system is the Modelfile's SYSTEM, which Ollama adds only to a
	// request without a system message: once vera sends one, it carries
	// it. "" for a cloud name.
	system string
}

// route decides the chat's plan: the cloud provider for a cloud name, else
// Ollama, with the fallback model behind it. It runs after tier routing,
// and before recall, so that memory is sized for the model that answers.
// A chat it refuses keeps the plan it had.
func (pl *pipeline) route(ctx context.Context, ch *chat) error {
	model := ch.req.ModelName()
	p := plan{model: model, cloud: pl.catalog.cloudModel(model), up: pl.ollama}
	p.policy = pl.policies.policy(model, p.cloud)
	switch {
	case p.cloud && !cloud.Serves(ch.path):
		return httpError(http.StatusBadRequest, fmt.Sprintf("model %q is a cloud model: vera serves it on %s, not on %s", model, cloud.Routes, ch.path), nil)
	case p.cloud:
		p.up = upstream{url: pl.cloud.URL(), transport: pl.cloud, name: "cloud"}
	case pl.fallback != nil && !ch.untouched && cloud.Serves(ch.path):
		fp := pl.policies.policy(pl.fallback.model, true)
		if pl.fallback.active.Load() {
			// Ollama is down: the chat is built for the cloud's policy.
			p.policy = stricter(p.policy, fp)
		}
		p.fallback = &plan{model: pl.fallback.model, cloud: true, policy: fp, memory: fp != memory.None}
		p.fb = &fallback{to: pl.fallback, d: ch.d, own: ch.body, asked: model, memory: p.fallback.memory}
		p.up = upstream{url: pl.ollama.url, transport: p.fb}
	}
	p.memory = p.policy != memory.None
	if p.memory && !ch.untouched && !ch.off && len(ch.msgs) > 0 {
		p.window, p.system = pl.sized(ctx, ch, p.cloud)
		p.prior = pl.prior(ctx, model, p.cloud)
		p.scale = pl.calibrator.Scale(model, p.prior)
	}
	ch.plan = p
	return nil
}

// sized reads the window and the Modelfile SYSTEM of a chat's model, for
// the memory it is sent.
func (pl *pipeline) sized(ctx context.Context, ch *chat, cloud bool) (window int, system string) {
	model := ch.req.ModelName()
	window, _ = ch.req.Options()
	if cloud {
		// No Modelfile; the window is the provider's.
		if window <= 0 {
			window = pl.cloud.Window(ctx, model)
		}
		return window, ""
	}
	if r := ch.msgs[0].Role; r != "system" && r != "developer" {
		// A Responses input opening with a developer message has one.
		system = pl.models.System(ctx, model)
	}
	if window <= 0 {
		window = pl.models.Window(ctx, model)
	}
	if trained := pl.models.Trained(ctx, model); trained > 0 && window > trained {
		// Ollama clamps num_ctx to it: the prompt is cut there.
		window = trained
	}
	return window, system
}

// prior is the scale to use for model before its first answer: from its
// vocabulary's size when Ollama says it, else a safe guess.
func (pl *pipeline) prior(ctx context.Context, model string, cloud bool) memory.Scale {
	if cloud {
		return memory.Prior(0)
	}
	return memory.Prior(pl.models.Vocab(ctx, model))
}

// Policies are what models are sent of memory: Models (name globs,
// [memory.models]) first, the longest pattern that matches; else Cloud
// (cloud.memory; "" is shareable) for the chats that leave the machine
// (cloud names, Ollama's own cloud models, whose names end in -cloud, and
// the fallback); else all.
type Policies struct {
	Cloud  memory.Policy
	Models map[string]memory.Policy
}

// policy is what a chat for model is sent of memory.
func (ps Policies) policy(model string, cloud bool) memory.Policy {
	best, policy := "", memory.Policy("")
	for pattern, p := range ps.Models {
		if len(pattern) > len(best) && matches(pattern, model) {
			best, policy = pattern, p
		}
	}
	switch {
	case policy != "":
		return policy
	case !cloud && !leaves(model):
		return memory.All
	case ps.Cloud != "":
		return ps.Cloud
	}
	return memory.Shareable
}

// matches reports whether a model name pattern matches model, with or
// without its tag (":latest" when it has none).
func matches(pattern, model string) bool {
	name, _, tagged := strings.Cut(model, ":")
	for _, m := range []string{model, name, model + ":latest"} {
		if ok, _ := path.Match(pattern, m); ok && (m != model+":latest" || !tagged) {
			return true
		}
	}
	return false
}

// leaves reports whether model is one of Ollama's own cloud models: its
// name or tag ends in -cloud, or its tag is cloud.
func leaves(model string) bool {
	name, tag, _ := strings.Cut(model, ":")
	return strings.HasSuffix(name, "-cloud") || strings.HasSuffix(tag, "-cloud") || tag == "cloud"
}

// stricter is the policy of the two that sends less.
func stricter(a, b memory.Policy) memory.Policy {
	rank := map[memory.Policy]int{memory.All: 0, memory.Shareable: 1, memory.None: 2}
	if rank[b] > rank[a] {
		return b
	}
	return a
}

// knownModel is model as a metric's label: a cloud name or a model a
// [memory.models] pattern names, else "other" (a client can make up any
// name).
func (pl *pipeline) knownModel(model string) string {
	if pl.catalog.cloudModel(model) {
		return model
	}
	for pattern := range pl.policies.Models {
		if matches(pattern, model) {
			return model
		}
	}
	return "other"
}
