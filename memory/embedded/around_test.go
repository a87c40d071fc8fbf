package embedded

import (
	"context"
	"fmt"
	"slices"
	"strings"
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

// In an index written in time order: the neighbour half an hour away
// lends, one more than that does not; a removed turn between two is
// passed over; of two turns at the same time the one written first is
// before; a curated memory ranked neither takes nor lends; and a turn
// that only neighbours a ranked one takes in its other neighbour's score
// too, though that one ranks too low to be in the lexical ranking.
func TestAroundInTimeOrder(t *testing.T) {
	ctx := context.Background()
	db, err := Open(ctx, t.TempDir())
	require.NoError(t, err)
	defer db.Close()
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	at := time.Duration(0)
	add := func(id string, typ memory.Type, text string, after time.Duration) {
		at += after
		require.NoError(t, db.Upsert(ctx, memory.Memory{ID: id, Namespace: "a", Type: typ, Text: text, Time: t0.Add(at)}))
	}
	filler := "User: " + strings.Repeat("words about nothing much ", 12) + "\nAssistant: ok"
	// Strong and middling matches, hours apart, fill the lexical ranking
	// of a search of limit 1 (its depth is 11).
	for i := range 4 {
		add(fmt.Sprintf("strong%d", i), memory.Raw, "User: kayak kayak kayak\nAssistant: kayak", 5*time.Hour)
	}
	for i := range 8 {
		add(fmt.Sprintf("middling%d", i), memory.Raw, "User: a kayak, "+strings.Repeat("words about nothing ", 3)+"\nAssistant: ok", 5*time.Hour)
	}
	add("weak", memory.Raw, filler+" kayak", 5*time.Hour) // ranks below all twelve
	add("between", memory.Raw, "User: hm\nAssistant: hm", 30*time.Minute)
	add("gone", memory.Raw, "User: x\nAssistant: y", time.Minute)
	add("strongest", memory.Raw, "User: kayak kayak kayak kayak\nAssistant: kayak kayak", time.Minute)
	add("same time", memory.Raw, "User: nothing\nAssistant: nothing", 0)
	add("far", memory.Raw, "User: nothing\nAssistant: nothing", 31*time.Minute)
	add("note", memory.Curated, "User: kayak kayak kayak kayak\nAssistant: kayak kayak", time.Minute)
	add("after note", memory.Raw, "User: nothing\nAssistant: nothing", time.Minute)
	require.NoError(t, db.Delete(ctx, "gone"))
	db.mu.RLock()
	require.False(t, db.ns["a"].unordered, "written in time order")
	db.mu.RUnlock()

	// The lexical side itself, by memory id: a search would cut it to
	// its limit.
	ids := map[int32]string{}
	rows, err := db.db.QueryContext(ctx, `SELECT id, seq FROM memories`)
	require.NoError(t, err)
	db.mu.RLock()
	ix := db.ns["a"]
	for rows.Next() {
		var id string
		var seq int64
		require.NoError(t, rows.Scan(&id, &seq))
		if s, ok := ix.bySeq[seq]; ok {
			ids[s] = id
		}
	}
	db.mu.RUnlock()
	require.NoError(t, rows.Close())
	lexical := func(around float64, limit int) map[string]float64 {
		q := memory.Query{Filter: memory.Filter{Namespace: "a"}, Text: "kayak", Limit: limit, Around: around}
		db.mu.RLock()
		defer db.mu.RUnlock()
		out := map[string]float64{}
		for _, h := range ix.lexicalSide(&q, nil) {
			out[ids[h.slot]] = h.score
		}
		return out
	}
	own := lexical(0, 100)
	require.Contains(t, own, "weak")
	require.NotContains(t, lexical(0, 1), "weak", "the weak match is past the lexical ranking of limit 1")
	got := lexical(1, 1)
	// "between" neighbours "weak" (30 minutes before) and "strongest"
	// (past the removed turn), in that order.
	require.Contains(t, got, "between")
	assert.Equal(t, 0+own["weak"]+own["strongest"], got["between"])
	// "strongest" lends to "between" and to "same time" (written after
	// it at the same time), and takes in nothing (neither holds the word).
	assert.Equal(t, own["strongest"], got["strongest"])
	assert.Equal(t, own["strongest"], got["same time"])
	assert.NotContains(t, got, "far", "31 minutes after its neighbour")
	assert.Equal(t, own["note"], got["note"], "a curated memory takes in nothing")
	assert.NotContains(t, got, "after note", "nor lends")
}
