package curator

import (
	"context"
	"strings"
	"time"
	"unicode"

	"github.com/vera-proxy/vera/memory"
)

// normalize makes rules comparable: case, spacing, list markers and final
// punctuation do not make a rule new.
func normalize(s string) string {
	s = strings.TrimSpace(s)
	s = strings.TrimLeft(s, "-*• \t")
	s = strings.ToLower(strings.Join(strings.Fields(s), " "))
	return strings.TrimRightFunc(s, func(r rune) bool { return unicode.IsPunct(r) || unicode.IsSpace(r) })
}

// ruleSet holds a namespace's rules, normalised: those it has, read from
// the store when first needed, and those planned since, so that a rule is
// never stored twice there.
type ruleSet struct {
	keys map[string]bool // nil until read
}

// readRules fills s with the rules namespace ns has, once.
func (c *Curator) readRules(ctx context.Context, ns string, s *ruleSet) error {
	if s.keys != nil {
		return nil
	}
	rules, err := c.scrollAll(ctx, memory.Filter{Namespace: ns, Types: []memory.Type{memory.Rule}})
	if err != nil {
		return err
	}
	s.keys = make(map[string]bool, len(rules))
	for _, m := range rules {
		s.keys[normalize(m.Text)] = true
	}
	return nil
}

// newRules turns an answer's rules into rule memories of namespace ns,
// leaving out those ns already has (known, read on first need, which it
// updates) and those that normalise to nothing. A rule's target_file is
// ignored: a rule belongs to the namespace whose turns taught it, never to
// a prompt file.
func (c *Curator) newRules(ctx context.Context, ns string, rules []Rule, known *ruleSet, at time.Time, src memory.Source) ([]memory.Memory, error) {
	if len(rules) == 0 {
		return nil, nil
	}
	if err := c.readRules(ctx, ns, known); err != nil {
		return nil, err
	}
	var out []memory.Memory
	for _, r := range rules {
		// Cut before it is compared: the rules ns has are stored cut.
		text, n, _ := memory.CapText(c.Tokens, strings.Join(strings.Fields(r.Rule), " "), c.MaxTokens)
		key := normalize(text)
		if key == "" || known.keys[key] {
			continue
		}
		known.keys[key] = true
		m := memory.Memory{
			ID: memory.NewID(), Namespace: ns, Type: memory.Rule, Text: text,
			Time: at.UTC(), Model: c.ModelName,
			Metadata: memory.WithSource(nil, src),
		}
		if r.Private {
			m.Metadata = memory.MarkPrivate(m.Metadata, true, memory.ByCurator)
		}
		memory.Classify(&m)
		if c.Tokens != nil {
			m.Tokens = n
		}
		out = append(out, m)
	}
	return out, nil
}
