package memory_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/memory"
)

func rule(ns, text string, at time.Time) memory.Memory {
	return memory.Memory{ID: memory.NewID(), Namespace: ns, Type: memory.Rule, Text: text, Time: at}
}

func TestBuilderRulesBelongToTheirNamespace(t *testing.T) {
	ctx := context.Background()
	b, s, _ := newBuilder(t)
	b.SystemPrompt = func() string { return "Be brief.\n- Answer in French" }
	older, newer := rule("alice", "Call the user Al.", day), rule("alice", "Use metric units", day.Add(time.Hour))
	require.NoError(t, s.Upsert(ctx, older, newer,
		rule("alice", "use metric units!", day.Add(-time.Hour)),   // the same rule, normalised
		rule("alice", "answer in french.", day.Add(-2*time.Hour)), // already in systemprompt.md
		rule("bob", "Bob's rule", day)))

	c := b.Recall(ctx, memory.Request{Namespace: "alice", Messages: msgs("user", "hello")})
	require.NoError(t, c.Err)
	assert.Equal(t, []string{newer.ID, older.ID}, c.RuleIDs, "newest first, each once")
	assert.Contains(t, c.System, "Be brief.\n- Answer in French\n\nRules learned from earlier conversations with this user:\n- Use metric units\n- Call the user Al.")
	assert.NotContains(t, c.System, "Bob")
	assert.Greater(t, c.RulesTokens, 0)
	assert.Equal(t, c.RuleIDs, c.IDs()[:2], "rules come first in injection order")
	assert.Empty(t, c.Semantic, "a rule is never a semantic memory")

	c = b.Recall(ctx, memory.Request{Namespace: "bob", Messages: msgs("user", "hello"), NoMemory: true})
	assert.Contains(t, c.System, "- Bob's rule", "rules are part of the system layer, which applies with memory off")
	assert.NotContains(t, c.System, "metric")

	b.RulesBudget = 20
	c = b.Recall(ctx, memory.Request{Namespace: "alice", Messages: msgs("user", "hello")})
	assert.Equal(t, []string{newer.ID}, c.RuleIDs, "within rules_token_budget")
}

func TestBuilderCarriesTheModelfileSystem(t *testing.T) {
	b, s, _ := newBuilder(t)
	seed(t, s, "a", "my cat is called Miso", "noted")
	const persona = "You are Mario, a plumber from Brooklyn."
	c := b.Recall(context.Background(), memory.Request{Namespace: "a", ModelSystem: persona, Messages: msgs("user", "what is my cat called?")})
	require.NotEmpty(t, c.Semantic)
	assert.True(t, strings.HasPrefix(c.System, persona+"\n\n"), "the persona leads the system message vera adds: %q", c.System)
	assert.Zero(t, c.SystemReplaces)

	c = b.Recall(context.Background(), memory.Request{Namespace: "a", ModelSystem: persona, Messages: msgs("system", "You are terse.", "user", "what is my cat called?")})
	assert.NotContains(t, c.System, "Mario", "a caller's system message replaces the Modelfile's, as in Ollama")

	c = b.Recall(context.Background(), memory.Request{Namespace: "empty", ModelSystem: persona, Messages: msgs("user", "hi")})
	assert.Empty(t, c.System, "nothing to add: Ollama applies the persona itself")
}

func TestBuilderInjectsIdenticalMemoriesOnce(t *testing.T) {
	b, s, _ := newBuilder(t)
	var pairs []string
	for range 40 {
		pairs = append(pairs, "what is the wifi password?", "It is hunter2.")
	}
	pairs = append(pairs, "what is the WiFi   password?", "it is hunter2.")
	seed(t, s, "a", pairs...)
	c := b.Recall(context.Background(), memory.Request{Namespace: "a", Messages: msgs("user", "remind me of the wifi password")})
	require.NoError(t, c.Err)
	assert.Equal(t, 1, len(c.Semantic)+len(c.RecentIDs), "one exchange, once: semantic=%d recent=%d", len(c.Semantic), len(c.RecentIDs))
	assert.Len(t, c.IDs(), 1)
}

func TestBuilderWorkIsBoundedByTheWindowNotTheMessage(t *testing.T) {
	b, s, _ := newBuilder(t)
	seed(t, s, "a", "my cat is called Miso", "noted")
	huge := strings.Repeat("x", 10<<20) // one 10 MB word: the worst case for BPE
	start := time.Now()
	c := b.Recall(context.Background(), memory.Request{Namespace: "a", ContextLength: 8192, Messages: msgs("user", huge)})
	t.Logf("build with a 10 MB message: %s", time.Since(start))
	assert.Zero(t, c.SemanticBudget+c.RecentBudget, "no room left in the window")
	assert.Empty(t, c.Semantic)
}

// Sources, which tells a conversation when to rebuild its plan, changes
// with anything the system layer is made of, blank system messages (which
// the plan replaces) included, and with nothing else.
func TestBuilderSources(t *testing.T) {
	b, s, _ := newBuilder(t)
	seed(t, s, "a", "my cat is called Miso", "noted")
	src := func(ms ...string) string {
		return b.Recall(context.Background(), memory.Request{Namespace: "a", Messages: msgs(ms...)}).Sources
	}
	base := src("user", "hi")
	assert.Equal(t, base, src("user", "what is my cat called?", "assistant", "Miso.", "user", "and my dog?"), "the conversation itself is not a source")
	assert.NotEqual(t, base, src("system", "", "user", "hi"), "a blank system message the plan replaces")
	assert.NotEqual(t, base, src("system", "Be terse.", "user", "hi"))
	later := b.Recall(context.Background(), memory.Request{Namespace: "a", Later: true, Messages: msgs("user", "hi")}).Sources
	assert.Equal(t, base, later, "a later turn's recall reports the same sources")
	require.NoError(t, s.Upsert(context.Background(), memory.Memory{ID: memory.NewID(), Namespace: "a", Type: memory.Rule, Text: "Answer in French.", Time: time.Now()}))
	assert.NotEqual(t, base, src("user", "hi"), "a new rule")
}

func TestBuilderProfileOpensTheNamespacesPart(t *testing.T) {
	ctx := context.Background()
	b, s, _ := newBuilder(t)
	b.SystemPrompt = func() string { return "Be brief." }
	old := memory.Memory{ID: memory.NewID(), Namespace: "alice", Type: memory.Profile, Text: "Alice is a nurse.", Time: day}
	cur := memory.Memory{ID: memory.NewID(), Namespace: "alice", Type: memory.Profile, Text: "Alice is a nurse in Lyon who is learning Go.", Time: day.Add(time.Hour)}
	bob := memory.Memory{ID: memory.NewID(), Namespace: "bob", Type: memory.Profile, Text: "Bob fixes bikes.", Time: day}
	require.NoError(t, s.Upsert(ctx, old, cur, bob, rule("alice", "Use metric units", day)))

	c := b.Recall(ctx, memory.Request{Namespace: "alice", Messages: msgs("user", "what is a nurse paid in Lyon?")})
	require.NoError(t, c.Err)
	assert.Contains(t, c.System, "Be brief.\n\nAbout this user (from earlier conversations):\nAlice is a nurse in Lyon who is learning Go.\n\nRules learned from earlier conversations with this user:\n- Use metric units",
		"the newest profile, after the operator's prompt, before the rules")
	assert.NotContains(t, c.System, "Alice is a nurse.\n", "one profile: the current one")
	assert.NotContains(t, c.System, "Bob", "profiles never cross namespaces")
	assert.Equal(t, cur.ID, c.IDs()[0], "the profile comes first in injection order")
	assert.Greater(t, c.ProfileTokens, 0)
	assert.Equal(t, c.SemanticTokens+c.RecentTokens+c.RulesTokens+c.ProfileTokens, c.Tokens())
	for _, h := range c.Semantic {
		assert.NotEqual(t, memory.Profile, h.Type, "a profile is never a semantic memory")
	}

	c = b.Recall(ctx, memory.Request{Namespace: "bob", Messages: msgs("user", "hello"), NoMemory: true})
	assert.Contains(t, c.System, "Bob fixes bikes.", "part of the system layer, which applies with memory off")

	b.ProfileBudget = 3
	c = b.Recall(ctx, memory.Request{Namespace: "alice", Messages: msgs("user", "hello")})
	assert.NotContains(t, c.System, "learning Go", "cut to profile_token_budget")
	assert.Contains(t, c.System, "Alice")
}
