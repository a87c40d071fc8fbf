package proxy

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/vera-proxy/vera/cloud"
	"github.com/vera-proxy/vera/dialect"
	"github.com/vera-proxy/vera/ollama"
)

// Cloud models and virtual names: names from [cloud.models] and
// [routing] are listed beside Ollama's, and their chats go through the
// same pipeline, memory and recording included.

// catalog knows the names vera serves beside Ollama's (cloud names, the
// virtual tier names) and what a model can do.
type catalog struct {
	cloud   *cloud.Provider
	routing *Routing
	ollama  *ollama.Client
}

// cloudModel reports whether model is served by the cloud.
func (c *catalog) cloudModel(model string) bool {
	if c.cloud == nil {
		return false
	}
	_, ok := c.cloud.Model(model)
	return ok
}

// virtual reports whether model is one of the virtual names.
func (c *catalog) virtual(model string) bool { return c.routing.virtual(model) }

// cloudNames lists the cloud names; none without a cloud.
func (c *catalog) cloudNames() []string {
	if c.cloud == nil {
		return nil
	}
	return c.cloud.Names()
}

// virtualNames lists the virtual names; none without routing.
func (c *catalog) virtualNames() []string {
	if c.routing == nil {
		return nil
	}
	var out []string
	for _, n := range []string{c.routing.Virtual, c.routing.Deep} {
		if n != "" {
			out = append(out, n)
		}
	}
	return out
}

// capabilities returns what a model can do: the provider's for a cloud
// name, Ollama's /api/show for the rest; nil when unknown.
func (c *catalog) capabilities(ctx context.Context, model string) []string {
	if c.cloudModel(model) {
		info := c.cloud.Info(ctx, model)
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
	show, err := c.ollama.Show(ctx, model)
	if err != nil {
		return nil
	}
	return show.Capabilities
}

// virtualCapabilities is what every tier model can do: a client that
// reads "thinking" sends think, which a tier model without it refuses.
func (c *catalog) virtualCapabilities(ctx context.Context) []string {
	var common []string
	first := true
	for _, m := range c.routing.Models {
		if m == "" {
			continue
		}
		caps := c.capabilities(ctx, m)
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

// nameDigest is a stable digest for a name vera lists itself: clients
// show its first 12 characters as the model's id (`ollama list` needs 12).
func nameDigest(name string) string {
	sum := sha256.Sum256([]byte("vera:" + name))
	return hex.EncodeToString(sum[:])
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
	for _, name := range s.catalog.virtualNames() {
		b, _ := json.Marshal(gin.H{
			"name": name, "model": name, "modified_at": s.started.Format(time.RFC3339), "size": 0, "digest": nameDigest(name),
			"details": gin.H{"parent_model": "", "format": "vera", "family": "vera", "families": []string{"vera"}, "parameter_size": "", "quantization_level": ""},
		})
		models = append(models, b)
	}
	for _, name := range s.catalog.cloudNames() {
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
	for _, name := range s.catalog.virtualNames() {
		b, _ := json.Marshal(gin.H{"id": name, "object": "model", "created": 0, "owned_by": "vera"})
		data = append(data, b)
	}
	for _, name := range s.catalog.cloudNames() {
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
	if s.catalog.virtual(name) {
		c.JSON(http.StatusOK, gin.H{
			"modelfile": "", "parameters": "", "template": "{{ .Prompt }}",
			"details":      gin.H{"parent_model": "", "format": "vera", "family": "vera", "families": []string{"vera"}, "parameter_size": "", "quantization_level": ""},
			"model_info":   gin.H{"general.architecture": "vera"},
			"capabilities": s.catalog.virtualCapabilities(c.Request.Context()),
			"modified_at":  "1970-01-01T00:00:00Z",
		})
		return
	}
	if !s.catalog.cloudModel(name) {
		c.Request.Body = io.NopCloser(bytes.NewReader(body))
		c.Request.ContentLength = int64(len(body))
		s.passthrough(c.Writer, c.Request, dialect.Of(c.Request.URL.Path))
		return
	}
	info := s.Cloud.Info(c.Request.Context(), name)
	caps := s.catalog.capabilities(c.Request.Context(), name)
	c.JSON(http.StatusOK, gin.H{
		"modelfile": "", "parameters": "", "template": "{{ .Prompt }}",
		"details":      gin.H{"parent_model": "", "format": "cloud", "family": "cloud", "families": []string{"cloud"}, "parameter_size": "", "quantization_level": ""},
		"model_info":   gin.H{"general.architecture": "cloud", "cloud.context_length": info.ContextLength},
		"capabilities": caps,
		"remote_model": info.ID, "remote_host": s.Cloud.Host(),
		"modified_at": s.started.Format(time.RFC3339),
	})
}
