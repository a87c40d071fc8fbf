package main

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/memory"
	"github.com/vera-proxy/vera/text"
)

// TestMain lets the test binary serve as the harness's child processes
// (the fake Ollama, the bare proxy), as the harness's own binary does.
func TestMain(m *testing.M) {
	if runChild() {
		return
	}
	os.Exit(m.Run())
}

// The harness at its tiny size, so that it cannot rot: every measurement
// runs and the JSON holds every section. The figures mean nothing here.
func TestQuickRun(t *testing.T) {
	if testing.Short() {
		t.Skip("builds vera and runs it")
	}
	out := filepath.Join(t.TempDir(), "bench.json")
	// The harness builds vera from the checkout: run from its root.
	wd, err := os.Getwd()
	require.NoError(t, err)
	require.NoError(t, os.Chdir(".."))
	t.Cleanup(func() { os.Chdir(wd) })
	require.NoError(t, run(context.Background(), []string{"--quick", "--json", out}, io.Discard, logWriter{t}))
	b, err := os.ReadFile(out)
	require.NoError(t, err)
	var r Results
	require.NoError(t, json.Unmarshal(b, &r))
	assert.True(t, r.Quick)
	assert.Len(t, r.Overhead, 6, "three routes at concurrency 1 and 32")
	for _, o := range r.Overhead {
		assert.Positive(t, o.Direct.P50, o.Route)
		assert.Positive(t, o.Vera.P50, o.Route)
	}
	require.Len(t, r.Streaming, 3)
	assert.Positive(t, r.Streaming[2].TTFBP50)
	require.Len(t, r.Memory, 8, "the five dialects, the common words and the unknown words on the embedded store, /api/chat on Qdrant")
	for i, d := range dialects {
		assert.Equal(t, "embedded", r.Memory[i].Backend)
		assert.Equal(t, d.route, r.Memory[i].Dialect)
	}
	assert.Equal(t, commonWords, r.Memory[5].Dialect)
	assert.Equal(t, unknownWords, r.Memory[6].Dialect)
	assert.Contains(t, r.Memory[7].Backend, "qdrant")
	for _, m := range r.Memory {
		assert.Positive(t, m.OnP50, m.Backend)
		assert.Positive(t, m.RawMB, m.Backend)
	}
	assert.Positive(t, r.EmbedP50MS)
	assert.Positive(t, r.Resources.IdleRSSMB)
	require.Len(t, r.Quality.Locomo, 1, "the tiny LoCoMo file")
	require.Len(t, r.Write.Rows, 3)
	assert.Positive(t, r.Write.Rows[0].TurnsPerSec)
	assert.Positive(t, r.Write.SearchableProbes)
	require.Len(t, r.Cache.Vera, 9)
	assert.Equal(t, 1.0, minShare(r.Cache.Direct), "a client's own history repeats itself")
	assert.Contains(t, string(r.Quality.Routing), `"accuracy"`)
}

// logWriter sends the harness's progress to the test log.
type logWriter struct{ t *testing.T }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func TestQuickAndLargeExcludeEachOther(t *testing.T) {
	err := run(context.Background(), []string{"--quick", "--large"}, io.Discard, io.Discard)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "choose one")
}

// The seeded turns carry the token counts vera would store: the
// tokenizer's own, though the harness adds them up by word.
func TestSeededTokenCounts(t *testing.T) {
	tok, err := text.NewTokenizer()
	require.NoError(t, err)
	n := 0
	_, err = generate(300, func(ms []memory.Memory) error {
		for _, m := range ms {
			require.Equal(t, tok.Count(m.Text), m.Tokens, m.Text)
			n++
		}
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, 300, n)
}
