package embedded

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/memory"
)

// With Query.Around, a raw turn takes in a share of the lexical scores of
// the raw turns just before and after it within half an hour, whatever
// order they were written in; not a turn further away, not a memory of
// another type, not a neighbour the filter leaves out.
func TestAroundTakesInNeighbours(t *testing.T) {
	ctx := context.Background()
	db, err := Open(ctx, t.TempDir())
	require.NoError(t, err)
	defer db.Close()
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	mem := func(id string, typ memory.Type, text string, at time.Duration) memory.Memory {
		return memory.Memory{ID: id, Namespace: "a", Type: typ, Text: text, Time: t0.Add(at)}
	}
	// The answer is written before the question: the neighbours go by
	// time, not by the order of writing.
	require.NoError(t, db.Upsert(ctx,
		mem("answer", memory.Raw, "User: and then?\nAssistant: we rode along the coast", 2*time.Minute),
		mem("question", memory.Raw, "User: where did the tandem go?\nAssistant: tell me more", time.Minute),
		mem("later", memory.Raw, "User: nothing here\nAssistant: nothing", 3*time.Hour),
		mem("note", memory.Curated, "User: the weather\nAssistant: fine", 90*time.Second),
		mem("other", memory.Raw, "User: a tandem is a bicycle\nAssistant: for two", 5*time.Hour),
	))
	search := func(around float64, f memory.Filter) map[string]float64 {
		f.Namespace = "a"
		hits, err := db.Search(ctx, memory.Query{Filter: f, Text: "tandem", Limit: 10, Around: around})
		require.NoError(t, err)
		out := map[string]float64{}
		for _, h := range hits {
			out[h.ID] = h.Lexical
		}
		return out
	}
	alone := search(0, memory.Filter{})
	require.Equal(t, []string{"other", "question"}, keys(alone), "without Around only the turns holding the word")
	got := search(0.5, memory.Filter{})
	require.Equal(t, []string{"answer", "other", "question"}, keys(got))
	assert.InDelta(t, 0.5*alone["question"], got["answer"], 1e-12, "the answer takes in half its question's score")
	assert.InDelta(t, alone["question"], got["question"], 1e-12, "the answer's own score is 0")
	assert.InDelta(t, alone["other"], got["other"], 1e-12, "no neighbour within half an hour")
	// The question out of the filter's time: it lends nothing.
	got = search(0.5, memory.Filter{Since: t0.Add(90 * time.Second)})
	assert.Equal(t, []string{"other"}, keys(got))
	// Curated memories neither lend nor take.
	got = search(0.5, memory.Filter{Types: []memory.Type{memory.Curated}})
	assert.Empty(t, got)
}

// keys returns m's keys, sorted.
func keys(m map[string]float64) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
