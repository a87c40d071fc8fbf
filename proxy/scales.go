package proxy

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"sync"

	"github.com/vera-proxy/vera/dialect"
	"github.com/vera-proxy/vera/memory"
	"github.com/vera-proxy/vera/text"
)

// Calibrator learns each model's tokens (memory.Scales) from its answers,
// off the chat path: counting what vera forwarded takes about a
// millisecond per 1,500 tokens, so a worker does it after the answer, and
// drops what it has no time for.
type Calibrator struct {
	scales *memory.Scales
	tok    *text.Tokenizer
	log    *slog.Logger
	// Overflowed, when set, hears of each prompt an answer shows was cut.
	Overflowed func(model string)

	jobs chan calibration
	wg   sync.WaitGroup
	once sync.Once
}

// calibration is one answer to learn from.
type calibration struct {
	model    string
	d        dialect.Dialect
	body     []byte // what vera forwarded
	reported int
	window   int
	prior    memory.Scale
}

// NewCalibrator starts a calibrator over scales; Close stops it.
func NewCalibrator(scales *memory.Scales, tok *text.Tokenizer, log *slog.Logger) *Calibrator {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Calibrator{scales: scales, tok: tok, log: log, jobs: make(chan calibration, 64)}
	c.wg.Add(1)
	go c.work()
	return c
}

// Scale returns model's scale (its prior until it answered once).
func (c *Calibrator) Scale(model string, prior memory.Scale) memory.Scale {
	if c == nil {
		return prior
	}
	s, _ := c.scales.Scale(model, prior)
	return s
}

// Untold reports, once, that model's prompts were cut since it was last
// asked: the next chat of the model says so (X-Vera-Context).
func (c *Calibrator) Untold(model string) bool {
	return c != nil && c.scales.Untold(model)
}

// learn queues an answer; it never blocks the chat.
func (c *Calibrator) learn(j calibration) {
	if c == nil || j.reported <= 0 {
		return
	}
	select {
	case c.jobs <- j:
	default: // busy: another answer will teach the same
	}
}

// Close stops the worker once it has done what is queued, and saves.
func (c *Calibrator) Close() {
	if c == nil {
		return
	}
	c.once.Do(func() { close(c.jobs) })
	c.wg.Wait()
	if err := c.scales.Save(); err != nil {
		c.log.Warn("the models' token scales were not saved", slog.Any("error", err))
	}
}

func (c *Calibrator) work() {
	defer c.wg.Done()
	for j := range c.jobs {
		c.take(j)
	}
}

// take counts what was forwarded as the builder counts a prompt, and has
// the scales learn from it.
func (c *Calibrator) take(j calibration) {
	estimate, ok := c.estimate(j)
	if !ok {
		// Images count in the model's tokens, never in vera's: only a
		// cut prompt is told from such an answer.
		estimate = 0
		if j.window > 0 && j.reported >= j.window {
			estimate = 1
		}
	}
	obs := c.scales.Observe(j.model, estimate, j.reported, j.window, j.prior)
	switch {
	case obs.Overflow:
		if obs.First {
			c.log.Warn("a prompt vera sent was cut by the model's window; budgets now count in the model's own tokens",
				slog.String("model", j.model), slog.Int("prompt_tokens", j.reported), slog.Int("window", j.window))
		}
		if c.Overflowed != nil {
			c.Overflowed(j.model)
		}
	case obs.Learnt:
		if err := c.scales.Save(); err != nil {
			c.log.Warn("the models' token scales were not saved", slog.Any("error", err))
		}
	}
}

// estimate is what the builder would count of the forwarded request: each
// message's text and four tokens for its place in the template, and the
// tools' definitions. false when the request carries images.
func (c *Calibrator) estimate(j calibration) (int, bool) {
	if bytes.Contains(j.body, []byte(`"images"`)) || bytes.Contains(j.body, []byte(`"image_url"`)) || bytes.Contains(j.body, []byte(`"input_image"`)) ||
		bytes.Contains(j.body, []byte(`"type":"image"`)) {
		return 0, false
	}
	req, err := j.d.Parse(j.body)
	if err != nil {
		return 0, false
	}
	count := func(s string) int {
		if c.tok == nil {
			return (len(s) + 3) / 4
		}
		return c.tok.Count(s)
	}
	n := 0
	for _, m := range req.MemoryMessages() {
		n += count(m.Content) + 4
	}
	var tools struct {
		Tools json.RawMessage `json:"tools"`
	}
	if json.Unmarshal(j.body, &tools) == nil && len(tools.Tools) > 2 {
		n += count(string(tools.Tools))
	}
	return n, true
}
