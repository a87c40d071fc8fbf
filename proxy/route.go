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

	"github.com/vera-proxy/vera/proxy/tier"
	"github.com/vera-proxy/vera/proxy/vram"
)

// Tier routing (SPEC §7, [routing]): a virtual model name is sent to the
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
	asked := ch.req.model()
	if !s.virtual(asked) {
		return "", nil
	}
	d := s.Routing.Router.Classify(ctx, ch.user, sameModel(asked, s.Routing.Deep))
	t, model := s.Routing.tierModel(d.Tier)
	if model == "" {
		return "", httpError(http.StatusServiceUnavailable, fmt.Sprintf("model %q routes to tiers, and no tier model is set ([routing] light, medium, complex)", asked), nil)
	}
	think := d.Think
	if think {
		// Ask for thinking only of a model that can: others refuse it.
		caps := s.capabilities(ctx, model)
		think = caps == nil || slices.Contains(caps, "thinking")
	}
	body, err := retarget(ch.body, model, d.Think, think, ch.d)
	if err != nil {
		return "", httpError(http.StatusBadRequest, err.Error(), nil)
	}
	req, err := ch.d.parse(body)
	if err != nil {
		return "", httpError(http.StatusBadRequest, err.Error(), nil)
	}
	ch.body, ch.req = body, req
	if !ch.untouched {
		ch.msgs, ch.user = req.memoryMessages(), req.lastUser()
		ch.recall = ch.msgs
	}
	w.Header().Set("X-Vera-Tier", string(t)+" "+model)
	ch.route = map[string]any{"asked": asked, "tier": string(t), "model": model, "by": d.By, "rule": d.Rule, "scores": d.Scores, "url": d.URL, "think": d.Think}
	s.log.Debug("routed", "asked", asked, "tier", string(t), "model", model, "by", d.By, "rule", d.Rule, "scores", fmt.Sprint(d.Scores))
	return asked, nil
}

// retarget sets a request's model and, for a /think prefix (strip), takes
// the prefix off its last user text and, with think, asks the model to
// think (Ollama's think: true, unless the client set think).
func retarget(body []byte, model string, strip, think bool, d dialect) ([]byte, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, fmt.Errorf("the request is not a JSON object")
	}
	m["model"], _ = json.Marshal(model)
	out, err := marshal(m)
	if err != nil || !strip {
		return out, err
	}
	// The prefix opens the last user text: the last JSON string that
	// starts with it.
	if i := bytes.LastIndex(out, []byte(`"/think`)); i >= 0 {
		j := i + len(`"/think`)
		for j < len(out) && out[j] == ' ' {
			j++
		}
		out = append(out[:i+1:i+1], out[j:]...)
	}
	if think && (d == ollamaChat || d == ollamaGenerate) {
		if err := json.Unmarshal(out, &m); err != nil {
			return nil, err
		}
		if _, set := m["think"]; !set {
			m["think"] = json.RawMessage("true")
		}
		return marshal(m)
	}
	return out, nil
}

// renamer gives a response body with every `"model":"<from>"` as
// `"model":"<to>"`, also when the bytes come split: the answer names the
// model the client asked for.
type renamer struct {
	io.ReadCloser
	from, to []byte
	pending  []byte // read, not yet given
	out      []byte // given next
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
		buf := make([]byte, 32<<10)
		n, err := r.ReadCloser.Read(buf)
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
func (s *Server) makeRoom(c *gin.Context, ch *chat, asked string, up upstream) (func(), error) {
	if s.VRAM == nil || up.url != s.ollama.url || up.transport != s.ollama.transport {
		return func() {}, nil
	}
	ctx := c.Request.Context()
	after, err := s.VRAM.Before(ctx, ch.req.model())
	switch {
	case err == nil:
		return after, nil
	case !errors.Is(err, vram.ErrFlushTimeout):
		return after, httpError(StatusClientClosed, "client closed request", err)
	}
	c.Writer.Header().Set("X-Vera-VRAM", "flush-timeout")
	if asked == "" || s.Routing == nil {
		return after, nil
	}
	_, medium := s.Routing.tierModel(tier.Medium)
	if medium == "" || sameModel(medium, ch.req.model()) {
		return after, nil
	}
	body, rerr := retarget(ch.body, medium, false, false, ch.d)
	if rerr != nil {
		return after, nil
	}
	req, perr := ch.d.parse(body)
	if perr != nil {
		return after, nil
	}
	s.log.Warn("VRAM flush timed out: the chat goes to the medium tier", "asked", asked, "instead_of", ch.req.model(), "model", medium)
	ch.body, ch.req = body, req
	c.Writer.Header().Set("X-Vera-Tier", string(tier.Medium)+" "+medium)
	return after, nil
}
