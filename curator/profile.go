package curator

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/vera-proxy/vera/memory"
)

// A namespace's profile is a short portrait of its user, which the
// curator keeps up to date from the turns it reads: the newest memory of
// type profile is the current one, and each one it replaces stays as a
// past version (marked superseded_by the one after it).

// WrittenByUser is the metadata key (value "user") of a profile the user
// wrote or corrected by hand: the curator is told, and keeps it unless the
// turns it reads contradict it.
const WrittenByUser = "written_by"

// currentProfile returns the namespace's current profile, or nil.
func (c *Curator) currentProfile(ctx context.Context, ns string) (*memory.Memory, error) {
	m, err := memory.CurrentProfile(ctx, c.Store, ns)
	if err != nil {
		return nil, fmt.Errorf("reading the profile: %w", err)
	}
	return m, nil
}

// shownProfile is the current profile as the prompt shows it; nil for
// none.
func shownProfile(m *memory.Memory) *promptProfile {
	if m == nil {
		return nil
	}
	return &promptProfile{Text: m.Text, WrittenByUser: m.Metadata[WrittenByUser] == "user"}
}

// profileFrom is the profile memory an answer's profile text becomes, cut
// to ProfileTokens (and MaxTokens, should that be less) around a "[…]"
// marker; nil when the answer keeps the current one.
func (c *Curator) profileFrom(ns, text string, private bool, runAt time.Time, src memory.Source) *memory.Memory {
	text = strings.Join(strings.Fields(text), " ")
	if text == "" {
		return nil
	}
	budget := c.ProfileTokens
	if budget <= 0 {
		budget = 200
	}
	limit := c.MaxTokens
	if limit <= 0 {
		limit = memory.DefaultMaxTurnTokens
	}
	text, n, _ := memory.CapText(c.Tokens, text, min(budget, limit))
	m := &memory.Memory{
		ID: memory.NewID(), Namespace: ns, Type: memory.Profile, Text: text,
		Time: runAt.UTC(), Model: c.ModelName,
		Metadata: map[string]any{"curated_at": runAt.UTC().Format(time.RFC3339), memory.MetaSource: src.Meta()},
	}
	if private {
		m.Metadata = memory.MarkPrivate(m.Metadata, true, memory.ByCurator)
	}
	memory.Classify(m)
	if c.Tokens != nil {
		m.Tokens = n
	}
	return m
}

// newProfile puts a new profile in the plan, replacing current; one that
// says what current says changes nothing.
func (p *plan) newProfile(m, current *memory.Memory) {
	if m == nil || current != nil && m.Text == current.Text {
		return
	}
	if current != nil && !m.Time.After(current.Time) {
		// It must be the newest to be the current one: a profile written
		// by hand after the run's window began is newer than runAt.
		m.Time = current.Time.Add(time.Millisecond)
	}
	p.profile = m
	if current != nil {
		p.pastProfile = current
	}
}

// writeProfile stores the plan's new profile, then marks the one it
// replaces as its past version.
func (c *Curator) writeProfile(ctx context.Context, p plan) error {
	if p.profile == nil {
		return nil
	}
	now, err := c.currentProfile(ctx, p.profile.Namespace)
	if err != nil {
		return err
	}
	if !sameProfile(now, p.pastProfile) {
		// Written or corrected by hand while the run went on: the
		// person's profile stays, and the next run reads it.
		c.log().Info("curator: the profile changed during the run; it is kept", "namespace", p.profile.Namespace)
		return nil
	}
	if err := c.Store.Upsert(ctx, *p.profile); err != nil {
		return fmt.Errorf("writing the profile: %w", err)
	}
	c.History.Record(ctx, memory.ViaCurator, memory.Created, *p.profile)
	if p.pastProfile == nil {
		return nil
	}
	past := *p.pastProfile
	md := make(map[string]any, len(past.Metadata)+2)
	for k, v := range past.Metadata {
		md[k] = v
	}
	md["superseded_by"], md["superseded_at"] = p.profile.ID, c.now().UTC().Format(time.RFC3339)
	past.Metadata = md
	if err := c.Store.Upsert(ctx, past); err != nil {
		return fmt.Errorf("keeping the past profile: %w", err)
	}
	c.History.Record(ctx, memory.ViaCurator, memory.Superseded, past)
	return nil
}

// sameProfile reports whether a and b are the same profile with the same
// text (both nil included).
func sameProfile(a, b *memory.Memory) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.ID == b.ID && a.Text == b.Text
}
