// Package tier classifies a chat message into the light, medium or complex
// tier ([routing]): a "/think " prefix, then the user's regular
// expressions ([routing.rules]), then a classifier learned from labelled
// queries in English and Russian (proxy/tier/learn; its weights are
// model.json, made by `go generate`), and, when it is unsure and an
// embedding model is set, the message's embedding similarity to per-tier
// example utterances. A URL means at least medium. It does no HTTP: the
// embedder is given.
package tier

//go:generate go run ./learn/train -o model.json ../../eval/testdata/routing-corpus.jsonl

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"sync"
	"unicode"

	"github.com/vera-proxy/vera/proxy/tier/learn"
)

//go:embed model.json
var modelJSON []byte

// Shipped is the classifier trained from eval/testdata/routing-corpus.jsonl.
var Shipped = sync.OnceValues(func() (*learn.Model, error) {
	m, err := learn.Load(modelJSON)
	if err != nil {
		return nil, err
	}
	return check(m)
})

// Unsure is the learned stage's probability below which a router with an
// embedding model asks the similarity stage instead.
const Unsure = 0.5

// Tier is one of the three tiers.
type Tier string

const (
	Light   Tier = "light"
	Medium  Tier = "medium"
	Complex Tier = "complex"
)

// Tiers lists the tiers, lightest first.
var Tiers = []Tier{Light, Medium, Complex}

// Embedder embeds texts (memory.OllamaEmbedder does).
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// Decision is a classification and why it was made.
type Decision struct {
	Tier Tier
	// By says what decided: "deep" (the deep virtual model), "think" (the
	// prefix), "rule" (of [routing.rules]), "learned", "similarity",
	// "default".
	By string
	// Rule is the expression that matched, for By "rule".
	Rule string
	// Scores are the similarities to each tier, when they were computed.
	Scores map[Tier]float64
	// Probability is the learned stage's confidence in each tier, when
	// it ran.
	Probability map[Tier]float64
	// Message is the message with a "/think " prefix removed.
	Message string
	// Think is set when the prefix was there.
	Think bool
	// URL is set when the message holds a URL (never light).
	URL bool
}

// Router classifies messages.
type Router struct {
	rules []rule
	emb   Embedder
	// Model is the learned stage; nil skips it.
	Model *learn.Model
	// Margin: when the best two tiers' similarities are closer, medium.
	Margin float64
	// AutoComplex false keeps complex for explicit requests (the deep
	// model, the /think prefix).
	AutoComplex bool
	// Examples returns the example utterances per tier (prompts/tiers);
	// nil or empty: no similarity stage.
	Examples func() map[Tier][]string

	mu        sync.Mutex
	centroids map[Tier][]float32
	key       string // digest of the examples the centroids came from
}

type rule struct {
	tier Tier
	re   *regexp.Regexp
}

// New returns a Router with the shipped classifier and the user's rules
// (per tier: complex ones are tried first, then medium, then light); emb
// may be nil (no similarity stage).
func New(extra map[Tier][]string, emb Embedder) (*Router, error) {
	m, err := Shipped()
	if err != nil {
		return nil, err
	}
	r := &Router{emb: emb, Model: m, Margin: 0.05, AutoComplex: true}
	for _, t := range []Tier{Complex, Medium, Light} {
		for _, src := range extra[t] {
			re, err := regexp.Compile(src)
			if err != nil {
				return nil, fmt.Errorf("routing.rules.%s: %q: %w", t, src, err)
			}
			r.rules = append(r.rules, rule{tier: t, re: re})
		}
	}
	return r, nil
}

var urlRE = regexp.MustCompile(`(?i)\b(https?://|www\.)\S+`)

// thinkPrefix is the prefix that asks for the complex tier.
const thinkPrefix = "/think "

// Classify decides the tier of message. deep is set for the deep virtual
// model, which is always complex.
func (r *Router) Classify(ctx context.Context, message string, deep bool) Decision {
	d := Decision{Message: message, URL: urlRE.MatchString(message)}
	trimmed := strings.TrimLeftFunc(message, unicode.IsSpace)
	if rest, ok := strings.CutPrefix(trimmed, strings.TrimSpace(thinkPrefix)); ok && (rest == "" || unicode.IsSpace(rune(rest[0]))) {
		d.Think, d.Message = true, strings.TrimLeftFunc(rest, unicode.IsSpace)
	}
	switch {
	case deep:
		d.Tier, d.By = Complex, "deep"
	case d.Think:
		d.Tier, d.By = Complex, "think"
	default:
		d.Tier, d.By = r.match(message, &d)
		if d.By == "" {
			d.Tier, d.By = r.learned(message, &d)
		}
		if d.By == "" || d.By == "learned" && d.Probability[d.Tier] < Unsure && r.emb != nil && r.Examples != nil {
			if t, by := r.similar(ctx, message, &d); by == "similarity" || d.By == "" {
				d.Tier, d.By = t, by
			}
		}
		if d.Tier == Complex && !r.AutoComplex {
			d.Tier = Medium
		}
	}
	if d.URL && d.Tier == Light {
		d.Tier = Medium
	}
	return d
}

// match applies the user's rules: complex ones first, then medium, then
// light.
func (r *Router) match(message string, d *Decision) (Tier, string) {
	text := strings.TrimSpace(message)
	for _, ru := range r.rules {
		if ru.re.MatchString(text) {
			d.Rule = ru.re.String()
			return ru.tier, "rule"
		}
	}
	return Medium, ""
}

// learned asks the classifier; "" when there is none, or when it knows
// none of the message's words (a blank message, a language it never
// saw): its guess would rest on the message's shape alone.
func (r *Router) learned(message string, d *Decision) (Tier, string) {
	if r.Model == nil {
		return Medium, ""
	}
	label, prob, known := r.Model.Predict(message)
	d.Probability = make(map[Tier]float64, len(prob))
	for i, l := range r.Model.Labels {
		d.Probability[Tier(l)] = prob[i]
	}
	if known == 0 {
		return Medium, ""
	}
	return Tier(label), "learned"
}

// check refuses a model whose labels are not the three tiers.
func check(m *learn.Model) (*learn.Model, error) {
	labels := slices.Sorted(slices.Values(m.Labels))
	if !slices.Equal(labels, []string{string(Complex), string(Light), string(Medium)}) {
		return nil, fmt.Errorf("tier model: labels %q, want light, medium and complex", m.Labels)
	}
	return m, nil
}

// similar compares the message's embedding with each tier's centroid.
func (r *Router) similar(ctx context.Context, message string, d *Decision) (Tier, string) {
	if r.emb == nil || r.Examples == nil {
		return Medium, "default"
	}
	cents, err := r.centroidsFor(ctx)
	if err != nil || len(cents) == 0 {
		return Medium, "default"
	}
	v, err := r.emb.Embed(ctx, []string{message})
	if err != nil || len(v) != 1 {
		return Medium, "default"
	}
	d.Scores = map[Tier]float64{}
	best, second := Tier(""), math.Inf(-1)
	for _, t := range Tiers {
		c, ok := cents[t]
		if !ok {
			continue
		}
		s := cosine(v[0], c)
		d.Scores[t] = s
		switch {
		case best == "" || s > d.Scores[best]:
			if best != "" {
				second = d.Scores[best]
			}
			best = t
		case s > second:
			second = s
		}
	}
	if best == "" || d.Scores[best]-second < r.Margin {
		return Medium, "similarity"
	}
	return best, "similarity"
}

// centroidsFor returns the tiers' centroids, computed again when the
// examples change (the embedding model is fixed for vera's run).
func (r *Router) centroidsFor(ctx context.Context) (map[Tier][]float32, error) {
	ex := r.Examples()
	h := sha256.New()
	for _, t := range Tiers {
		for _, e := range ex[t] {
			fmt.Fprintf(h, "%s\x00%s\n", t, e)
		}
	}
	key := hex.EncodeToString(h.Sum(nil))
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.key == key && r.centroids != nil {
		return r.centroids, nil
	}
	cents := map[Tier][]float32{}
	for _, t := range Tiers {
		if len(ex[t]) == 0 {
			continue
		}
		vs, err := r.emb.Embed(ctx, ex[t])
		if err != nil {
			return nil, err
		}
		cents[t] = mean(vs)
	}
	r.centroids, r.key = cents, key
	return cents, nil
}

func mean(vs [][]float32) []float32 {
	if len(vs) == 0 {
		return nil
	}
	out := make([]float32, len(vs[0]))
	for _, v := range vs {
		if len(v) != len(out) {
			continue
		}
		n := norm(v)
		for i := range v {
			out[i] += v[i] / n
		}
	}
	return out
}

func norm(v []float32) float32 {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	if s == 0 {
		return 1
	}
	return float32(math.Sqrt(s))
}

func cosine(a, b []float32) float64 {
	if len(a) != len(b) || len(a) == 0 {
		return 0
	}
	var ab, aa, bb float64
	for i := range a {
		ab += float64(a[i]) * float64(b[i])
		aa += float64(a[i]) * float64(a[i])
		bb += float64(b[i]) * float64(b[i])
	}
	if aa == 0 || bb == 0 {
		return 0
	}
	return ab / math.Sqrt(aa*bb)
}
