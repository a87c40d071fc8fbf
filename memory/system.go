package memory

import (
	"context"
	"fmt"
	"strings"
	"unicode"

	"github.com/vera-proxy/vera/text"
)

// The system layer: the caller's system text, systemprompt.md, the
// namespace's profile and its rules.

// system gathers the system layer's parts: the caller's leading
// system messages, systemprompt.md, the namespace's rules. The Modelfile's
// SYSTEM is added by render, and only when vera adds a system message.
func (b *Builder) system(ctx context.Context, req Request, c *Context) []string {
	var sys []string
	for _, m := range req.Messages {
		if m.Role != "system" {
			break
		}
		c.SystemReplaces++
		if s := strings.TrimSpace(m.Content); s != "" {
			sys = append(sys, m.Content)
		}
	}
	if b.SystemPrompt != nil {
		if p := strings.TrimSpace(b.SystemPrompt()); p != "" {
			sys = append(sys, p)
		}
	}
	c.ownParts = len(sys)
	if profile := b.profile(ctx, req, c); profile != "" {
		sys = append(sys, profile)
	}
	if c.Err != nil {
		return sys
	}
	if rules := b.rules(ctx, req, sys, c); rules != "" {
		sys = append(sys, rules)
	}
	return sys
}

// CurrentProfile returns a namespace's current profile: the newest that no
// later one replaced (a past version, kept, is marked superseded_by); nil
// when it has none. A deleted current profile leaves none, not the one
// before it.
func CurrentProfile(ctx context.Context, store Store, ns string) (*Memory, error) {
	latest, err := store.Latest(ctx, Filter{Namespace: ns, Types: []Type{Profile}}, 1)
	if err != nil || len(latest) == 0 {
		return nil, err
	}
	if latest[0].Metadata["superseded_by"] != nil {
		return nil, nil
	}
	return &latest[0], nil
}

// profileIntro heads the namespace's profile in the system layer.
const profileIntro = "About this user (from earlier conversations):"

// profile returns the namespace's current profile (its newest) as a block
// of the system layer, cut to the profile budget.
func (b *Builder) profile(ctx context.Context, req Request, c *Context) string {
	if b.store == nil || c.Err != nil {
		return ""
	}
	budget := b.ProfileBudget
	if budget <= 0 {
		budget = 200
	}
	latest, err := CurrentProfile(ctx, b.store, req.Namespace)
	if err != nil {
		c.Err = fmt.Errorf("profile: %w", err)
		return ""
	}
	if latest == nil || strings.TrimSpace(latest.Text) == "" || b.Withheld.Is(latest.ID) || keptBack(req, *latest, c) {
		return ""
	}
	body, _ := frame(strings.TrimSpace(latest.Text))
	if b.tokens != nil {
		body = b.tokens.Head(body, budget)
	} else if len(body) > 4*budget {
		body = text.ValidPrefix(body[:4*budget])
	}
	c.ProfileID = latest.ID
	c.ProfileTokens = b.fixed(profileIntro) + 1 + b.count(body)
	return profileIntro + "\n" + body
}

// rulesIntro heads the namespace's rules in the system layer.
const rulesIntro = "Rules learned from earlier conversations with this user:"

// rules returns the namespace's curator rules as a block of the system
// layer: newest first, each once, none already in the system text, within
// the rules budget.
func (b *Builder) rules(ctx context.Context, req Request, system []string, c *Context) string {
	if b.store == nil {
		return ""
	}
	budget := b.RulesBudget
	if budget <= 0 {
		budget = 500
	}
	rules, err := b.store.Latest(ctx, Filter{Namespace: req.Namespace, Types: []Type{Rule}}, 200)
	if err != nil {
		c.Err = fmt.Errorf("rules: %w", err)
		return ""
	}
	if len(rules) == 0 {
		return ""
	}
	seen := map[string]bool{}
	for _, s := range system {
		for _, line := range strings.Split(s, "\n") {
			seen[normalizeRule(line)] = true
		}
	}
	left := budget - b.fixed(rulesIntro) - 1
	var lines []string
	for _, r := range rules {
		key := normalizeRule(r.Text)
		if key == "" || seen[key] || b.Withheld.Is(r.ID) || keptBack(req, r, c) {
			continue
		}
		line, _ := frame("- " + strings.Join(strings.Fields(strings.TrimLeft(r.Text, "-*• \t")), " "))
		n := b.countAtMost(line, left) + 1
		if n > left {
			continue
		}
		seen[key] = true
		left -= n
		c.RulesTokens += n
		c.RuleIDs = append(c.RuleIDs, r.ID)
		lines = append(lines, line)
	}
	if len(lines) == 0 {
		return ""
	}
	c.RulesTokens += b.fixed(rulesIntro) + 1
	return rulesIntro + "\n" + strings.Join(lines, "\n")
}

// normalizeRule makes rules comparable: case, spacing, a list marker and
// final punctuation do not make a rule new (as the curator compares them).
func normalizeRule(s string) string {
	s = strings.TrimLeft(strings.TrimSpace(s), "-*• \t")
	s = strings.ToLower(strings.Join(strings.Fields(s), " "))
	return strings.TrimRightFunc(s, func(r rune) bool { return unicode.IsPunct(r) || unicode.IsSpace(r) })
}
