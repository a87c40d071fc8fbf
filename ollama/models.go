package ollama

import (
	"context"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Details describes a model's weights, as /api/tags, /api/show and /api/ps
// report them.
type Details struct {
	ParentModel       string   `json:"parent_model,omitempty"`
	Format            string   `json:"format,omitempty"`
	Family            string   `json:"family,omitempty"`
	Families          []string `json:"families,omitempty"`
	ParameterSize     string   `json:"parameter_size,omitempty"`
	QuantizationLevel string   `json:"quantization_level,omitempty"`
}

// Tag is a model Ollama has pulled (an entry of /api/tags).
type Tag struct {
	Name       string    `json:"name"`
	Model      string    `json:"model"`
	ModifiedAt time.Time `json:"modified_at"`
	Size       int64     `json:"size"`
	Digest     string    `json:"digest"`
	Details    Details   `json:"details"`
}

// Tags returns the models Ollama has pulled, sorted by name
// (GET /api/tags).
func (c *Client) Tags(ctx context.Context) ([]Tag, error) {
	var out struct {
		Models []Tag `json:"models"`
	}
	if err := c.do(ctx, http.MethodGet, "/api/tags", nil, &out); err != nil {
		return nil, err
	}
	sort.Slice(out.Models, func(i, j int) bool { return out.Models[i].Name < out.Models[j].Name })
	return out.Models, nil
}

// Running is a model loaded in memory (an entry of /api/ps).
type Running struct {
	Name      string    `json:"name"`
	Model     string    `json:"model"`
	Size      int64     `json:"size"`
	SizeVRAM  int64     `json:"size_vram"`
	Digest    string    `json:"digest"`
	Details   Details   `json:"details"`
	ExpiresAt time.Time `json:"expires_at"`
	// ContextLength is the window the model was loaded with.
	ContextLength int `json:"context_length"`
}

// PS returns the models loaded now (GET /api/ps).
func (c *Client) PS(ctx context.Context) ([]Running, error) {
	var out struct {
		Models []Running `json:"models"`
	}
	if err := c.do(ctx, http.MethodGet, "/api/ps", nil, &out); err != nil {
		return nil, err
	}
	return out.Models, nil
}

// ShowResponse is what /api/show tells about a model.
type ShowResponse struct {
	// Parameters is the Modelfile's PARAMETER lines, one "name value" a
	// line ("num_ctx 8192").
	Parameters string `json:"parameters"`
	// System is the Modelfile's SYSTEM prompt.
	System       string   `json:"system"`
	Template     string   `json:"template"`
	Modelfile    string   `json:"modelfile"`
	License      string   `json:"license"`
	Details      Details  `json:"details"`
	Capabilities []string `json:"capabilities"`
	// ModelInfo is the weights' metadata ("general.architecture",
	// "llama.context_length", ...).
	ModelInfo  map[string]any `json:"model_info"`
	ModifiedAt time.Time      `json:"modified_at"`
}

// Show returns what Ollama knows about model (POST /api/show).
func (c *Client) Show(ctx context.Context, model string) (*ShowResponse, error) {
	var out ShowResponse
	if err := c.do(ctx, http.MethodPost, "/api/show", map[string]string{"model": model}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// NumCtx returns the model's own num_ctx parameter, 0 when it has none.
func (s *ShowResponse) NumCtx() int {
	for _, line := range strings.Split(s.Parameters, "\n") {
		f := strings.Fields(line)
		if len(f) == 2 && f[0] == "num_ctx" {
			if n, err := strconv.Atoi(f[1]); err == nil && n > 0 {
				return n
			}
		}
	}
	return 0
}

// ContextLength returns the context length the model was trained for
// ("<architecture>.context_length" in model_info), 0 when unknown.
func (s *ShowResponse) ContextLength() int {
	if arch, ok := s.ModelInfo["general.architecture"].(string); ok {
		if n := positive(s.ModelInfo[arch+".context_length"]); n > 0 {
			return n
		}
	}
	// Without the architecture, any key of that name will do; the
	// largest, so that a smaller part's (a vision encoder's) does not cap
	// the model's.
	n := 0
	for k, v := range s.ModelInfo {
		if strings.HasSuffix(k, ".context_length") {
			n = max(n, positive(v))
		}
	}
	return n
}

// VocabSize returns the size of the model's vocabulary
// ("<architecture>.vocab_size", else the tokens' list when /api/show gave
// it), 0 when unknown.
func (s *ShowResponse) VocabSize() int {
	if arch, ok := s.ModelInfo["general.architecture"].(string); ok {
		if n := positive(s.ModelInfo[arch+".vocab_size"]); n > 0 {
			return n
		}
	}
	if toks, ok := s.ModelInfo["tokenizer.ggml.tokens"].([]any); ok {
		return len(toks)
	}
	return 0
}

// HasCapability reports whether the model can do what ("completion",
// "embedding", "tools", "thinking", "vision", ...).
func (s *ShowResponse) HasCapability(what string) bool {
	return slices.Contains(s.Capabilities, what)
}

// positive reads a JSON number as a positive int, 0 otherwise.
func positive(v any) int {
	f, ok := v.(float64)
	if !ok || f <= 0 || f > 1<<31 {
		return 0
	}
	return int(f)
}
