package memory_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/memory"
	"github.com/vera-proxy/vera/text"
)

var update = flag.Bool("update", false, "rewrite golden files")

var day = time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)

// seed stores turns (user, assistant) an hour apart, embedded with the hash
// embedder, and returns their memories in order.
func seed(t *testing.T, s memory.Store, ns string, pairs ...string) []memory.Memory {
	t.Helper()
	tok, err := text.NewTokenizer()
	require.NoError(t, err)
	var ms []memory.Memory
	for i := 0; i < len(pairs); i += 2 {
		content := memory.FormatExchange(pairs[i], pairs[i+1])
		v, _ := text.HashEmbedder{}.Embed(context.Background(), []string{content})
		ms = append(ms, memory.Memory{
			ID: memory.NewID(), Namespace: ns, Type: memory.Raw, Text: content,
			Time: day.Add(time.Duration(len(ms)) * time.Hour), Vector: v[0], Tokens: tok.Count(content),
		})
	}
	require.NoError(t, s.Upsert(context.Background(), ms...))
	return ms
}

func newBuilder(t *testing.T) (*memory.Builder, memory.Store, *text.Tokenizer) {
	t.Helper()
	db := openDB(t, t.TempDir())
	t.Cleanup(func() { db.Close() })
	tok, err := text.NewTokenizer()
	require.NoError(t, err)
	return memory.NewBuilder(db, text.HashEmbedder{}, tok), db, tok
}

func msgs(roleContent ...string) []memory.Message {
	var out []memory.Message
	for i := 0; i < len(roleContent); i += 2 {
		out = append(out, memory.Message{Role: roleContent[i], Content: roleContent[i+1]})
	}
	return out
}

func texts(hs []memory.Hit) []string {
	var out []string
	for _, h := range hs {
		out = append(out, h.Text)
	}
	return out
}

// paired asserts the recent layer alternates user then assistant.
func paired(t *testing.T, rec []memory.Message) {
	t.Helper()
	require.Equal(t, 0, len(rec)%2, "odd number of recent messages")
	for i, m := range rec {
		want := "user"
		if i%2 == 1 {
			want = "assistant"
		}
		assert.Equal(t, want, m.Role, "recent[%d]", i)
	}
}

func TestBuilderSystemLayer(t *testing.T) {
	b, _, _ := newBuilder(t)
	b.SystemPrompt = func() string { return "Always answer in French." }
	c := b.Recall(context.Background(), memory.Request{Namespace: "a", Messages: msgs(
		"system", "You are terse.", "system", "Use metric units.", "user", "hi", "system", "late instruction", "assistant", "hello", "user", "bye",
	)})
	require.NoError(t, c.Err)
	assert.Equal(t, "You are terse.\n\nUse metric units.\n\nAlways answer in French.", c.System)
	assert.Equal(t, 2, c.SystemReplaces, "only the leading system messages are merged; a later one stays where it is")

	c = b.Recall(context.Background(), memory.Request{Namespace: "a", NoMemory: true, Messages: msgs("user", "hi")})
	assert.Equal(t, "Always answer in French.", c.System, "memory off keeps the system layer")
	assert.Equal(t, 0, c.SystemReplaces)
}

func TestBuilderSemanticLayer(t *testing.T) {
	b, s, _ := newBuilder(t)
	seed(t, s, "alice",
		"My sister Ana lives in Lisbon.", "Lisbon is a beautiful city.",
		"I'm training for a marathon in April.", "Good luck with the training!",
		"What's a good pasta recipe?", "Try cacio e pepe.",
	)
	seed(t, s, "bob", "My sister lives in Oslo.", "Oslo is cold.")
	c := b.Recall(context.Background(), memory.Request{Namespace: "alice", Messages: msgs("user", "Where does my sister live?")})
	require.NoError(t, c.Err)
	require.NotEmpty(t, c.Semantic)
	assert.Contains(t, c.Semantic[0].Text, "Lisbon", "best first")
	for _, h := range c.Semantic {
		assert.Equal(t, "alice", h.Namespace)
		assert.NotContains(t, h.Text, "Oslo")
	}
	assert.Contains(t, c.System, "[2026-11-01]\nUser: My sister Ana lives in Lisbon.\nAssistant: Lisbon is a beautiful city.")
	assert.NotContains(t, c.System, "Oslo")
	assert.False(t, c.LexicalOnly)
}

func TestBuilderSemanticQueryUsesPrecedingMessages(t *testing.T) {
	b, s, _ := newBuilder(t)
	b.RecentBudget = 1 // recent layer out of the way
	b.RecentTurns = 1
	seed(t, s, "a",
		"My dog Rex is a beagle.", "Beagles are great.",
		"I like tea.", "Tea is nice.",
	)
	// "How old is he?" alone matches nothing; with the message before it
	// the query finds the dog.
	c := b.Recall(context.Background(), memory.Request{Namespace: "a", Messages: msgs(
		"user", "Tell me about beagle puppies", "assistant", "They are energetic.", "user", "How old is he?")})
	require.NotEmpty(t, c.Semantic)
	assert.Contains(t, c.Semantic[0].Text, "Rex")
}

func TestBuilderSemanticBudget(t *testing.T) {
	b, s, tok := newBuilder(t)
	var pairs []string
	for i := range 30 {
		pairs = append(pairs, fmt.Sprintf("Fact %d about the garden: tomatoes need sun %s", i, strings.Repeat("and water ", i%5)), "Noted about the garden.")
	}
	seed(t, s, "a", pairs...)
	for _, budget := range []int{100, 300, 1000} {
		b.SemanticBudget, b.RecentBudget = budget, 1
		c := b.Recall(context.Background(), memory.Request{Namespace: "a", Messages: msgs("user", "what do tomatoes in the garden need?")})
		require.NotEmpty(t, c.Semantic, "budget %d", budget)
		assert.LessOrEqual(t, c.SemanticTokens, budget)
		// The stated count matches the text actually injected.
		assert.InDelta(t, tok.Count(c.System), c.SemanticTokens, float64(c.SemanticTokens)/10+5, "budget %d", budget)
	}
}

func TestBuilderRecentLayerKeepsNewestInOrder(t *testing.T) {
	b, s, _ := newBuilder(t)
	b.SemanticBudget = 1 // semantic layer out of the way
	var pairs []string
	for i := range 12 {
		pairs = append(pairs, fmt.Sprintf("message number %d %s", i, strings.Repeat("filler ", 20)), fmt.Sprintf("reply %d", i))
	}
	seed(t, s, "a", pairs...)
	b.RecentBudget = 200
	c := b.Recall(context.Background(), memory.Request{Namespace: "a", Messages: msgs("user", "unrelated question")})
	require.NoError(t, c.Err)
	paired(t, c.Recent)
	require.GreaterOrEqual(t, len(c.Recent), 4)
	assert.Less(t, len(c.Recent), 24, "the budget must cut")
	assert.LessOrEqual(t, c.RecentTokens, 200)
	// Newest kept, in time order, ending with the very latest turn.
	n := len(c.Recent) / 2
	for i := range n {
		assert.Equal(t, fmt.Sprintf("reply %d", 12-n+i), c.Recent[2*i+1].Content)
	}

	b.RecentBudget = 100000
	b.RecentTurns = 3
	c = b.Recall(context.Background(), memory.Request{Namespace: "a", Messages: msgs("user", "unrelated question")})
	require.Len(t, c.Recent, 6, "recent_turns caps the layer")
	assert.Equal(t, "reply 11", c.Recent[5].Content)
}

func TestBuilderDedup(t *testing.T) {
	b, s, _ := newBuilder(t)
	ms := seed(t, s, "a",
		"My cat is called Miso.", "Miso is a sweet name.",
		"I painted the fence blue.", "Blue fences look great.",
		"What time is it in Tokyo?", "It is 9pm there.",
	)
	// The request's own history holds the Tokyo exchange (with different
	// spacing and case); the cat question pulls the Miso turn into the
	// semantic layer.
	c := b.Recall(context.Background(), memory.Request{Namespace: "a", Messages: msgs(
		"user", "what time  is it in tokyo?", "assistant", "It is 9pm   there.", "user", "What is my cat called?")})
	require.NoError(t, c.Err)
	require.NotEmpty(t, c.Semantic)
	assert.Equal(t, ms[0].ID, c.Semantic[0].ID)
	for _, id := range c.RecentIDs {
		assert.NotEqual(t, ms[0].ID, id, "already in the semantic layer")
		assert.NotEqual(t, ms[2].ID, id, "already in the request's history")
	}
	// The turn after the Miso one comes as its context (semantic), or as
	// a recent turn: once either way.
	n := 0
	for _, h := range c.Semantic {
		assert.NotEqual(t, ms[2].ID, h.ID, "already in the request's history")
		if h.ID == ms[1].ID {
			n++
		}
	}
	for _, id := range c.RecentIDs {
		if id == ms[1].ID {
			n++
		}
	}
	assert.Equal(t, 1, n)
	paired(t, c.Recent)
}

func TestBuilderFitsTheContextWindow(t *testing.T) {
	b, s, tok := newBuilder(t)
	b.SemanticBudget, b.RecentBudget = 25000, 22000 // Vera-AI's own defaults
	var pairs []string
	for i := range 200 {
		pairs = append(pairs, fmt.Sprintf("garden note %d: %s", i, strings.Repeat("roses tomatoes basil ", 15)), "ok, noted about the garden")
	}
	seed(t, s, "a", pairs...)
	long := strings.Repeat("Here is a long document about the garden. ", 150)
	for _, tc := range []struct {
		name           string
		window, answer int
		history        string
		expectNoMemory bool
	}{
		{"default window", 0, 0, "short", false},
		{"num_ctx 2048", 2048, 0, "short", false},
		{"long history in 8192", 8192, 512, long, false},
		{"history alone fills the window", 2048, 0, long, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := memory.Request{Namespace: "a", ContextLength: tc.window, AnswerTokens: tc.answer,
				Messages: msgs("system", "Be brief.", "user", tc.history+" what about the roses in the garden?")}
			c := b.Recall(context.Background(), req)
			require.NoError(t, c.Err)
			if tc.expectNoMemory {
				assert.Zero(t, c.Tokens())
				assert.Equal(t, "Be brief.", c.System)
				return
			}
			require.Positive(t, c.Tokens())
			window := tc.window
			if window == 0 {
				window = memory.DefaultContextLength
			}
			answer := tc.answer
			if answer == 0 {
				answer = min(1024, window/4)
			}
			total := tok.Count(c.System)
			for _, m := range c.Recent {
				total += tok.Count(m.Content) + 4
			}
			total += tok.Count(req.Messages[1].Content) + 8
			assert.LessOrEqual(t, total, window-answer, "the prompt plus room for the answer must fit")
		})
	}
}

func TestBuilderDegradesWithoutEmbedderOrStore(t *testing.T) {
	_, s, tok := newBuilder(t)
	seed(t, s, "a", "My sister Ana lives in Lisbon.", "Lovely.")
	down := &flakyEmbedder{}
	down.down.Store(true)
	b := memory.NewBuilder(s, down, tok)
	c := b.Recall(context.Background(), memory.Request{Namespace: "a", Messages: msgs("user", "Where does Ana live?")})
	require.NoError(t, c.Err)
	assert.True(t, c.LexicalOnly)
	require.NotEmpty(t, c.Semantic)
	assert.Contains(t, c.Semantic[0].Text, "Lisbon")

	b = memory.NewBuilder(brokenStore{s}, nil, tok)
	b.SystemPrompt = func() string { return "sys" }
	c = b.Recall(context.Background(), memory.Request{Namespace: "a", Messages: msgs("user", "Where does Ana live?")})
	require.Error(t, c.Err)
	assert.Equal(t, "sys", c.System, "the system layer survives a store failure")
	assert.Zero(t, c.Tokens())
}

type brokenStore struct{ memory.Store }

func (brokenStore) Search(context.Context, memory.Query) ([]memory.Hit, error) {
	return nil, errors.New("disk on fire")
}

func (brokenStore) Latest(context.Context, memory.Filter, int) ([]memory.Memory, error) {
	return nil, errors.New("disk on fire")
}

// TestBuilderGolden pins the rendered layers of one realistic chat.
func TestBuilderGolden(t *testing.T) {
	b, s, _ := newBuilder(t)
	b.SystemPrompt = func() string { return "You are vera's test assistant." }
	seed(t, s, "alice",
		"My sister Ana lives in Lisbon.", "Lisbon is a beautiful city.",
		"I'm training for a marathon in April.", "Good luck with the training!",
		"Remind me to water the plants.", "I can't set reminders, but water them tonight!",
	)
	c := b.Recall(context.Background(), memory.Request{Namespace: "alice", Messages: msgs(
		"system", "Be kind.", "user", "Should I visit my sister this spring?")})
	require.NoError(t, c.Err)
	var out strings.Builder
	fmt.Fprintf(&out, "### system (replaces %d)\n%s\n", c.SystemReplaces, c.System)
	for _, m := range c.Recent {
		fmt.Fprintf(&out, "### %s\n%s\n", m.Role, m.Content)
	}
	fmt.Fprintf(&out, "### stats\nsemantic=%d recent=%d tokens=%d\n", len(c.Semantic), len(c.RecentIDs), c.Tokens())
	golden := filepath.Join("testdata", "context.golden")
	if *update {
		require.NoError(t, os.WriteFile(golden, []byte(out.String()), 0o644))
	}
	want, err := os.ReadFile(golden)
	require.NoError(t, err)
	assert.Equal(t, string(want), out.String())
}

// The turns just before and after one of the best hits come with it, as
// its context, when they are part of the same exchange (minutes apart):
// here the answer to a question lies in the turn after the one that
// matches. One date header serves a day's memories.
func TestBuilderContextAroundAHit(t *testing.T) {
	db := openDB(t, t.TempDir())
	t.Cleanup(func() { db.Close() })
	tok, err := text.NewTokenizer()
	require.NoError(t, err)
	b := memory.NewBuilder(db, nil, tok)
	at := func(m time.Duration, user, assistant string) memory.Memory {
		text := memory.FormatExchange(user, assistant)
		return memory.Memory{ID: memory.NewID(), Namespace: "a", Type: memory.Raw, Text: text, Time: day.Add(m), Tokens: tok.Count(text)}
	}
	question := at(0, "My son had an accident on the bike yesterday.", "Oh no! How is he?")
	answer := at(2*time.Minute, "He has a broken arm, but he is brave.", "Glad it is not worse.")
	later := at(3*time.Hour, "We watched a film tonight.", "Nice.")
	require.NoError(t, db.Upsert(context.Background(), question, answer, later))

	mc := b.Recall(context.Background(), memory.Request{Namespace: "a", SemanticOnly: true, Messages: msgs("user", "What happened in the accident?")})
	require.NoError(t, mc.Err)
	var ids []string
	for _, h := range mc.Semantic {
		ids = append(ids, h.ID)
	}
	assert.Equal(t, []string{question.ID, answer.ID}, ids, "the matching turn and the one after it, in time order; not a turn hours away")
	assert.Equal(t, 1, strings.Count(mc.System, "["+day.Format(time.DateOnly)+"]"), "one header for the day")
	assert.Contains(t, mc.System, "broken arm")
}

// aheadStore records when a search's lexical side was started.
type aheadStore struct {
	memory.Store
	started, finished bool
	vector            []float32
}

func (s *aheadStore) SearchAhead(ctx context.Context, q memory.Query) func([]float32) ([]memory.Hit, error) {
	s.started = true
	return func(v []float32) ([]memory.Hit, error) {
		s.finished, s.vector = true, v
		q.Vector = v
		return s.Store.Search(ctx, q)
	}
}

// orderEmbedder checks that the lexical side was started before it
// embeds the question.
type orderEmbedder struct {
	store       *aheadStore
	startedSeen bool
}

func (e *orderEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	e.startedSeen = e.store.started
	return text.HashEmbedder{}.Embed(ctx, texts)
}

// With a store that can, the lexical side starts before the question is
// embedded, and the search finishes with the question's vector.
func TestRecallStartsTheLexicalSideBeforeEmbedding(t *testing.T) {
	db := openDB(t, t.TempDir())
	t.Cleanup(func() { db.Close() })
	seed(t, db, "u", "Where did we park the blue van?", "On the third floor of the garage.")
	tok, err := text.NewTokenizer()
	require.NoError(t, err)
	st := &aheadStore{Store: db}
	emb := &orderEmbedder{store: st}
	b := memory.NewBuilder(st, emb, tok)
	c := b.Recall(context.Background(), memory.Request{Namespace: "u", Messages: msgs("user", "where is the blue van parked?")})
	require.NoError(t, c.Err)
	assert.True(t, emb.startedSeen, "the lexical side was started before the embedding")
	assert.True(t, st.finished)
	assert.NotEmpty(t, st.vector, "finished with the question's vector")
	assert.Contains(t, strings.Join(texts(c.Semantic), "\n"), "third floor")
}

// SystemTokens, the builder's count of the system message it made from
// its parts' own figures, stays within a few tokens of counting the
// message whole: compaction decides on it instead of counting the
// memories again.
func TestBuilderSystemTokens(t *testing.T) {
	b, s, tok := newBuilder(t)
	b.SystemPrompt = func() string { return "Answer in the user's language.\nKeep it short." }
	var pairs []string
	for i := range 40 {
		pairs = append(pairs, fmt.Sprintf("Tell me about trip %d to Lisbon, the café on rua %d and the 3.5€ pastéis.", i, i*7),
			fmt.Sprintf("Trip %d: you said the café had 12 tables, Привет! and `code %d`.\n\nSecond paragraph.", i, i))
	}
	seed(t, s, "alice", pairs...)
	require.NoError(t, s.Upsert(context.Background(),
		memory.Memory{ID: memory.NewID(), Namespace: "alice", Type: memory.Rule, Text: "Prefers metric units.", Time: day},
		memory.Memory{ID: memory.NewID(), Namespace: "alice", Type: memory.Rule, Text: "- Dislikes emoji!", Time: day},
		memory.Memory{ID: memory.NewID(), Namespace: "alice", Type: memory.Profile, Text: "Alice, a teacher in Porto; travels often.", Time: day},
	))
	cases := map[string]memory.Request{
		"caller's system": {Namespace: "alice", Messages: msgs("system", "You are a travel agent.\n\n", "user", "What about the café in Lisbon on my trip?")},
		"Modelfile's":     {Namespace: "alice", ModelSystem: "You are Mario from Super Mario Bros.", Messages: msgs("user", "Which trip to Lisbon had the café?")},
		"no memory":       {Namespace: "alice", NoMemory: true, Messages: msgs("system", "Be brief.", "user", "trip?")},
	}
	for name, req := range cases {
		c := b.Recall(context.Background(), req)
		require.NoError(t, c.Err, name)
		require.NotEmpty(t, c.System, name)
		whole := tok.Count(c.System)
		assert.GreaterOrEqual(t, c.SystemTokens, whole, name)
		assert.LessOrEqual(t, c.SystemTokens, whole+whole/20+8, name)
		if name != "no memory" {
			assert.NotEmpty(t, c.Semantic, name)
			assert.NotEmpty(t, c.RuleIDs, name)
		}
	}
	b.SystemPrompt = nil
	c := b.Recall(context.Background(), memory.Request{Namespace: "nobody", Messages: msgs("user", "hi")})
	assert.Empty(t, c.System)
	assert.Zero(t, c.SystemTokens)
}

// queryStore records the queries searched.
type queryStore struct {
	memory.Store
	got *[]memory.Query
}

func (s queryStore) Search(ctx context.Context, q memory.Query) ([]memory.Hit, error) {
	*s.got = append(*s.got, q)
	return s.Store.Search(ctx, q)
}

// The semantic layer's search asks for the neighbours' share: 0.3 by
// default, none below 0, else Builder.Around.
func TestBuilderAround(t *testing.T) {
	_, s, tok := newBuilder(t)
	for around, want := range map[float64]float64{0: 0.3, -1: 0, 0.7: 0.7} {
		var got []memory.Query
		b := memory.NewBuilder(queryStore{s, &got}, nil, tok)
		b.Around = around
		c := b.Recall(context.Background(), memory.Request{Namespace: "a", Messages: msgs("user", "Where does Ana live?")})
		require.NoError(t, c.Err)
		require.NotEmpty(t, got)
		assert.Equal(t, want, got[0].Around, "Builder.Around %v", around)
	}
}

// plainStore is a store seen only through memory.Store: the builder looks
// a hit's context up itself.
type plainStore struct{ memory.Store }

// The embedded store gives a hit's context with the search (Contextual):
// the same turns as the builder's own lookups, on turns at every kind of
// gap (within a microsecond, at the window's edges, beyond it), with
// curated memories between them and turns deleted.
func TestContextualStoreGivesTheBuildersContext(t *testing.T) {
	db := openDB(t, t.TempDir())
	t.Cleanup(func() { db.Close() })
	tok, err := text.NewTokenizer()
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(7, 29))
	words := strings.Fields("bike arm film garden river piano dog letter train storm bread lamp")
	gaps := []time.Duration{500, time.Microsecond, time.Second, 90 * time.Second, 10 * time.Minute,
		memory.ExchangeWindow - 1, memory.ExchangeWindow, memory.ExchangeWindow + 1, 2 * time.Hour}
	var ms []memory.Memory
	at := day
	for i := range 300 {
		at = at.Add(gaps[rng.IntN(len(gaps))])
		typ := memory.Raw
		if rng.IntN(6) == 0 {
			typ = memory.Curated
		}
		u := fmt.Sprintf("turn %d: %s and %s?", i, words[rng.IntN(len(words))], words[rng.IntN(len(words))])
		content := memory.FormatExchange(u, "About the "+words[rng.IntN(len(words))]+".")
		v, _ := text.HashEmbedder{}.Embed(context.Background(), []string{content})
		ms = append(ms, memory.Memory{ID: memory.NewID(), Namespace: "a", Type: typ, Text: content, Time: at, Tokens: tok.Count(content), Vector: v[0]})
	}
	require.NoError(t, db.Upsert(context.Background(), ms...))
	for _, m := range ms {
		if rng.IntN(8) == 0 {
			require.NoError(t, db.Delete(context.Background(), m.ID))
		}
	}
	budgets := []int{500, 1500, 4000}
	seen := 0
	// Lexical only, and hybrid: the fusion's equal scores are ordered by
	// time, as the builder orders them.
	for _, emb := range []memory.Embedder{nil, text.HashEmbedder{}} {
		for _, w := range words {
			for _, budget := range budgets {
				req := memory.Request{Namespace: "a", SemanticOnly: true, Messages: msgs("user", "what about the "+w+"?")}
				b, plain := memory.NewBuilder(db, emb, tok), memory.NewBuilder(plainStore{db}, emb, tok)
				b.SemanticBudget, plain.SemanticBudget = budget, budget
				got, want := b.Recall(context.Background(), req), plain.Recall(context.Background(), req)
				require.NoError(t, got.Err)
				require.NoError(t, want.Err)
				assert.Equal(t, want.System, got.System, "%q at %d tokens, embedder %v", w, budget, emb)
				assert.Equal(t, want.IDs(), got.IDs(), "%q at %d tokens, embedder %v", w, budget, emb)
				seen += len(got.Semantic)
			}
		}
	}
	assert.Greater(t, seen, 200, "the questions recalled turns")
	// Every hit's context, asked of the store directly, in BestFirst's
	// order.
	ctx := context.Background()
	var ties int
	for _, w := range words {
		// The two sides disagree: a memory one ranks r-th alone scores
		// as one the other ranks r-th alone.
		v, _ := text.HashEmbedder{}.Embed(ctx, []string{"a lamp by the river"})
		q := memory.Query{Filter: memory.Filter{Namespace: "a", Types: []memory.Type{memory.Raw, memory.Curated}},
			Text: w, Vector: v[0], Limit: 60, Context: 60}
		hits, err := db.Search(ctx, q)
		require.NoError(t, err)
		assert.True(t, slices.IsSortedFunc(hits, memory.BestFirst), "%q: hits in the builder's order", w)
		for i, h := range hits {
			if i > 0 && hits[i-1].Score == h.Score {
				ties++
			}
			var want []memory.Memory
			if h.Type == memory.Raw {
				f := memory.Filter{Namespace: "a", Types: []memory.Type{memory.Raw}}
				f.Since, f.Until = h.Time.Add(-memory.ExchangeWindow), h.Time
				prev, err := db.Latest(ctx, f, 1)
				require.NoError(t, err)
				f.Since, f.Until = h.Time.Add(time.Microsecond), h.Time.Add(memory.ExchangeWindow)
				next, err := db.Earliest(ctx, f, 1)
				require.NoError(t, err)
				want = append(append(want, prev...), next...)
			}
			assert.Equal(t, want, h.Context, "%q: hit %d's context", w, i)
		}
	}
	assert.Greater(t, ties, 10, "equal fused scores, ordered by time")
}
