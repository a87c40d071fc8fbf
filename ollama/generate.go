package ollama

import (
	"context"
	"encoding/json"
	"net/http"
	"time"
)

// Message is one message of a chat.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
	// Thinking is a thinking model's reasoning, apart from its answer.
	Thinking string `json:"thinking,omitempty"`
}

// Options are a request's model options ("temperature", "num_ctx",
// "num_predict", ...), sent as Ollama's "options" object.
type Options map[string]any

// ChatRequest is a chat sent to /api/chat. The answer is not streamed.
type ChatRequest struct {
	Model    string    `json:"model"`
	Messages []Message `json:"messages"`
	// Format constrains the answer: "json", or a JSON schema (structured
	// outputs).
	Format  json.RawMessage `json:"format,omitempty"`
	Options Options         `json:"options,omitempty"`
	// KeepAlive is how long the model stays loaded after the request;
	// nil leaves Ollama's default, 0 unloads it at once, below 0 keeps it
	// loaded.
	KeepAlive *time.Duration `json:"-"`
}

// Metrics are the counts and timings Ollama adds to a finished answer.
type Metrics struct {
	TotalDuration      time.Duration `json:"total_duration,omitempty"`
	LoadDuration       time.Duration `json:"load_duration,omitempty"`
	PromptEvalCount    int           `json:"prompt_eval_count,omitempty"`
	PromptEvalDuration time.Duration `json:"prompt_eval_duration,omitempty"`
	EvalCount          int           `json:"eval_count,omitempty"`
	EvalDuration       time.Duration `json:"eval_duration,omitempty"`
}

// ChatResponse is /api/chat's answer.
type ChatResponse struct {
	Model      string    `json:"model"`
	CreatedAt  time.Time `json:"created_at"`
	Message    Message   `json:"message"`
	Done       bool      `json:"done"`
	DoneReason string    `json:"done_reason,omitempty"`
	Metrics
}

// Chat sends req and returns the whole answer (POST /api/chat,
// "stream": false).
func (c *Client) Chat(ctx context.Context, req ChatRequest) (*ChatResponse, error) {
	body := struct {
		ChatRequest
		Stream    bool     `json:"stream"`
		KeepAlive *float64 `json:"keep_alive,omitempty"`
	}{ChatRequest: req, KeepAlive: seconds(req.KeepAlive)}
	var out ChatResponse
	if err := c.do(ctx, http.MethodPost, "/api/chat", body, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// GenerateRequest is a completion sent to /api/generate. The answer is not
// streamed.
type GenerateRequest struct {
	Model string `json:"model"`
	// Prompt is sent even when empty: an empty prompt only loads (or,
	// with KeepAlive 0, unloads) the model.
	Prompt string `json:"prompt"`
	// System replaces the Modelfile's SYSTEM when set.
	System  string          `json:"system,omitempty"`
	Format  json.RawMessage `json:"format,omitempty"`
	Options Options         `json:"options,omitempty"`
	// KeepAlive is as in ChatRequest.
	KeepAlive *time.Duration `json:"-"`
}

// GenerateResponse is /api/generate's answer.
type GenerateResponse struct {
	Model     string    `json:"model"`
	CreatedAt time.Time `json:"created_at"`
	Response  string    `json:"response"`
	Thinking  string    `json:"thinking,omitempty"`
	Done      bool      `json:"done"`
	// DoneReason is "stop" or "length" for an answer, "load" or "unload"
	// for a request with an empty prompt.
	DoneReason string `json:"done_reason,omitempty"`
	Metrics
}

// Generate sends req and returns the whole answer (POST /api/generate,
// "stream": false).
func (c *Client) Generate(ctx context.Context, req GenerateRequest) (*GenerateResponse, error) {
	body := struct {
		GenerateRequest
		Stream    bool     `json:"stream"`
		KeepAlive *float64 `json:"keep_alive,omitempty"`
	}{GenerateRequest: req, KeepAlive: seconds(req.KeepAlive)}
	var out GenerateResponse
	if err := c.do(ctx, http.MethodPost, "/api/generate", body, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Load loads model into memory, for Ollama's default keep-alive, and
// returns once it is loaded: a generation with an empty prompt.
func (c *Client) Load(ctx context.Context, model string) error {
	_, err := c.Generate(ctx, GenerateRequest{Model: model})
	return err
}

// Unload frees the memory model holds: an empty prompt with keep_alive 0.
// Unloading a model that is not loaded succeeds.
func (c *Client) Unload(ctx context.Context, model string) error {
	var now time.Duration
	_, err := c.Generate(ctx, GenerateRequest{Model: model, KeepAlive: &now})
	return err
}

// seconds writes a keep-alive the way Ollama reads a number: seconds, any
// negative number meaning forever.
func seconds(d *time.Duration) *float64 {
	if d == nil {
		return nil
	}
	s := d.Seconds()
	if *d < 0 {
		s = -1
	}
	return &s
}
