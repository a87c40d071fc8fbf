package learn

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
)

// Example is one labelled query.
type Example struct {
	Text  string
	Label string
	// Group: examples that say the same thing (a paraphrase, a
	// translation) share one, and so one fold.
	Group string
	Lang  string
}

// Params are the training's hyperparameters.
type Params struct {
	Options
	// L2 is the weight decay: the penalty on the squared weights, per
	// example.
	L2 float64 `json:"l2"`
	// Epochs are the passes over the examples.
	Epochs int `json:"epochs"`
	// MinCount drops the features fewer examples hold.
	MinCount int `json:"min_count"`
}

// DefaultParams are the starting point of the search Tune makes.
var DefaultParams = Params{L2: 1e-3, Epochs: 40, MinCount: 2}

// Model is a multinomial logistic regression over Features: each label's
// score is its bias plus the weights of the message's features, over the
// square root of their count (the features of a long and of a short
// message weigh alike).
type Model struct {
	Labels  []string             `json:"labels"`
	Params  Params               `json:"params"`
	Bias    []float64            `json:"bias"`
	Weights map[string][]float64 `json:"weights"`
}

// Train fits a model to examples, deterministically: the same examples in
// the same order give the same weights (to the last bit on one machine;
// CPUs that fuse multiply-adds differ in the last bits). With no examples
// the model has no labels, and predicts none.
func Train(examples []Example, p Params) *Model {
	labels := labelsOf(examples)
	index := map[string]int{}
	for i, l := range labels {
		index[l] = i
	}
	feats := make([][]string, len(examples))
	count := map[string]int{}
	for i, e := range examples {
		feats[i] = Features(e.Text, p.Options)
		for _, f := range feats[i] {
			count[f]++
		}
	}
	// Features by number, in sorted order: the updates run in a fixed
	// order whatever the map's.
	var names []string
	for f, n := range count {
		if n >= max(p.MinCount, 1) {
			names = append(names, f)
		}
	}
	slices.Sort(names)
	id := make(map[string]int, len(names))
	for i, f := range names {
		id[f] = i
	}
	xs := make([][]int, len(examples))
	for i, fs := range feats {
		for _, f := range fs {
			if j, ok := id[f]; ok {
				xs[i] = append(xs[i], j)
			}
		}
	}
	k := len(labels)
	w := make([]float64, len(names)*k)
	b := make([]float64, k)
	// AdaGrad's sums of squared gradients.
	gw := make([]float64, len(w))
	gb := make([]float64, k)
	const rate = 0.5
	order := permutation(len(examples))
	prob := make([]float64, k)
	for range p.Epochs {
		for _, i := range order {
			x := xs[i]
			scale := 1 / math.Sqrt(float64(max(len(x), 1)))
			for c := range k {
				s := b[c]
				for _, j := range x {
					s += w[j*k+c] * scale
				}
				prob[c] = s
			}
			softmax(prob)
			y := index[examples[i].Label]
			for c := range k {
				g := prob[c]
				if c == y {
					g--
				}
				gb[c] += g * g
				b[c] -= rate * g / (math.Sqrt(gb[c]) + 1e-8)
				for _, j := range x {
					// The decay applies to the weights the example
					// touches, as many times as they are touched.
					gj := g*scale + p.L2*w[j*k+c]
					gw[j*k+c] += gj * gj
					w[j*k+c] -= rate * gj / (math.Sqrt(gw[j*k+c]) + 1e-8)
				}
			}
		}
	}
	m := &Model{Labels: labels, Params: p, Bias: b, Weights: make(map[string][]float64, len(names))}
	for i, f := range names {
		m.Weights[f] = slices.Clone(w[i*k : (i+1)*k])
	}
	return m
}

// Predict returns the likeliest label of text, the probability of each
// label (in Labels' order), and how many of the text's words the model
// knows: with none (a blank message, a language it never saw) its guess
// rests on the message's shape alone.
func (m *Model) Predict(text string) (string, []float64, int) {
	if len(m.Labels) == 0 {
		return "", nil, 0
	}
	prob := slices.Clone(m.Bias)
	var x [][]float64
	known := 0
	for _, f := range Features(text, m.Params.Options) {
		if w, ok := m.Weights[f]; ok {
			x = append(x, w)
			if strings.HasPrefix(f, "w:") {
				known++
			}
		}
	}
	scale := 1 / math.Sqrt(float64(max(len(x), 1)))
	for _, w := range x {
		for c := range prob {
			prob[c] += w[c] * scale
		}
	}
	softmax(prob)
	best := 0
	for c := range prob {
		if prob[c] > prob[best] {
			best = c
		}
	}
	return m.Labels[best], prob, known
}

// Marshal writes the model as JSON, its weights rounded to six
// significant digits (features in sorted order, one a line): what
// `go generate` commits.
func (m *Model) Marshal() []byte {
	var buf bytes.Buffer
	head, _ := json.Marshal(struct {
		Labels []string  `json:"labels"`
		Params Params    `json:"params"`
		Bias   []float64 `json:"bias"`
	}{m.Labels, m.Params, round(m.Bias)})
	buf.Write(head[:len(head)-1])
	buf.WriteString(`,"weights":{`)
	names := make([]string, 0, len(m.Weights))
	for f := range m.Weights {
		names = append(names, f)
	}
	slices.Sort(names)
	for i, f := range names {
		if i > 0 {
			buf.WriteByte(',')
		}
		buf.WriteString("\n")
		k, _ := json.Marshal(f)
		v, _ := json.Marshal(round(m.Weights[f]))
		buf.Write(k)
		buf.WriteByte(':')
		buf.Write(v)
	}
	buf.WriteString("\n}}\n")
	return buf.Bytes()
}

// Load reads a model written by Marshal.
func Load(data []byte) (*Model, error) {
	var m Model
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("tier model: %w", err)
	}
	if len(m.Labels) == 0 || len(m.Bias) != len(m.Labels) {
		return nil, fmt.Errorf("tier model: %d labels and %d biases", len(m.Labels), len(m.Bias))
	}
	for f, w := range m.Weights {
		if len(w) != len(m.Labels) {
			return nil, fmt.Errorf("tier model: feature %q has %d weights for %d labels", f, len(w), len(m.Labels))
		}
	}
	return &m, nil
}

func round(v []float64) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		if x != 0 {
			e := math.Pow(10, 5-math.Floor(math.Log10(math.Abs(x))))
			out[i] = math.Round(x*e) / e
		}
	}
	return out
}

func softmax(v []float64) {
	top := slices.Max(v)
	sum := 0.0
	for i := range v {
		v[i] = math.Exp(v[i] - top)
		sum += v[i]
	}
	for i := range v {
		v[i] /= sum
	}
}

// labelsOf returns the examples' labels, sorted.
func labelsOf(examples []Example) []string {
	var out []string
	for _, e := range examples {
		if !slices.Contains(out, e.Label) {
			out = append(out, e.Label)
		}
	}
	slices.Sort(out)
	return out
}

// permutation is a fixed shuffle of 0..n-1 (a linear congruential
// generator: the same on every machine and Go version).
func permutation(n int) []int {
	p := make([]int, n)
	for i := range p {
		p[i] = i
	}
	state := uint64(0x9e3779b97f4a7c15)
	for i := n - 1; i > 0; i-- {
		state = state*6364136223846793005 + 1442695040888963407
		j := int((state >> 33) % uint64(i+1))
		p[i], p[j] = p[j], p[i]
	}
	return p
}

// ReadExamples reads labelled queries, one JSON object a line
// ({"text","tier","lang","group"}; "query" stands for "text" in the older
// set); blank lines are skipped, a bad line is an error naming it.
func ReadExamples(r io.Reader) ([]Example, error) {
	var out []Example
	err := EachLine(r, func(n int, line []byte) error {
		var q struct{ Text, Query, Tier, Lang, Group string }
		if err := json.Unmarshal(line, &q); err != nil {
			return fmt.Errorf("line %d: not a JSON object: %v", n, err)
		}
		if q.Text == "" {
			q.Text = q.Query
		}
		if strings.TrimSpace(q.Text) == "" || q.Tier == "" {
			return fmt.Errorf("line %d: want {\"text\":\"...\",\"tier\":\"...\"}", n)
		}
		out = append(out, Example{Text: q.Text, Label: q.Tier, Group: q.Group, Lang: q.Lang})
		return nil
	})
	return out, err
}

// EachLine calls fn with each line of r that is not blank, trimmed, and
// its number; the first error stops it.
func EachLine(r io.Reader, fn func(n int, line []byte) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		if line := bytes.TrimSpace(sc.Bytes()); len(line) > 0 {
			if err := fn(n, line); err != nil {
				return err
			}
		}
	}
	return sc.Err()
}
