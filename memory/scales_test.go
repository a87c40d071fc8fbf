package memory_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/memory"
)

func TestScalesLearnKeepAndTellCuts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "token_scales.json")
	s, err := memory.OpenScales(path)
	require.NoError(t, err)
	prior := memory.Prior(300)
	assert.Equal(t, memory.Scale(4.5), prior, "a byte-level vocabulary")
	sc, learnt := s.Scale("tiny", prior)
	assert.Equal(t, prior, sc)
	assert.False(t, learnt)

	// Learnt: the largest recent ratio.
	assert.True(t, s.Observe("tiny", 1000, 4200, 8192, prior).Learnt)
	assert.True(t, s.Observe("tiny", 1000, 3900, 8192, prior).Learnt)
	sc, learnt = s.Scale("tiny", prior)
	assert.True(t, learnt)
	assert.InDelta(t, 4.2, float64(sc), 1e-9)
	assert.Equal(t, 476, sc.Within(2000))
	assert.Equal(t, 4200, sc.Of(1000))

	// The runner's cut reports the window exactly; the server's drop far
	// less than was sent. Neither is learnt from; both are overflows,
	// told once.
	obs := s.Observe("tiny", 3000, 2048, 2048, prior)
	assert.True(t, obs.Overflow)
	assert.True(t, obs.First)
	assert.False(t, s.Observe("tiny", 3000, 1500, 2048, prior).Learnt, "dropped messages: 0.5 of the scale")
	assert.Equal(t, 2, s.Overflows("tiny"))
	assert.True(t, s.Untold("tiny"))
	assert.False(t, s.Untold("tiny"), "told once")
	sc, _ = s.Scale("tiny", prior)
	assert.InDelta(t, 4.2, float64(sc), 1e-9, "cut prompts teach nothing")

	// Nonsense (an image's tokens, a zero) teaches nothing either.
	assert.False(t, s.Observe("tiny", 10, 5000, 0, prior).Learnt)
	assert.False(t, s.Observe("tiny", 0, 5000, 0, prior).Learnt)
	// A short prompt's count is mostly its template's: "hi" and a date
	// header are six of the model's tokens for two of vera's.
	assert.False(t, s.Observe("tiny", 40, 240, 8192, prior).Learnt)

	// Kept across a restart.
	require.NoError(t, s.Save())
	again, err := memory.OpenScales(path)
	require.NoError(t, err)
	sc, learnt = again.Scale("tiny", prior)
	assert.True(t, learnt)
	assert.InDelta(t, 4.2, float64(sc), 1e-9)
	assert.Equal(t, 2, again.Overflows("tiny"))

	// A damaged file is reported, and learning starts again.
	require.NoError(t, os.WriteFile(path, []byte("{not json"), 0o600))
	damaged, err := memory.OpenScales(path)
	assert.ErrorContains(t, err, "learning them again")
	_, learnt = damaged.Scale("tiny", prior)
	assert.False(t, learnt)
}

func TestPriors(t *testing.T) {
	assert.Equal(t, memory.Scale(4.5), memory.Prior(259))
	assert.Equal(t, memory.Scale(2), memory.Prior(8000))
	assert.Equal(t, memory.Scale(1.3), memory.Prior(32000))
	assert.Equal(t, memory.Scale(1.3), memory.Prior(0))
}
