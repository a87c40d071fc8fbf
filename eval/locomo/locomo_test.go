package locomo

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/memory/embedded"
	"github.com/vera-proxy/vera/text"
)

func open(t *testing.T) *embedded.DB {
	db, err := embedded.Open(context.Background(), t.TempDir())
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	return db
}

func TestLoadAndTurns(t *testing.T) {
	c, err := Load(filepath.Join("testdata", "tiny.json"))
	require.NoError(t, err)
	assert.Equal(t, "tiny", c.Name)
	require.Len(t, c.Sessions, 2)
	assert.Equal(t, time.Date(2023, 5, 8, 13, 56, 0, 0, time.UTC), c.Sessions[0].Time)
	tok, err := text.NewTokenizer()
	require.NoError(t, err)
	turns := c.Turns("ns", tok)
	require.Len(t, turns, 3)
	assert.Equal(t, "User: Ada: Hi Ben! I started pottery classes last week.\nAssistant: Ben: Nice! I adopted a greyhound called Pixel.", turns[0].Text)
	assert.Equal(t, []any{"D1:1", "D1:2"}, turns[0].Metadata["dia_ids"])
	assert.Equal(t, "User: Ada: A greyhound, how lovely. [photo: a photo of a clay bowl]\nAssistant: (no reply)", turns[1].Text, "an odd last message still makes a whole pair")
	assert.Equal(t, []any{"D1:3"}, turns[1].Metadata["dia_ids"])
	assert.Positive(t, turns[2].Tokens)
}

func TestLoadRefusesOtherJSON(t *testing.T) {
	_, err := Load(filepath.Join("..", "..", "config.example.toml"))
	assert.Error(t, err)
	_, err = Load("missing.json")
	assert.Error(t, err)
}

func TestRunScoresEvidence(t *testing.T) {
	c, err := Load(filepath.Join("testdata", "tiny.json"))
	require.NoError(t, err)
	tok, err := text.NewTokenizer()
	require.NoError(t, err)
	res, err := Run(context.Background(), []*Conversation{c}, open(t), nil, tok, 2000)
	require.NoError(t, err)
	assert.Equal(t, 3, res.Questions, "categories 1-4 with evidence only")
	assert.Equal(t, 1.0, res.EvidenceRecall)
	assert.Equal(t, 1.0, res.AllEvidence)
	assert.Positive(t, res.TokensMean)

	// A budget too small for any turn finds nothing.
	res, err = Run(context.Background(), []*Conversation{c}, open(t), nil, tok, 30)
	require.NoError(t, err)
	assert.Equal(t, 0.0, res.EvidenceRecall)

	// With vectors too.
	res, err = Run(context.Background(), []*Conversation{c}, open(t), text.HashEmbedder{}, tok, 2000)
	require.NoError(t, err)
	assert.Equal(t, 1.0, res.EvidenceRecall)
}

// TestBenchmarkBeatsBM25 runs the real LoCoMo files when they are next to
// the repository (they are not part of it: CC BY-NC data).
func TestBenchmarkBeatsBM25(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("..", "..", "..", "shared", "bench", "locomo", "*.json"))
	if len(files) == 0 {
		t.Skip("LoCoMo files not found next to the repository")
	}
	var convs []*Conversation
	for _, f := range files {
		c, err := Load(f)
		require.NoError(t, err)
		convs = append(convs, c)
	}
	tok, err := text.NewTokenizer()
	require.NoError(t, err)
	res, err := Run(context.Background(), convs, open(t), nil, tok, 2000)
	require.NoError(t, err)
	t.Logf("%+v", res)
	assert.Greater(t, res.EvidenceRecall, 0.69, "plain BM25 over single messages reaches 0.69")
	assert.LessOrEqual(t, res.TokensMean, 2000.0)
}

// Leave one conversation out: each fold's choice is made on the others;
// its figures are the held-out conversation's.
func TestCrossValidate(t *testing.T) {
	tok, err := text.NewTokenizer()
	require.NoError(t, err)
	var convs []*Conversation
	for _, name := range []string{"tiny", "tiny2"} {
		c, err := Load(filepath.Join("testdata", "tiny.json"))
		require.NoError(t, err)
		c.Name = name
		convs = append(convs, c)
	}
	grid := []Options{{ContextHits: 8}, {ContextHitsPer1000: 1}}
	cv, err := CrossValidate(context.Background(), convs, open(t), nil, tok, 2000, grid)
	require.NoError(t, err)
	require.Len(t, cv.Folds, 2)
	assert.Equal(t, "tiny", cv.Folds[0].HeldOut)
	assert.Equal(t, 6, cv.Questions, "every question once, held out")
	assert.Equal(t, 3, cv.Folds[1].Questions)
	assert.Contains(t, grid, cv.Folds[0].Chosen)
	assert.Equal(t, 1.0, cv.EvidenceRecall)
	assert.Equal(t, 1.0, cv.Defaults.EvidenceRecall)
	assert.Equal(t, 2000, cv.Budget)
	assert.Nil(t, cv.WithoutAround, "no option of this grid is without the share (Around 0 is the default's)")

	// With the neighbours' share and without: the choice is compared with
	// the same cross-validation over the options without it.
	mixed := withAround(grid)
	require.Len(t, mixed, len(grid)*(1+len(aroundShares)))
	assert.Equal(t, -1.0, mixed[0].Around, "the choice before comes first")
	cv, err = CrossValidate(context.Background(), convs, open(t), nil, tok, 2000, mixed)
	require.NoError(t, err)
	require.NotNil(t, cv.WithoutAround)
	assert.Equal(t, 6, cv.WithoutAround.Questions)
	assert.InDelta(t, cv.EvidenceRecall-cv.WithoutAround.EvidenceRecall, cv.WithoutAround.Gain, 1e-4)

	_, err = CrossValidate(context.Background(), convs[:1], open(t), nil, tok, 2000, grid)
	assert.ErrorContains(t, err, "two or more")
}

// Each conversation's choice is made on the others alone: here option 0
// wins on the first conversation by far (and so on all of them pooled),
// but a fold that holds the first out must choose option 1.
func TestChooseLeavesTheConversationOut(t *testing.T) {
	sc := func(q int, r float64) score { return score{questions: q, recall: r * float64(q)} }
	scores := [][]score{
		{sc(100, 1), sc(10, 0), sc(10, 0)},
		{sc(100, 0), sc(10, 1), sc(10, 0.6)},
	}
	assert.Equal(t, []int{1, 0, 0}, choose(scores))
}
