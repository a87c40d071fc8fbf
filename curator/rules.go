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

// knownRules returns the normalised rules a namespace already has, so that
// a rule is never stored twice there.
func (c *Curator) knownRules(ctx context.Context, ns string) (map[string]bool, error) {
	rules, err := c.scrollAll(ctx, memory.Filter{Namespace: ns, Types: []memory.Type{memory.Rule}})
	if err != nil {
		return nil, err
	}
	known := make(map[string]bool, len(rules))
	for _, m := range rules {
		known[normalize(m.Text)] = true
	}
	return known, nil
}

// newRules turns an answer's rules into rule memories of namespace ns,
// leaving out those ns already has (known, which it updates) and those
// that normalise to nothing. A rule's target_file is ignored: a rule
// belongs to the namespace whose turns taught it, never to a prompt file
// (SPEC §5).
func (c *Curator) newRules(ns string, rules []Rule, known map[string]bool, at time.Time) []memory.Memory {
	var out []memory.Memory
	for _, r := range rules {
		text := strings.Join(strings.Fields(r.Rule), " ")
		key := normalize(text)
		if key == "" || known[key] {
			continue
		}
		known[key] = true
		m := memory.Memory{
			ID: memory.NewID(), Namespace: ns, Type: memory.Rule, Text: text,
			Time: at.UTC(), Model: c.ModelName,
			Metadata: map[string]any{"source": "curator"},
		}
		if c.Tokens != nil {
			m.Tokens = c.Tokens.Count(m.Text)
		}
		out = append(out, m)
	}
	return out
}
