package proxy

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/vera-proxy/vera/memory"
	"github.com/vera-proxy/vera/proxy/dialect"
)

// Cloud models: names from [cloud.models] are listed beside
// Ollama's and their chats go to the cloud provider through the same
// pipeline, memory and recording included.

// cloudModel reports whether model is served by the cloud.
func (s *Server) cloudModel(model string) bool {
	if s.Cloud == nil {
		return false
	}
	_, ok := s.Cloud.Model(model)
	return ok
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

// policyFor is what a chat for model is sent of memory.
func (s *Server) policyFor(model string, cloud bool) memory.Policy {
	best, policy := "", memory.Policy("")
	for pattern, p := range s.Policies.Models {
		if len(pattern) > len(best) && matches(pattern, model) {
			best, policy = pattern, p
		}
	}
	switch {
	case policy != "":
		return policy
	case !cloud && !leaves(model):
		return memory.All
	case s.Policies.Cloud != "":
		return s.Policies.Cloud
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

// knownModel is model as a metric's label: a cloud name or a model a
// [memory.models] pattern names, else "other" (a client can make up any
// name).
func (s *Server) knownModel(model string) string {
	if s.cloudModel(model) {
		return model
	}
	for pattern := range s.Policies.Models {
		if matches(pattern, model) {
			return model
		}
	}
	return "other"
}

// stricter is the policy of the two that sends less.
func stricter(a, b memory.Policy) memory.Policy {
	rank := map[memory.Policy]int{memory.All: 0, memory.Shareable: 1, memory.None: 2}
	if rank[b] > rank[a] {
		return b
	}
	return a
}

// answerLoadLocally answers a load or unload call for a cloud name as
// Ollama answers one (`ollama run` preloads, `ollama stop` unloads):
// nothing to load, nothing is asked of the cloud. It reports whether it
// answered.
func (s *Server) answerLoadLocally(c *gin.Context, ch *chat) bool {
	if !ch.untouched || (!s.cloudModel(ch.req.ModelName()) && !s.virtual(ch.req.ModelName())) {
		return false
	}
	now := time.Now().UTC().Format(time.RFC3339Nano)
	reason := "load"
	var keepAlive struct {
		KeepAlive json.RawMessage `json:"keep_alive"`
	}
	_ = json.Unmarshal(ch.body, &keepAlive)
	if k := strings.Trim(string(keepAlive.KeepAlive), `" `); k == "0" || k == "0s" {
		reason = "unload"
	}
	answer, ok := dialect.LoadAnswer(ch.req, reason, now)
	if ok {
		c.JSON(http.StatusOK, answer)
	}
	return ok
}

// ownModelLists registers the routes that list models, so that cloud
// names appear beside Ollama's, also while Ollama is down.
func (s *Server) ownModelLists(e *gin.Engine) {
	e.GET("/api/tags", s.tags)
	e.GET("/v1/models", s.v1Models)
	e.POST("/api/show", s.show)
}

// ollamaList asks Ollama for one of its model lists (kept raw, so every
// field of Ollama's entries passes on).
func (s *Server) ollamaList(ctx context.Context, path string, into any) error {
	u := *s.ollama.url
	u.Path = strings.TrimRight(u.Path, "/") + path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	res, err := s.ollama.transport.RoundTrip(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("ollama answered %d", res.StatusCode)
	}
	return json.NewDecoder(io.LimitReader(res.Body, 32<<20)).Decode(into)
}

func (s *Server) tags(c *gin.Context) {
	var list struct {
		Models []json.RawMessage `json:"models"`
	}
	if err := s.ollamaList(c.Request.Context(), "/api/tags", &list); err != nil {
		s.log.Debug("listing cloud models only: Ollama's list failed", "error", err)
	}
	models := list.Models
	if models == nil {
		models = []json.RawMessage{}
	}
	for _, name := range s.virtualNames() {
		b, _ := json.Marshal(gin.H{
			"name": name, "model": name, "modified_at": s.started.Format(time.RFC3339), "size": 0, "digest": nameDigest(name),
			"details": gin.H{"parent_model": "", "format": "vera", "family": "vera", "families": []string{"vera"}, "parameter_size": "", "quantization_level": ""},
		})
		models = append(models, b)
	}
	for _, name := range s.cloudNames() {
		id, _ := s.Cloud.Model(name)
		b, _ := json.Marshal(gin.H{
			"name": name, "model": name, "modified_at": s.started.Format(time.RFC3339), "size": 0, "digest": nameDigest(name),
			"remote_model": id, "remote_host": s.Cloud.Host(),
			"details": gin.H{"parent_model": "", "format": "cloud", "family": "cloud", "families": []string{"cloud"}, "parameter_size": "", "quantization_level": ""},
		})
		models = append(models, b)
	}
	c.JSON(http.StatusOK, gin.H{"models": models})
}

func (s *Server) v1Models(c *gin.Context) {
	var list struct {
		Object string            `json:"object"`
		Data   []json.RawMessage `json:"data"`
	}
	if err := s.ollamaList(c.Request.Context(), "/v1/models", &list); err != nil {
		s.log.Debug("listing cloud models only: Ollama's list failed", "error", err)
	}
	data := list.Data
	if data == nil {
		data = []json.RawMessage{}
	}
	for _, name := range s.virtualNames() {
		b, _ := json.Marshal(gin.H{"id": name, "object": "model", "created": 0, "owned_by": "vera"})
		data = append(data, b)
	}
	for _, name := range s.cloudNames() {
		b, _ := json.Marshal(gin.H{"id": name, "object": "model", "created": 0, "owned_by": s.Cloud.Host()})
		data = append(data, b)
	}
	c.JSON(http.StatusOK, gin.H{"object": "list", "data": data})
}

// show answers /api/show for a cloud name with what a client needs to pick
// it (capabilities, the context length); Ollama answers for the rest.
func (s *Server) show(c *gin.Context) {
	body, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, 1<<20))
	if err != nil {
		writeError(c.Writer, c.Request.Context(), dialect.Of(c.Request.URL.Path), httpError(http.StatusBadRequest, "reading request body", err))
		return
	}
	var req struct {
		Model string `json:"model"`
		Name  string `json:"name"`
	}
	_ = json.Unmarshal(body, &req)
	name := req.Model
	if name == "" {
		name = req.Name
	}
	if s.virtual(name) {
		c.JSON(http.StatusOK, gin.H{
			"modelfile": "", "parameters": "", "template": "{{ .Prompt }}",
			"details":      gin.H{"parent_model": "", "format": "vera", "family": "vera", "families": []string{"vera"}, "parameter_size": "", "quantization_level": ""},
			"model_info":   gin.H{"general.architecture": "vera"},
			"capabilities": s.virtualCapabilities(c.Request.Context()),
			"modified_at":  "1970-01-01T00:00:00Z",
		})
		return
	}
	if !s.cloudModel(name) {
		c.Request.Body = io.NopCloser(bytes.NewReader(body))
		c.Request.ContentLength = int64(len(body))
		s.passthrough(c.Writer, c.Request, dialect.Of(c.Request.URL.Path))
		return
	}
	info := s.Cloud.Info(c.Request.Context(), name)
	caps := s.capabilities(c.Request.Context(), name)
	c.JSON(http.StatusOK, gin.H{
		"modelfile": "", "parameters": "", "template": "{{ .Prompt }}",
		"details":      gin.H{"parent_model": "", "format": "cloud", "family": "cloud", "families": []string{"cloud"}, "parameter_size": "", "quantization_level": ""},
		"model_info":   gin.H{"general.architecture": "cloud", "cloud.context_length": info.ContextLength},
		"capabilities": caps,
		"remote_model": info.ID, "remote_host": s.Cloud.Host(),
		"modified_at": s.started.Format(time.RFC3339),
	})
}

// fallback sends a chat to Ollama and, when Ollama cannot be reached, to
// the fallback cloud model (cloud.fallback_model), with X-Vera-Fallback
// on the answer. Nothing was sent or received when it switches: the
// client sees one answer.
type fallback struct {
	s     *Server
	d     dialect.Dialect
	own   []byte // the chat as the client sent it, before memory
	asked string
	// memory: the fallback plan takes the memory the chat was sent with;
	// else it gets the chat as the client sent it (the fallback's policy
	// sends less than the local model's, and memory was injected).
	memory bool
}

func (f *fallback) RoundTrip(r *http.Request) (*http.Response, error) {
	// The chat as forwarded, memory in place, kept to send again.
	sent, err := io.ReadAll(r.Body)
	r.Body.Close()
	if err != nil {
		return nil, err
	}
	r.Body = io.NopCloser(bytes.NewReader(sent))
	res, err := f.s.ollama.transport.RoundTrip(r)
	if err == nil && f.s.fallbackActive.CompareAndSwap(true, false) {
		f.s.log.Info("Ollama is back: chats for local models go to it again")
	}
	if err == nil || r.Context().Err() != nil || !unreachable(err) {
		return res, err
	}
	withheld := !f.memory
	if withheld {
		sent = f.own // nothing remembered leaves that the cloud's policy keeps
	}
	body, err := f.d.Retarget(sent, f.s.FallbackModel, false, false)
	if err != nil {
		return nil, err // never: the chat was parsed, an object
	}
	f.s.fallbackUsed(f.asked)
	f.s.Metrics.fellBack()
	out := r.Clone(r.Context())
	out.URL = f.s.Cloud.URL()
	out.URL.Path = r.URL.Path
	out.Host = out.URL.Host
	out.Body = io.NopCloser(bytes.NewReader(body))
	out.ContentLength = int64(len(body))
	res, err = f.s.Cloud.Serve(out, f.asked)
	if err == nil {
		res.Header.Set("X-Vera-Fallback", f.s.FallbackModel)
	}
	return res, err
}

// emptyContext is X-Vera-Context for a chat that was sent no memory.
const emptyContext = "semantic=0; recent=0; rules=0; tokens=0"

// unreachable reports whether err means nobody answered at Ollama's
// address (as opposed to a slow or failing Ollama).
func unreachable(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// fallbackUsed logs, once per outage, that chats go to the cloud.
func (s *Server) fallbackUsed(asked string) {
	if s.fallbackActive.CompareAndSwap(false, true) {
		s.log.Warn("Ollama unreachable: chats for local models go to the fallback cloud model until it is back",
			slog.String("fallback_model", s.FallbackModel), slog.String("model_asked", asked))
	}
}

// cloudNames lists the cloud names; none without a cloud.
func (s *Server) cloudNames() []string {
	if s.Cloud == nil {
		return nil
	}
	return s.Cloud.Names()
}

// virtualNames lists the virtual names; none without routing.
func (s *Server) virtualNames() []string {
	if s.Routing == nil {
		return nil
	}
	var out []string
	for _, n := range []string{s.Routing.Virtual, s.Routing.Deep} {
		if n != "" {
			out = append(out, n)
		}
	}
	return out
}

// nameDigest is a stable digest for a name vera lists itself: clients
// show its first 12 characters as the model's id (`ollama list` needs 12).
func nameDigest(name string) string {
	sum := sha256.Sum256([]byte("vera:" + name))
	return hex.EncodeToString(sum[:])
}

// capabilities returns what a model can do: the provider's for a cloud
// name, Ollama's /api/show for the rest; nil when unknown.
func (s *Server) capabilities(ctx context.Context, model string) []string {
	if s.cloudModel(model) {
		info := s.Cloud.Info(ctx, model)
		caps := []string{"completion"}
		if info.Tools {
			caps = append(caps, "tools")
		}
		if info.Thinking {
			caps = append(caps, "thinking")
		}
		if info.Vision {
			caps = append(caps, "vision")
		}
		return caps
	}
	show, err := s.client.Show(ctx, model)
	if err != nil {
		return nil
	}
	return show.Capabilities
}

// virtualCapabilities is what every tier model can do: a client that
// reads "thinking" sends think, which a tier model without it refuses.
func (s *Server) virtualCapabilities(ctx context.Context) []string {
	var common []string
	first := true
	for _, m := range s.Routing.Models {
		if m == "" {
			continue
		}
		caps := s.capabilities(ctx, m)
		if first {
			common, first = caps, false
			continue
		}
		common = slices.DeleteFunc(common, func(c string) bool { return !slices.Contains(caps, c) })
	}
	if len(common) == 0 {
		return []string{"completion"}
	}
	return common
}
