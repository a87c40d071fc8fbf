package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/vera-proxy/vera/proxy/dialect"
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
func (s *Server) virtual(model string) bool {
	if s.Routing == nil {
		return false
	}
	return sameModel(model, s.Routing.Virtual) || sameModel(model, s.Routing.Deep)
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
func (s *Server) routeTier(ctx context.Context, w http.ResponseWriter, ch *chat) (string, error) {
	asked := ch.req.ModelName()
	if !s.virtual(asked) {
		return "", nil
	}
	var d tier.Decision
	if ch.untouched {
		// A background task (a title, search queries...) or a load call:
		// the light model, never a flush for the complex one.
		d = tier.Decision{Tier: tier.Light, By: "task"}
	} else {
		d = s.Routing.Router.Classify(ctx, ch.user, sameModel(asked, s.Routing.Deep))
	}
	ch.unrouted = ch.body
	t, model, err := s.retargetChat(ctx, ch, d.Tier, d.Think)
	if err != nil {
		return "", err
	}
	w.Header().Set("X-Vera-Tier", string(t)+" "+model)
	s.Metrics.routed(string(t), d.By)
	ch.route = map[string]any{"asked": asked, "tier": string(t), "model": model, "by": d.By, "rule": d.Rule, "scores": d.Scores, "url": d.URL, "think": d.Think}
	s.log.Debug("routed", "asked", asked, "tier", string(t), "model", model, "by", d.By, "rule", d.Rule, "scores", fmt.Sprint(d.Scores))
	return asked, nil
}

// retargetChat rewrites the chat as it came (ch.unrouted) for the model of
// tier want: the model name, and for a /think prefix (strip) the prefix
// off the last user text, with thinking asked of a model that can think.
// What memory reads follows: the user's own question stays as decode took
// it (the RAG template's query, say), less the prefix.
func (s *Server) retargetChat(ctx context.Context, ch *chat, want tier.Tier, strip bool) (tier.Tier, string, error) {
	t, model := s.Routing.tierModel(want)
	if model == "" {
		return t, "", httpError(http.StatusServiceUnavailable, fmt.Sprintf("model %q routes to tiers, and no tier model is set ([routing] light, medium, complex)", ch.req.ModelName()), nil)
	}
	think := strip
	if think {
		// Ask for thinking only of a model that can: others refuse it.
		caps := s.capabilities(ctx, model)
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

// renamer gives a response body with every `"model":"<from>"` as
// `"model":"<to>"`, also when the bytes come split: the answer names the
// model the client asked for.
type renamer struct {
	io.ReadCloser
	from, to []byte
	pending  []byte // read, not yet given
	out      []byte // given next
	buf      []byte // what each read fills
	eof      error
}

func newRenamer(body io.ReadCloser, from, to string) *renamer {
	f, _ := json.Marshal(from)
	t, _ := json.Marshal(to)
	return &renamer{ReadCloser: body, from: append([]byte(`"model":`), f...), to: append([]byte(`"model":`), t...)}
}

func (r *renamer) Read(p []byte) (int, error) {
	for len(r.out) == 0 {
		if r.eof != nil {
			return 0, r.eof
		}
		if r.buf == nil {
			r.buf = make([]byte, 32<<10)
		}
		n, err := r.ReadCloser.Read(r.buf)
		buf := r.buf
		r.pending = append(r.pending, buf[:n]...)
		replaced := bytes.ReplaceAll(r.pending, r.from, r.to)
		keep := 0
		if err == nil {
			// A pattern may start in the last bytes: keep them back.
			keep = min(len(r.from)-1, len(replaced))
			for keep > 0 && !bytes.HasPrefix(r.from, replaced[len(replaced)-keep:]) {
				keep--
			}
		} else {
			r.eof = err
		}
		r.out = append(r.out, replaced[:len(replaced)-keep]...)
		r.pending = append(r.pending[:0], replaced[len(replaced)-keep:]...)
	}
	n := copy(p, r.out)
	r.out = r.out[n:]
	return n, nil
}

// makeRoom runs the VRAM step for a chat that goes to Ollama: a large
// model gets the GPU to itself first; other chats wait while that is
// being done. When the room cannot be made in time, a routed chat goes to
// the medium tier instead, and a chat that named its model goes on with
// X-Vera-VRAM: flush-timeout. It returns what to run once the answer is
// over.
func (s *Server) makeRoom(c *gin.Context, ch *chat, asked string, p *plan) (func(), error) {
	if s.VRAM == nil || p.cloud {
		return func() {}, nil // the cloud's, not this GPU's
	}
	ctx := c.Request.Context()
	after, err := s.VRAM.Before(ctx, ch.req.ModelName())
	switch {
	case err == nil:
		s.Metrics.flushed("ok")
		return after, nil
	case ctx.Err() != nil:
		return after, httpError(StatusClientClosed, "client closed request", err)
	case !errors.Is(err, vram.ErrFlushTimeout):
		// Ollama's /api/ps failed: go on without the flush.
		s.log.Warn("VRAM flush skipped", "model", ch.req.ModelName(), "error", err)
		return after, nil
	}
	s.Metrics.flushed("timeout")
	c.Writer.Header().Set("X-Vera-VRAM", "flush-timeout")
	if asked == "" || s.Routing == nil {
		return after, nil // the model the chat named, serialised still
	}
	if _, medium := s.Routing.tierModel(tier.Medium); medium == "" || sameModel(medium, ch.req.ModelName()) {
		return after, nil
	}
	after() // the large model will not answer this chat
	instead := ch.req.ModelName()
	t, medium, rerr := s.retargetChat(ctx, ch, tier.Medium, ch.route != nil && ch.route["think"] == true)
	if rerr != nil {
		return func() {}, rerr
	}
	if next, rerr := s.route(ctx, ch); rerr == nil {
		*p = next // a cloud medium model goes to the cloud
	}
	s.log.Warn("VRAM flush timed out: the chat goes to the medium tier", "asked", asked, "instead_of", instead, "model", medium)
	c.Writer.Header().Set("X-Vera-Tier", string(t)+" "+medium)
	return func() {}, nil
}
