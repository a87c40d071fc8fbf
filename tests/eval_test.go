package tests

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestEvalLocomo(t *testing.T) {
	tiny := filepath.Join("..", "eval", "locomo", "testdata", "tiny.json")
	code, out, errOut := runVera(t, nil, "eval", "locomo", "--budget", "2000", "--embedder", "none", tiny)
	require.Equal(t, 0, code, errOut)
	var res struct {
		Questions      int     `json:"questions"`
		EvidenceRecall float64 `json:"evidence_recall"`
		AllEvidence    float64 `json:"all_evidence"`
		TokensMean     float64 `json:"tokens_mean"`
		P50MS          float64 `json:"p50_ms"`
		P95MS          float64 `json:"p95_ms"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &res), out)
	assert.Equal(t, 3, res.Questions)
	assert.Equal(t, 1.0, res.EvidenceRecall)

	code, _, errOut = runVera(t, nil, "eval", "locomo", "--embedder", "magic", tiny)
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "--embedder must be ollama or none")
	code, _, errOut = runVera(t, nil, "eval", "locomo", "--embedder", "none", "nope.json")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "nope.json")
	// The default embedder needs Ollama: a clear error when it is not there.
	code, _, errOut = runVera(t, []string{"VERA_OLLAMA_URL=http://127.0.0.1:1"}, "eval", "locomo", tiny)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "--embedder none")
}
