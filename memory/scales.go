package memory

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sync"
)

// vera counts every budget with cl100k_base, but a model counts with its
// own tokenizer: a byte-level vocabulary makes four or five tokens of one
// of cl100k's, a 32k SentencePiece vocabulary about 1.2, and any
// vocabulary more for text that is not English. A prompt vera believes
// fits the window may not, and Ollama then cuts its start, where the
// system message and the memories sit. Scales learns, per model, how many
// of the model's tokens one cl100k token makes, from what the upstream
// reports on every answer (Ollama's prompt_eval_count, a cloud's usage),
// and keeps it across restarts.

// A Scale is how many of a model's tokens one cl100k token makes.
type Scale float64

// Of returns n cl100k tokens in the model's tokens, rounded up.
func (s Scale) Of(n int) int { return int(math.Ceil(float64(n) * float64(s))) }

// Within returns how many cl100k tokens fit in n of the model's.
func (s Scale) Within(n int) int {
	if s <= 0 {
		return n
	}
	return int(float64(n) / float64(s))
}

const (
	// keptRatios is how many recent observations of a model are kept: the
	// scale is the largest of them, so one prompt of code or of another
	// language is remembered for a while.
	keptRatios = 16
	// minScale and maxScale bound what is learnt: a report outside them
	// is not the prompt's size (images, a cut prompt, a bad count).
	minScale, maxScale = 0.3, 8
	// minLearnt is the shortest estimate learnt from.
	minLearnt = 100
)

// Prior is the scale to use before a model's first answer, from the size
// of its vocabulary (0: unknown): a byte-level one, tiny, counts about one
// token a byte; a mid-sized one about two of cl100k's; a large one about
// as cl100k does, with room for a SentencePiece 32k (about 1.2).
func Prior(vocab int) Scale {
	switch {
	case vocab > 0 && vocab < 1024:
		return 4.5
	case vocab > 0 && vocab < 16000:
		return 2
	default:
		return 1.3
	}
}

// Scales is what vera learnt of each model's tokens, kept in a JSON file.
type Scales struct {
	path string

	mu     sync.Mutex
	models map[string]*scaleOf
	dirty  bool
}

// scaleOf is one model's record.
type scaleOf struct {
	// Ratios are the latest model tokens per cl100k token, newest last.
	Ratios []float64 `json:"ratios"`
	// Overflows counts the prompts the model's answers show were cut.
	Overflows int `json:"overflows,omitempty"`
	// told: an overflow not yet reported on a chat (X-Vera-Context).
	told bool
}

// OpenScales reads what was learnt from path ("": kept in memory only).
// A file that cannot be read is reported and learning starts afresh.
func OpenScales(path string) (*Scales, error) {
	s := &Scales{path: path, models: map[string]*scaleOf{}}
	if path == "" {
		return s, nil
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return s, nil
	}
	if err == nil {
		err = json.Unmarshal(b, &s.models)
	}
	if err != nil {
		s.models = map[string]*scaleOf{}
		return s, fmt.Errorf("the models' token scales (%s): %w; learning them again", path, err)
	}
	for m, r := range s.models {
		if r == nil {
			delete(s.models, m)
		}
	}
	return s, nil
}

// Scale returns model's scale: the largest of its recent observations,
// else prior. learnt reports whether any answer of the model was seen.
func (s *Scales) Scale(model string, prior Scale) (scale Scale, learnt bool) {
	if s == nil {
		return prior, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.models[model]
	if r == nil || len(r.Ratios) == 0 {
		return prior, false
	}
	return Scale(slices.Max(r.Ratios)), true
}

// Observation is what one answer's count showed.
type Observation struct {
	Learnt bool // the ratio was kept
	// Overflow: the prompt was cut (the count is the window's, or far
	// below what vera sent), and this is the model's first since it was
	// last reported (Told).
	Overflow bool
	First    bool // the model's first overflow ever: worth a warning
}

// Observe takes one answer of model: vera's own count of the prompt it
// sent (estimate, in cl100k tokens), the upstream's count (reported), and
// the window (0: unknown). A prompt cut by the runner reports the window
// exactly; one whose oldest messages the server dropped reports less than
// vera sent, by far. Neither is learnt from: both are overflows.
func (s *Scales) Observe(model string, estimate, reported, window int, prior Scale) Observation {
	if s == nil || estimate <= 0 || reported <= 0 {
		return Observation{}
	}
	ratio := float64(reported) / float64(estimate)
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.models[model]
	if r == nil {
		r = &scaleOf{}
		s.models[model] = r
	}
	expected := float64(prior)
	if len(r.Ratios) > 0 {
		expected = slices.Max(r.Ratios)
	}
	cut := window > 0 && reported >= window
	dropped := window > 0 && ratio < 0.6*expected && float64(estimate)*expected > float64(window)
	if cut || dropped {
		r.Overflows++
		r.told = false
		s.dirty = true
		return Observation{Overflow: true, First: r.Overflows == 1}
	}
	if ratio < minScale || ratio > maxScale || estimate < minLearnt {
		// A short prompt's count is mostly its template's own tokens (a
		// date header, a default system prompt): its ratio says little
		// of the tokenizer, and a short prompt is never cut anyway.
		return Observation{}
	}
	r.Ratios = append(r.Ratios, ratio)
	if len(r.Ratios) > keptRatios {
		r.Ratios = slices.Delete(r.Ratios, 0, len(r.Ratios)-keptRatios)
	}
	s.dirty = true
	return Observation{Learnt: true}
}

// Untold reports, once, that model's prompts overflowed since the last
// time it was asked.
func (s *Scales) Untold(model string) bool {
	if s == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.models[model]
	if r == nil || r.Overflows == 0 || r.told {
		return false
	}
	r.told = true
	return true
}

// Overflows returns how many of model's prompts were seen cut.
func (s *Scales) Overflows(model string) int {
	if s == nil {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.models[model]; r != nil {
		return r.Overflows
	}
	return 0
}

// Save writes what was learnt, when anything was since the last save: to
// a temporary file renamed over the old one, so a crash leaves one or the
// other whole.
func (s *Scales) Save() error {
	if s == nil || s.path == "" {
		return nil
	}
	s.mu.Lock()
	if !s.dirty {
		s.mu.Unlock()
		return nil
	}
	b, err := json.MarshalIndent(s.models, "", " ")
	s.dirty = false
	s.mu.Unlock()
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(s.path), ".scales-*")
	if err != nil {
		return fmt.Errorf("saving the models' token scales: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err = tmp.Write(b); err == nil {
		err = tmp.Close()
	} else {
		tmp.Close()
	}
	if err == nil {
		err = os.Rename(tmp.Name(), s.path)
	}
	if err != nil {
		return fmt.Errorf("saving the models' token scales: %w", err)
	}
	return nil
}
