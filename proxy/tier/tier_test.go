package tier

import (
	"context"
	"errors"
	"strings"
	"testing"

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

func TestRules(t *testing.T) {
	r, err := New(map[Tier][]string{Complex: {`(?i)\bquarterly board report\b`}}, nil)
	require.NoError(t, err)
	for msg, want := range map[string]Tier{
		"hello!":                       Light,
		"thanks so much":               Light,
		"what's the tallest mountain?": Light,
		"12 * 7 =":                     Light,
		"привет!":                      Light,
		"сколько дней в феврале?":                                                  Light,
		"Write a short poem about cats.":                                           Medium,
		"How do I boil an egg?":                                                    Medium,
		"напиши письмо в банк":                                                     Medium,
		"Prove that there are infinitely many primes.":                             Complex,
		"Design the architecture of a chat system for ten million users.":          Complex,
		"проведи глубокий анализ рынка":                                            Complex,
		"Prepare the quarterly board report":                                       Complex,
		"I was wondering about the weather in general terms and what it means, ok": Medium,
	} {
		d := r.Classify(context.Background(), msg, false)
		assert.Equal(t, want, d.Tier, msg)
	}
	_, err = New(map[Tier][]string{Light: {`(`}}, nil)
	assert.ErrorContains(t, err, "routing.rules.light")
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
	assert.Equal(t, Light, r.Classify(context.Background(), "hello", false).Tier, "rules still work")
}

// Everyday messages that only sound deep are not sent to the complex
// model (each would cost a VRAM flush).
func TestRulesAreNotTooBroad(t *testing.T) {
	r, err := New(nil, nil)
	require.NoError(t, err)
	for _, msg := range []string{
		"What's the tradeoff between tea and coffee?",
		"Can you research cheap flights to Rome?",
		"I plan to take the bus service tomorrow",
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
