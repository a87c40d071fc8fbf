package tier

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/vera-proxy/vera/proxy/tier/learn"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestThinkPrefixForcesComplexAndIsStripped(t *testing.T) {
	r, err := New(nil, nil)
	require.NoError(t, err)
	d := r.Classify(context.Background(), "/think hi there", false)
	assert.Equal(t, Complex, d.Tier)
	assert.Equal(t, "think", d.By)
	assert.True(t, d.Think)
	assert.Equal(t, "hi there", d.Message)
	d = r.Classify(context.Background(), "  /think   what is 2+2?", false)
	assert.Equal(t, "what is 2+2?", d.Message)
	d = r.Classify(context.Background(), "what does /think do?", false)
	assert.False(t, d.Think, "only as a prefix")
	assert.Equal(t, Complex, r.Classify(context.Background(), "hello", true).Tier, "the deep model")
}

// The user's rules come before the learned stage.
func TestUserRulesComeFirst(t *testing.T) {
	r, err := New(map[Tier][]string{Complex: {`(?i)\bquarterly board report\b`}, Light: {`(?i)^status\?$`}}, nil)
	require.NoError(t, err)
	d := r.Classify(context.Background(), "Prepare the quarterly board report", false)
	assert.Equal(t, Complex, d.Tier)
	assert.Equal(t, "rule", d.By)
	d = r.Classify(context.Background(), "status?", false)
	assert.Equal(t, Light, d.Tier)
	assert.Equal(t, "rule", d.By)
	_, err = New(map[Tier][]string{Light: {`(`}}, nil)
	assert.ErrorContains(t, err, "routing.rules.light")
}

// The shipped classifier on messages the guide (eval/testdata/ROUTING.md)
// leaves no doubt about. Its accuracy is measured by cross-validation
// (`vera eval routing --cv 5`); these guard against a broken model.
func TestLearnedStage(t *testing.T) {
	r, err := New(nil, nil)
	require.NoError(t, err)
	for msg, want := range map[string]Tier{
		"hello!":                       Light,
		"thanks so much":               Light,
		"what's the tallest mountain?": Light,
		"привет!":                      Light,
		"сколько дней в феврале?":                                         Light,
		"Write a short poem about cats.":                                  Medium,
		"Prove that there are infinitely many primes.":                    Complex,
		"Design the architecture of a chat system for ten million users.": Complex,
		"проведи глубокий анализ рынка":                                   Complex,
	} {
		d := r.Classify(context.Background(), msg, false)
		assert.Equal(t, want, d.Tier, msg)
		assert.Equal(t, "learned", d.By, msg)
		assert.InDelta(t, 1, d.Probability[Light]+d.Probability[Medium]+d.Probability[Complex], 1e-9)
	}
}

func TestURLIsNeverLight(t *testing.T) {
	r, err := New(nil, nil)
	require.NoError(t, err)
	d := r.Classify(context.Background(), "what is https://example.com/page?", false)
	assert.True(t, d.URL)
	assert.Equal(t, Medium, d.Tier)
}

func TestAutoComplexOff(t *testing.T) {
	r, err := New(nil, nil)
	require.NoError(t, err)
	r.AutoComplex = false
	assert.Equal(t, Medium, r.Classify(context.Background(), "Prove Fermat's little theorem.", false).Tier)
	assert.Equal(t, Complex, r.Classify(context.Background(), "/think Prove Fermat's little theorem.", false).Tier, "explicit requests still are")
}

// axisEmbedder embeds a text on the axis of the first keyword it holds.
type axisEmbedder struct {
	down  bool
	calls int
}

func (e *axisEmbedder) Embed(_ context.Context, texts []string) ([][]float32, error) {
	e.calls++
	if e.down {
		return nil, errors.New("connection refused")
	}
	out := make([][]float32, len(texts))
	for i, s := range texts {
		v := []float32{0.1, 0.1, 0.1}
		switch {
		case strings.Contains(s, "tiny"):
			v[0] = 1
		case strings.Contains(s, "usual"):
			v[1] = 1
		case strings.Contains(s, "huge"):
			v[2] = 1
		case strings.Contains(s, "between"):
			v[1], v[2] = 1, 0.98
		}
		out[i] = v
	}
	return out, nil
}

func TestSimilarity(t *testing.T) {
	e := &axisEmbedder{}
	r, err := New(nil, e)
	require.NoError(t, err)
	r.Model = nil // the similarity stage alone
	examples := map[Tier][]string{Light: {"a tiny one", "tiny again"}, Medium: {"the usual"}, Complex: {"a huge task"}}
	r.Examples = func() map[Tier][]string { return examples }
	d := r.Classify(context.Background(), "something huge please", false)
	assert.Equal(t, Complex, d.Tier)
	assert.Equal(t, "similarity", d.By)
	assert.Greater(t, d.Scores[Complex], d.Scores[Light])
	assert.Equal(t, Light, r.Classify(context.Background(), "a tiny thing", false).Tier)
	assert.Equal(t, Medium, r.Classify(context.Background(), "somewhere between", false).Tier, "closer than the margin: medium")
	calls := e.calls
	r.Classify(context.Background(), "something huge please", false)
	assert.Equal(t, calls+1, e.calls, "the centroids are cached: one embedding per message")
	examples = map[Tier][]string{Light: {"tiny"}, Medium: {"usual"}, Complex: {"huge"}}
	r.Classify(context.Background(), "something huge please", false)
	assert.Equal(t, calls+2+3, e.calls, "new examples: the centroids again")

	e.down = true
	examples = map[Tier][]string{Light: {"tiny one"}, Medium: {"usual one"}, Complex: {"huge one"}} // centroids needed again
	d = r.Classify(context.Background(), "something huge please", false)
	assert.Equal(t, Medium, d.Tier, "the embedder down: medium")
	assert.Equal(t, "default", d.By)
	r.Model, _ = Shipped()
	assert.Equal(t, Light, r.Classify(context.Background(), "hello", false).Tier, "the learned stage still works")
}

// With an embedding model, the similarity stage decides only what the
// learned stage is unsure of.
func TestUnsureLearnedAsksSimilarity(t *testing.T) {
	var ex []learn.Example
	for i := range 30 {
		ex = append(ex, learn.Example{Text: fmt.Sprint("prove theorem ", i), Label: "complex"},
			learn.Example{Text: fmt.Sprint("hello there ", i), Label: "light"},
			learn.Example{Text: fmt.Sprint("write email ", i), Label: "medium"})
	}
	e := &axisEmbedder{}
	r, err := New(nil, e)
	require.NoError(t, err)
	r.Model = learn.Train(ex, learn.DefaultParams)
	r.Examples = func() map[Tier][]string {
		return map[Tier][]string{Light: {"a tiny one"}, Medium: {"the usual"}, Complex: {"a huge task"}}
	}
	d := r.Classify(context.Background(), "prove theorem", false)
	assert.Equal(t, "learned", d.By)
	assert.Equal(t, Complex, d.Tier)
	assert.Zero(t, e.calls, "a sure decision embeds nothing")
	d = r.Classify(context.Background(), "zzz huge", false)
	for _, p := range d.Probability {
		assert.Less(t, p, Unsure, "no word it knows: unsure")
	}
	assert.Equal(t, "similarity", d.By, "%v", d.Probability)
	assert.Equal(t, Complex, d.Tier)
	e.down = true
	d = r.Classify(context.Background(), "theorem there email", false)
	require.Positive(t, len(d.Probability))
	for _, p := range d.Probability {
		require.Less(t, p, Unsure, "one word of each tier: unsure")
	}
	assert.Equal(t, "learned", d.By, "the embedder down: the learned stage's best guess")
	d = r.Classify(context.Background(), "zzz other", false)
	assert.Equal(t, "default", d.By, "no word it knows, no similarity: the default")
	assert.Equal(t, Medium, d.Tier)
}

// A message the classifier knows no word of (blank, or a language it
// never saw) is not decided by its shape alone: the similarity stage, or
// medium.
func TestUnknownWordsAreNotGuessed(t *testing.T) {
	r, err := New(nil, nil)
	require.NoError(t, err)
	for _, msg := range []string{"", "   ", "?!", "请严格证明根号二是无理数", "为一千万用户设计聊天系统的架构"} {
		d := r.Classify(context.Background(), msg, false)
		assert.Equal(t, Medium, d.Tier, "%q", msg)
		assert.Equal(t, "default", d.By, "%q", msg)
	}
	e := &axisEmbedder{}
	r, err = New(nil, e)
	require.NoError(t, err)
	r.Examples = func() map[Tier][]string {
		return map[Tier][]string{Light: {"a tiny one"}, Medium: {"the usual"}, Complex: {"a huge task"}}
	}
	d := r.Classify(context.Background(), "huge 证明", false)
	assert.Equal(t, "similarity", d.By)
	assert.Equal(t, Complex, d.Tier)
}

// Whatever the text, Classify returns one of the tiers and never panics.
func FuzzClassify(f *testing.F) {
	for _, s := range []string{"", "hi", "/think prove it", "```go\nfunc main() {}\n```", "привет", "1+1=", "\xff\xfe", "http://x.y/z?"} {
		f.Add(s)
	}
	r, err := New(nil, nil)
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, msg string) {
		d := r.Classify(context.Background(), msg, false)
		if d.Tier != Light && d.Tier != Medium && d.Tier != Complex {
			t.Fatalf("%q: tier %q", msg, d.Tier)
		}
	})
}

// The model's labels must be the three tiers.
func TestModelLabelsAreTheTiers(t *testing.T) {
	m := learn.Train([]learn.Example{{Text: "a", Label: "light"}, {Text: "b", Label: "huge"}}, learn.DefaultParams)
	_, err := check(m)
	assert.ErrorContains(t, err, "want light, medium and complex")
	m, err = Shipped()
	require.NoError(t, err)
	_, err = check(m)
	assert.NoError(t, err)
}

// Everyday messages that only sound deep are not sent to the complex
// model (each would cost a VRAM flush).
func TestEverydayMessagesAreNotComplex(t *testing.T) {
	r, err := New(nil, nil)
	require.NoError(t, err)
	for _, msg := range []string{
		"What's the tradeoff between tea and coffee?",
		"Can you research cheap flights to Rome?",
		"Give me a comprehensive list of fruits",
		"объясни пошагово как сварить яйцо",
		"давай найдём компромисс",
	} {
		assert.NotEqual(t, Complex, r.Classify(context.Background(), msg, false).Tier, msg)
	}
	assert.Equal(t, Medium, r.Classify(context.Background(), "What's wrong with my regex ^(a+)+$ in Go?", false).Tier)
	d := r.Classify(context.Background(), "/think\nwhy?", true)
	assert.True(t, d.Think, "vera-deep with the prefix: it still comes off")
	assert.Equal(t, "why?", d.Message)
}

// The shipped weights are what `go generate` makes of the corpus: the
// same hyperparameters and features, and every weight within a tolerance
// (CPUs that fuse multiply-adds differ in the last bits).
func TestShippedModelIsRegenerated(t *testing.T) {
	if testing.Short() {
		t.Skip("trains the classifier: seconds")
	}
	data, err := os.ReadFile("../../eval/testdata/routing-corpus.jsonl")
	require.NoError(t, err)
	examples, err := learn.ReadExamples(bytes.NewReader(data))
	require.NoError(t, err)
	got := learn.Generate(examples)
	want, err := Shipped()
	require.NoError(t, err)
	require.Equal(t, want.Labels, got.Labels)
	require.Equal(t, want.Params, got.Params, "run go generate ./proxy/tier/ after changing the corpus or the training")
	require.Len(t, got.Weights, len(want.Weights))
	for i := range want.Bias {
		assert.InDelta(t, want.Bias[i], got.Bias[i], 1e-3*max(1, math.Abs(want.Bias[i])))
	}
	off := 0
	for f, w := range want.Weights {
		g, ok := got.Weights[f]
		require.True(t, ok, "feature %q", f)
		for i := range w {
			if math.Abs(w[i]-g[i]) > 1e-3*max(1, math.Abs(w[i])) {
				off++
			}
		}
	}
	assert.Zero(t, off, "weights off by more than the tolerance: run go generate ./proxy/tier/")
}

// BenchmarkClassify: one message routed with the shipped classifier (no
// embedding model), over messages of every tier and length.
//
//	go test -run '^$' -bench Classify ./proxy/tier/
func BenchmarkClassify(b *testing.B) {
	r, err := New(nil, nil)
	require.NoError(b, err)
	msgs := []string{
		"hi",
		"what's 15% of 240",
		"Write a short poem about cats.",
		"спроектируй схему шардирования для чата на 10 млн пользователей",
		"I'm booking a train for my mother and the site has a senior checkbox with no explanation, and she is 67 and we are travelling from Munich to Hamburg next Tuesday: does the senior discount apply from 60 or from 65 in Germany?",
		"why does this blow up?\n\nconst total = items.map(i => i.price).reduce((a, b) => a + b);\n\nTypeError: Reduce of empty array with no initial value",
	}
	ctx := context.Background()
	i := 0
	for b.Loop() {
		r.Classify(ctx, msgs[i%len(msgs)], false)
		i++
	}
}
