package memory

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/vera-proxy/vera/text"
)

// Command is what a user's message asks of memory at once: to
// remember a statement, or to forget what matches it.
type Command int

const (
	// NoCommand: the message asks nothing of memory.
	NoCommand Command = iota
	// Remember stores the statement as a curated memory now.
	Remember
	// Forget hides the memories that hold every content term of the
	// statement.
	Forget
)

// Commands carries out memory commands on a store. Phrases are read at
// each message, so an edit of the prompts file applies at once.
type Commands struct {
	Store Store
	// Queue and Skip reach the turns not yet in the store: the durable
	// queue they wait in, and the writer's Forget, which keeps it from
	// storing them after all. Nil: only the store is searched.
	Queue  Queue
	Skip   func(ids ...string)
	Embed  Embedder // nil: stored without a vector (the backfill adds it)
	Tokens *text.Tokenizer
	// Phrases returns the command phrases, "remember: PHRASE" and
	// "forget: PHRASE" lines (prompts.Dir.Commands).
	Phrases func() string
	Now     func() time.Time
	// MaxTokens caps a remembered statement as a turn is capped
	// (memory.max_turn_tokens); 0: DefaultMaxTurnTokens. A longer one
	// keeps its head and tail around a "[…]" marker.
	MaxTokens int
	// History records what the commands change; nil: nothing is.
	History *History
	// Withheld withholds what the curator wrote from what Forget hides;
	// nil: nothing is.
	Withheld *Withheld
}

func (c *Commands) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

// Parse tells whether the user's own text begins with a command phrase,
// and returns the statement that follows it. A phrase counts only at the
// very start, whole, and followed by a statement.
func (c *Commands) Parse(text string) (Command, string) {
	if c == nil || c.Phrases == nil {
		return NoCommand, ""
	}
	text = strings.TrimSpace(text)
	lower := strings.ToLower(text)
	best, kind := 0, NoCommand
	for _, line := range strings.Split(c.Phrases(), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, phrase, ok := strings.Cut(line, ":")
		phrase = strings.ToLower(strings.TrimSpace(phrase))
		if !ok || phrase == "" || !strings.HasPrefix(lower, phrase) || len(phrase) <= best {
			continue
		}
		if rest := lower[len(phrase):]; rest != "" && !strings.HasSuffix(phrase, ":") {
			// A whole phrase: "forget that" is not "forget thatcher".
			if r, _ := utf8.DecodeRuneInString(rest); unicode.IsLetter(r) || unicode.IsDigit(r) {
				continue
			}
		}
		switch strings.ToLower(strings.TrimSpace(name)) {
		case "remember":
			best, kind = len(phrase), Remember
		case "forget":
			best, kind = len(phrase), Forget
		}
	}
	if kind == NoCommand {
		return NoCommand, ""
	}
	// The phrase matched lower-cased; lower-casing keeps byte lengths for
	// the scripts phrases are written in, so the statement is cut from the
	// original text.
	statement := text[min(best, len(text)):]
	statement = strings.TrimFunc(statement, func(r rune) bool { return unicode.IsSpace(r) || r == ':' || r == ',' || r == '-' || r == '—' })
	first, _ := utf8.DecodeRuneInString(statement)
	switch {
	case statement == "",
		strings.ContainsRune(".!?…", first), // "Forget that. What's the weather?"
		strings.HasSuffix(statement, "?"):   // "Remember that film we saw?"
		return NoCommand, ""
	}
	return kind, statement
}

// Remember stores statement as a curated memory of ns now, unless the
// namespace holds it already; it returns the memory's id. A statement
// over MaxTokens is kept as its head and tail, so a megabyte costs what
// the cap allows.
func (c *Commands) Remember(ctx context.Context, ns, statement string, src Source) (string, error) {
	statement, tokens, _ := CapText(c.Tokens, statement, c.MaxTokens)
	if r, size := utf8.DecodeRuneInString(statement); size > 0 {
		statement = string(unicode.ToUpper(r)) + statement[size:]
	}
	key := normalize(statement)
	hits, err := c.Store.Search(ctx, Query{Filter: Filter{Namespace: ns, Types: []Type{Curated}}, Text: statement, Limit: 20})
	if err != nil {
		return "", fmt.Errorf("remember: %w", err)
	}
	for _, h := range hits {
		if normalize(h.Text) == key {
			return h.ID, nil // asked again (a regenerate): once
		}
	}
	m := Memory{ID: NewID(), Namespace: ns, Type: Curated, Text: statement, Time: c.now().UTC(),
		Metadata: WithSource(nil, src), Tokens: tokens}
	Classify(&m)
	if c.Embed != nil {
		if v, err := c.Embed.Embed(ctx, []string{m.Text}); err == nil && len(v) == 1 {
			m.Vector = v[0]
		}
	}
	if err := c.Store.Upsert(ctx, m); err != nil {
		return "", fmt.Errorf("remember: %w", err)
	}
	c.History.Record(ctx, ViaCommand, Created, m)
	return m.ID, nil
}

// Forget hides the memories of ns (raw turns, curated memories, rules)
// that hold every content term of statement (Terms: stemmed, stop words
// left out): a soft delete, restorable. A statement of fewer than two
// content terms ("forget about work") hides nothing, and one that matches
// more than maxForget memories is taken for too broad (ErrTooBroad): a
// request to forget names a fact, not a topic. It returns the ids it hid,
// with an error too when what the curator wrote from them could not be
// withheld.
func (c *Commands) Forget(ctx context.Context, ns, statement string) ([]string, error) {
	want := text.Terms(statement)
	if len(want) < 2 {
		return nil, nil
	}
	if len(want) > maxForgetTerms {
		return nil, fmt.Errorf("%w: %d words name no single fact", ErrTooBroad, len(want))
	}
	strong, queued, err := c.holdingAll(ctx, ns, statement, want)
	if err != nil {
		return nil, err
	}
	if n := len(strong) + len(queued); n > maxForget {
		return nil, fmt.Errorf("%w: %d memories hold every word of %q", ErrTooBroad, n, statement)
	}
	queuedIDs := make([]string, len(queued))
	for i, m := range queued {
		queuedIDs[i] = m.ID
	}
	if len(queued) > 0 && c.Skip != nil {
		c.Skip(queuedIDs...) // the writer will not store them now
	}
	hidden, was, err := c.hide(ctx, queued, strong)
	if err != nil || len(hidden) == 0 {
		return nil, err
	}
	if err := c.Store.Upsert(ctx, hidden...); err != nil {
		return nil, fmt.Errorf("forget: %w", err)
	}
	if len(queuedIDs) > 0 {
		// Stored, hidden: the queue need not hold them any more.
		if err := c.Queue.Done(ctx, queuedIDs...); err != nil {
			return nil, fmt.Errorf("forget: the queue: %w", err)
		}
	}
	c.History.Record(ctx, ViaChat, Created, queued...) // stored now, hidden
	c.History.Record(ctx, ViaCommand, Hidden, hidden...)
	ids := make([]string, len(hidden))
	for i, m := range hidden {
		ids[i] = m.ID
	}
	if _, err := c.Withheld.Removed(ctx, was...); err != nil {
		return ids, fmt.Errorf("forget: hidden, but %w", err) // hidden all the same
	}
	return ids, nil
}

// holdingAll finds the memories of ns that hold every term of want: those
// stored (strong), and the turns told moments ago that still wait in the
// queue (their embedding under way), which are hidden too, or they would
// arrive after the forget.
func (c *Commands) holdingAll(ctx context.Context, ns, statement string, want []string) (strong []Hit, queued []Memory, err error) {
	hits, err := c.Store.Search(ctx, Query{Filter: Filter{Namespace: ns, Types: []Type{Raw, Curated, Rule}}, Text: statement, Limit: 500})
	if err != nil {
		return nil, nil, fmt.Errorf("forget: %w", err)
	}
	for _, h := range hits {
		if holdsAll(h.Text, want) {
			strong = append(strong, h)
		}
	}
	if c.Queue == nil {
		return strong, nil, nil
	}
	pending, err := c.Queue.Pending(ctx, 1<<16)
	if err != nil {
		return nil, nil, fmt.Errorf("forget: the queue: %w", err)
	}
	for _, m := range pending {
		if m.Namespace == ns && holdsAll(m.Text, want) {
			queued = append(queued, m)
		}
	}
	return strong, queued, nil
}

// hide returns the queued turns and the stored memories of strong
// hidden, and, in was, each as it was (current). A stored memory is read
// whole, vector included; one gone meanwhile is passed over.
func (c *Commands) hide(ctx context.Context, queued []Memory, strong []Hit) (hidden, was []Memory, err error) {
	seen := map[string]bool{}
	for _, m := range queued {
		was = append(was, m)
		m.Hide(c.now())
		if m.Tokens == 0 && c.Tokens != nil {
			// The writer counts a short turn only as it stores it.
			m.Tokens = c.Tokens.Count(m.Text)
		}
		hidden, seen[m.ID] = append(hidden, m), true
	}
	for _, h := range strong {
		if seen[h.ID] {
			continue
		}
		m, err := c.Store.Get(ctx, h.ID)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, nil, fmt.Errorf("forget: %w", err)
		}
		was = append(was, m)
		m.Hide(c.now())
		hidden = append(hidden, m)
	}
	return hidden, was, nil
}

// SameTerms reports whether two texts hold the same content terms (Terms:
// stemmed, stop words left out), no more and no fewer: one says what the
// other says, in other order or form. Texts without content terms are not
// the same.
func SameTerms(a, b string) bool {
	a, b = unlabelled(a), unlabelled(b)
	ta, tb := map[string]bool{}, map[string]bool{}
	for _, t := range text.Terms(a) {
		ta[t] = true
	}
	for _, t := range text.Terms(b) {
		tb[t] = true
	}
	return len(ta) > 0 && maps.Equal(ta, tb) && negations(a) == negations(b)
}

// unlabelled is an exchange's two texts without their "User:" and
// "Assistant:" labels (a statement stays as it is), so that a remembered
// statement and the same fact as an exchange compare alike.
func unlabelled(text string) string {
	if u, a, ok := ParseExchange(text); ok {
		return u + "\n" + a
	}
	return text
}

// negations counts the words of text that negate ("not", "never", "n't",
// "не", "нет", ...): stop words to search, but a fact without one is not
// the fact with one.
func negations(text string) int {
	n := 0
	for _, w := range strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && r != '\'' && r != '’'
	}) {
		switch {
		case negationWords[strings.Trim(w, "'’")], strings.HasSuffix(w, "n't"), strings.HasSuffix(w, "n’t"):
			n++
		}
	}
	return n
}

var negationWords = map[string]bool{"not": true, "no": true, "never": true, "none": true, "nothing": true, "nobody": true,
	"nor": true, "cannot": true, "не": true, "нет": true, "никогда": true, "ничего": true, "ни": true}

// maxForget is the most memories one request to forget hides.
const maxForget = 20

// maxForgetTerms is the most content terms a request to forget may hold:
// a fact is a sentence, and every memory searched is checked against
// each term.
const maxForgetTerms = 64

// ErrTooBroad: a request to forget matched too many memories to be about
// one fact; nothing was hidden.
var ErrTooBroad = errors.New("forget: too broad, nothing hidden")

// holdsAll reports whether every term of want is among text's terms.
func holdsAll(content string, want []string) bool {
	have := map[string]bool{}
	for _, t := range text.Terms(content) {
		have[t] = true
	}
	for _, t := range want {
		if !have[t] {
			return false
		}
	}
	return true
}
