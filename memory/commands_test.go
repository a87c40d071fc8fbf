package memory_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/memory"
	"github.com/vera-proxy/vera/memory/embedded"
	"github.com/vera-proxy/vera/prompts"
	"github.com/vera-proxy/vera/text"
)

func TestCommandParse(t *testing.T) {
	c := &memory.Commands{Phrases: func() string { return prompts.Default(prompts.MemoryCommands) + "\nremember: note to self:" }}
	for text, want := range map[string]struct {
		kind      memory.Command
		statement string
	}{
		"Remember that my bike is blue.":         {memory.Remember, "my bike is blue."},
		"remember: Ana's birthday is 3 May":      {memory.Remember, "Ana's birthday is 3 May"},
		"Please remember that I'm vegetarian":    {memory.Remember, "I'm vegetarian"},
		"Запомни, что я живу в Лиссабоне":        {memory.Remember, "я живу в Лиссабоне"},
		"Forget that my locker code is 4417":     {memory.Forget, "my locker code is 4417"},
		"забудь про мой старый адрес":            {memory.Forget, "мой старый адрес"},
		"Note to self: buy milk":                 {memory.Remember, "buy milk"},
		"Don't forget that my exam is on Friday": {},
		"Не забудь, что у меня экзамен":          {},
		"I said: forget that my code is 4417":    {},
		"Forget thatcher, tell me about Blair":   {},
		"Remember that":                          {},
		"What do you remember that I said?":      {},
		"Forget that. What's the weather?":       {},
		"Remember that movie we saw in Paris?":   {},
	} {
		kind, statement := c.Parse(text)
		assert.Equal(t, want.kind, kind, text)
		assert.Equal(t, want.statement, statement, text)
	}
	kind, _ := (*memory.Commands)(nil).Parse("remember that x")
	assert.Equal(t, memory.NoCommand, kind, "no commands configured")
}

// Forget hides strong matches only (every content word), restorably;
// Remember stores the statement once.
func TestCommandRememberAndForget(t *testing.T) {
	ctx := context.Background()
	db, err := embedded.Open(ctx, t.TempDir())
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	c := &memory.Commands{Store: db, Now: func() time.Time { return now }}
	code := memory.Memory{ID: memory.NewID(), Namespace: "a", Type: memory.Curated, Text: "Alice's locker code is 4417.", Time: now}
	gym := memory.Memory{ID: memory.NewID(), Namespace: "a", Type: memory.Curated, Text: "Alice's locker is in the gym.", Time: now}
	other := memory.Memory{ID: memory.NewID(), Namespace: "b", Type: memory.Curated, Text: "Bob's locker code is 4417.", Time: now}
	require.NoError(t, db.Upsert(ctx, code, gym, other))

	ids, err := c.Forget(ctx, "a", "my locker code is 4417")
	require.NoError(t, err)
	assert.Equal(t, []string{code.ID}, ids, "the gym memory lacks 'code' and '4417': a weak match is kept")
	got, err := db.Get(ctx, code.ID)
	require.NoError(t, err)
	assert.Equal(t, memory.Forgotten, got.Type)
	got, err = db.Get(ctx, other.ID)
	require.NoError(t, err)
	assert.Equal(t, memory.Curated, got.Type, "another namespace is untouched")
	ids, err = c.Forget(ctx, "a", "that")
	require.NoError(t, err)
	assert.Empty(t, ids, "no content word, nothing hidden")
	ids, err = c.Forget(ctx, "a", "the gym")
	require.NoError(t, err)
	assert.Empty(t, ids, "one content word names a topic, not a fact: nothing hidden")

	// A request that matches more than a fact's worth hides nothing.
	var many []memory.Memory
	for range 25 {
		many = append(many, memory.Memory{ID: memory.NewID(), Namespace: "a", Type: memory.Raw, Text: "User: work meeting today\nAssistant: ok", Time: now})
	}
	require.NoError(t, db.Upsert(ctx, many...))
	ids, err = c.Forget(ctx, "a", "work meeting")
	assert.ErrorIs(t, err, memory.ErrTooBroad)
	assert.Empty(t, ids)
	got, err = db.Get(ctx, many[0].ID)
	require.NoError(t, err)
	assert.Equal(t, memory.Raw, got.Type)

	id, err := c.Remember(ctx, "a", "my bike is blue", memory.Source{Via: memory.ViaCommand})
	require.NoError(t, err)
	m, err := db.Get(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, "My bike is blue", m.Text)
	assert.Equal(t, memory.Curated, m.Type)
	again, err := c.Remember(ctx, "a", "My bike is blue", memory.Source{Via: memory.ViaCommand})
	require.NoError(t, err)
	assert.Equal(t, id, again, "asked twice, stored once")
}

func TestSameTerms(t *testing.T) {
	assert.True(t, memory.SameTerms("User: Where do I live?\nAssistant: In Lisbon.", "User: where do I live\nAssistant: in Lisbon"))
	assert.False(t, memory.SameTerms("User: Do I eat meat?\nAssistant: You eat meat.", "User: Do I eat meat?\nAssistant: You do not eat meat."), "a negation changes the fact")
	assert.False(t, memory.SameTerms("You eat meat.", "You don't eat meat."))
	assert.False(t, memory.SameTerms("Ты ешь мясо.", "Ты не ешь мясо."))
	assert.False(t, memory.SameTerms("In Lisbon.", "In Lisbon and Porto."))
	assert.False(t, memory.SameTerms("the", "a"), "no content words: not the same")
	assert.True(t, memory.SameTerms("My bike is blue.", "User: my bike?\nAssistant: Blue bike."), "labels aside")
}

// A turn told moments ago may still wait in the durable queue: a forget
// hides it too, and the writer is told not to store it.
func TestForgetReachesTheQueue(t *testing.T) {
	ctx := context.Background()
	db, err := embedded.Open(ctx, t.TempDir())
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	var skipped []string
	tok, err := text.NewTokenizer()
	require.NoError(t, err)
	c := &memory.Commands{Store: db, Queue: db, Tokens: tok, Skip: func(ids ...string) { skipped = append(skipped, ids...) }, Now: func() time.Time { return now }}
	// Queued as the writer queues a short turn: not counted yet.
	turn := memory.Memory{ID: memory.NewID(), Namespace: "a", Type: memory.Raw, Text: "User: Remember that my locker code is 9999.\nAssistant: Noted.", Time: now}
	other := memory.Memory{ID: memory.NewID(), Namespace: "b", Type: memory.Raw, Text: "User: my locker code is 9999\nAssistant: ok", Time: now}
	require.NoError(t, db.Enqueue(ctx, turn, other))

	ids, err := c.Forget(ctx, "a", "my locker code is 9999")
	require.NoError(t, err)
	assert.Equal(t, []string{turn.ID}, ids)
	assert.Equal(t, []string{turn.ID}, skipped)
	got, err := db.Get(ctx, turn.ID)
	require.NoError(t, err)
	assert.Equal(t, memory.Forgotten, got.Type, "stored hidden, restorable")
	assert.Equal(t, tok.Count(turn.Text), got.Tokens, "counted as it is stored")
	pending, err := db.Pending(ctx, 10)
	require.NoError(t, err)
	require.Len(t, pending, 1)
	assert.Equal(t, other.ID, pending[0].ID, "another namespace's turn waits on")
}
