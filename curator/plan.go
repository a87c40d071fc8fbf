package curator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/vera-proxy/vera/memory"
)

// plan is everything one step of a run would change, decided before
// anything is written. A dry run previews it; a real run executes it. Since
// both take the same plan, a preview shows exactly what a run then does.
type plan struct {
	// ns is the namespace it changes.
	ns string
	// leftover are raw turns that a stored curated memory already names
	// as its source: an interrupted run wrote their successor and did not
	// get to delete them.
	leftover []string
	// expired are forgotten memories past ForgottenFor.
	expired []string
	// curated are the memories to write, each naming its source ids.
	curated []memory.Memory
	// rawGone are the batch's raw turns to delete: those distilled and
	// those the model dropped, in batch order so reports are stable.
	rawGone []string
	// curatedGone are the curated memories the answer replaces.
	curatedGone []string
	// rules are the answer's rules that the namespace does not have yet.
	rules []memory.Memory
	// batch are the ids of the raw turns the answer was given, and shown
	// those of the curated memories it was shown.
	batch, shown []string
	// superseded are the older curated memories the new ones supersede.
	superseded []supersession
	// profile is the namespace's new profile, replacing pastProfile
	// (nil: none); nil when the answer keeps the current one.
	profile, pastProfile *memory.Memory
}

// saw records, on every memory p writes, what its run was shown (the
// curated sample and the profile): what is written from a memory removed
// later is withheld by that (memory.DerivedFrom).
func (p *plan) saw(sample []memory.Memory, profile *memory.Memory) {
	seen := make([]any, 0, len(sample)+1)
	for _, m := range sample {
		seen = append(seen, m.ID)
	}
	if profile != nil {
		seen = append(seen, profile.ID)
	}
	for _, ms := range [][]memory.Memory{p.curated, p.rules} {
		for i := range ms {
			ms[i].Metadata[memory.MetaSeen] = seen
		}
	}
	if p.profile != nil {
		p.profile.Metadata[memory.MetaSeen] = seen
	}
}

// supersession: the curated memory old is superseded by the new one by.
type supersession struct{ old, by string }

// Key normalises a subject key: case, spacing and punctuation aside,
// "Home city" and "home-city" are one key.
func Key(s string) string {
	return strings.Join(strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	}), " ")
}

// supersede decides which curated memories of the namespace the new ones
// supersede: the one each names in "supersedes", and every current one
// with its key. Only the newest memory per key stays current;
// the older ones are kept, as the past.
func (p *plan) supersede(curated []memory.Memory) {
	gone := map[string]bool{}
	for i, n := range p.curated {
		key, _ := n.Metadata["key"].(string)
		names, _ := n.Metadata["supersedes"].(string)
		// The namespace's memories, then this answer's earlier ones: of
		// two new memories with one key, the later is current.
		for _, m := range slices.Concat(curated, p.curated[:i]) {
			if !current(m) || gone[m.ID] || slices.Contains(p.curatedGone, m.ID) || m.Time.After(n.Time) {
				continue // only an older, current memory is superseded
			}
			mk, _ := m.Metadata["key"].(string)
			if m.ID == names || key != "" && Key(mk) == key {
				gone[m.ID] = true
				p.superseded = append(p.superseded, supersession{old: m.ID, by: n.ID})
			}
		}
	}
}

// applied returns curated as it stands once p is carried out: without
// what p replaces, with what it supersedes marked, and with what it
// writes.
func (p *plan) applied(curated []memory.Memory) []memory.Memory {
	by := map[string]string{}
	for _, sp := range p.superseded {
		by[sp.old] = sp.by
	}
	out := make([]memory.Memory, 0, len(curated)+len(p.curated))
	for _, m := range curated {
		if slices.Contains(p.curatedGone, m.ID) {
			continue
		}
		if b, ok := by[m.ID]; ok {
			md := maps.Clone(m.Metadata)
			if md == nil {
				md = map[string]any{}
			}
			md["superseded_by"] = b
			m.Metadata = md
		}
		out = append(out, m)
	}
	for _, m := range p.curated {
		if b, ok := by[m.ID]; ok {
			md := maps.Clone(m.Metadata)
			md["superseded_by"] = b
			m.Metadata = md
		}
		out = append(out, m)
	}
	return out
}

// current reports whether a curated memory is current: not superseded.
func current(m memory.Memory) bool { return m.Metadata["superseded_by"] == nil }

// dropRepeats leaves out the new curated memories that repeat a current
// curated memory of the namespace, or an earlier new one: the same content
// words, no more and no fewer (a change of fact, even "not", differs). A
// fact told ten times is one memory, and an answer that quoted an injected
// memory does not make it a second time. Their raw turns still go: they
// are accounted for. A memory that names one it supersedes is never a
// repeat.
func (p *plan) dropRepeats(curated []memory.Memory) {
	var kept []memory.Memory
	for _, n := range p.curated {
		repeat := false
		for _, m := range slices.Concat(curated, kept) {
			if n.Metadata["supersedes"] == nil && m.Type == memory.Curated && current(m) &&
				!slices.Contains(p.curatedGone, m.ID) && memory.SameTerms(n.Text, m.Text) {
				repeat = true
				break
			}
		}
		if !repeat {
			kept = append(kept, n)
		}
	}
	p.curated = kept
}

// planLeftovers splits raws into the turns an interrupted run already
// curated, planned for deletion, and those still to curate.
func planLeftovers(curated, raws []memory.Memory) (plan, []memory.Memory) {
	succeeded := map[string]bool{}
	for _, m := range curated {
		for _, id := range sources(m) {
			succeeded[id] = true
		}
	}
	var p plan
	if len(raws) > 0 {
		p.ns = raws[0].Namespace
	}
	todo := raws[:0:0]
	for _, m := range raws {
		if succeeded[m.ID] {
			p.leftover = append(p.leftover, m.ID)
		} else {
			todo = append(todo, m)
		}
	}
	return p, todo
}

// plan decides what answer a does to namespace ns: the batch it answers,
// the curated memories it writes (dated runAt, or as old as the newest
// turn they distil), the raw turns and curated memories it deletes, and
// its rules that rules does not hold yet (rules then holds them too).
func (c *Curator) plan(ctx context.Context, ns string, batch []memory.Memory, a *Answer, rules *ruleSet, runAt time.Time) (plan, error) {
	byID := map[string]memory.Memory{}
	for _, m := range batch {
		byID[m.ID] = m
	}
	p := plan{ns: ns}
	for _, m := range batch {
		p.batch = append(p.batch, m.ID)
	}
	drop := map[string]bool{}
	for _, ct := range a.NewCurated {
		p.curated = append(p.curated, c.curatedMemory(ns, ct, byID, runAt))
		for _, id := range ct.SourceIDs {
			drop[id] = true
		}
	}
	for _, id := range a.Deletions {
		if _, ok := byID[id]; ok {
			drop[id] = true
		} else {
			p.curatedGone = append(p.curatedGone, id)
		}
	}
	for _, m := range batch {
		if drop[m.ID] {
			p.rawGone = append(p.rawGone, m.ID)
		}
	}
	var err error
	if p.rules, err = c.newRules(ctx, ns, a.Rules, rules, c.now(), sourceOf(batch)); err != nil {
		return plan{}, fmt.Errorf("reading rules: %w", err)
	}
	return p, nil
}

// curatedMemory is the memory a curated turn of the answer becomes, capped
// as a chat's turn is (MaxTokens). It is as old as the newest turn it
// comes from.
func (c *Curator) curatedMemory(ns string, ct CuratedTurn, byID map[string]memory.Memory, runAt time.Time) memory.Memory {
	u, as, _ := memory.ParseExchange(ct.Content)
	text, n := memory.CapExchange(c.Tokens, u, as, c.MaxTokens)
	m := memory.Memory{
		ID: memory.NewID(), Namespace: ns, Type: memory.Curated, Text: text,
		Time: runAt.UTC(), Model: c.ModelName,
		Metadata: map[string]any{"source_ids": toAny(ct.SourceIDs), "curated_at": runAt.UTC().Format(time.RFC3339)},
	}
	var from []memory.Memory
	for _, id := range ct.SourceIDs {
		from = append(from, byID[id])
	}
	m.Metadata[memory.MetaSource] = sourceOf(from).Meta()
	if k := Key(ct.Key); k != "" {
		m.Metadata["key"] = k
	}
	if ct.Supersedes != "" {
		m.Metadata["supersedes"] = ct.Supersedes
	}
	if ct.Private {
		m.Metadata = memory.MarkPrivate(m.Metadata, true, memory.ByCurator)
	}
	for _, id := range ct.SourceIDs {
		if src, ok := byID[id]; ok && memory.IsPrivate(src) {
			// Distilled from a private turn: private for its reasons.
			m.Metadata = memory.MarkPrivate(m.Metadata, true, memory.PrivateWhy(src)...)
		}
	}
	memory.Classify(&m) // a missing mark: the detectors still see it
	var newest time.Time
	for _, id := range ct.SourceIDs {
		if t := byID[id].Time; t.After(newest) {
			newest = t
		}
	}
	if !newest.IsZero() {
		m.Time = newest
	}
	if c.Tokens != nil {
		m.Tokens = n
	}
	return m
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// carryOut previews p on a dry run and executes it otherwise.
func (c *Curator) carryOut(ctx context.Context, p plan, res *Result) error {
	if res.DryRun {
		c.preview(ctx, p, res)
		return nil
	}
	return c.execute(ctx, p, res)
}

// preview adds what p would change to res.Preview and to the counts. Each
// deletion is shown with its text, so that a person can judge it.
func (c *Curator) preview(ctx context.Context, p plan, res *Result) {
	for _, m := range p.curated {
		res.Preview.Curated = append(res.Preview.Curated, m.Text)
	}
	deleted := p.deleted()
	for _, id := range deleted {
		d := Deletion{ID: id}
		if m, err := c.Store.Get(ctx, id); err == nil {
			d.Type, d.Text = m.Type, m.Text
		}
		res.Preview.Deleted = append(res.Preview.Deleted, d)
	}
	for _, m := range p.rules {
		res.Preview.Rules = append(res.Preview.Rules, m.Text)
	}
	if p.profile != nil {
		res.Preview.Profile = p.profile.Text
	}
	for _, sp := range p.superseded {
		d := Deletion{ID: sp.old}
		if m, err := c.Store.Get(ctx, sp.old); err == nil {
			d.Type, d.Text = m.Type, m.Text
		}
		res.Preview.Superseded = append(res.Preview.Superseded, d)
	}
	res.Curated += len(p.curated)
	res.Deleted += len(deleted)
	res.Rules += len(p.rules)
}

// deleted lists the ids p deletes, in the order execute deletes them.
func (p plan) deleted() []string {
	var out []string
	out = append(out, p.leftover...)
	out = append(out, p.expired...)
	out = append(out, p.rawGone...)
	return append(out, p.curatedGone...)
}

// execute applies p, counting into res what it has done. The order makes a
// crash at any point safe: curated memories (naming their sources) are
// written before any raw turn they distil goes, and a rerun deletes the
// leftovers (see planLeftovers). Rules come last: they are not needed to
// finish an interrupted run.
func (c *Curator) execute(ctx context.Context, p plan, res *Result) error {
	if err := c.delete(ctx, p.ns, memory.Distilled, p.leftover, res); err != nil {
		return fmt.Errorf("deleting raw turns already curated: %w", err)
	}
	if err := c.delete(ctx, p.ns, memory.Deleted, p.expired, res); err != nil {
		return fmt.Errorf("deleting forgotten memories past their 30 days: %w", err)
	}
	if len(p.curated) > 0 {
		c.embed(ctx, p.curated)
	}
	p, err := c.withoutDeleted(ctx, p)
	if err != nil {
		return fmt.Errorf("reading the batch again: %w", err)
	}
	if len(p.curated) > 0 {
		if err := c.Store.Upsert(ctx, p.curated...); err != nil {
			return fmt.Errorf("writing curated memories: %w", err)
		}
		c.History.Record(ctx, memory.ViaCurator, memory.Created, p.curated...)
		res.Curated += len(p.curated)
	}
	if err := c.markSuperseded(ctx, p.superseded, res); err != nil {
		return fmt.Errorf("marking superseded memories: %w", err)
	}
	if err := c.delete(ctx, p.ns, memory.Distilled, p.rawGone, res); err != nil {
		return fmt.Errorf("deleting curated raw turns: %w", err)
	}
	if err := c.delete(ctx, p.ns, memory.Deleted, p.curatedGone, res); err != nil {
		return fmt.Errorf("deleting replaced curated memories: %w", err)
	}
	if len(p.rules) > 0 {
		if err := c.Store.Upsert(ctx, p.rules...); err != nil {
			return fmt.Errorf("writing rules: %w", err)
		}
		c.History.Record(ctx, memory.ViaCurator, memory.Created, p.rules...)
		res.Rules += len(p.rules)
	}
	return c.writeProfile(ctx, p)
}

// withoutDeleted empties p when a memory the model was given was deleted
// or hidden while the run went on (through the admin API, by a person): a
// raw turn of the batch, a curated memory it was shown, or one it
// replaces. The answer may carry that text on, in a curated memory or a
// rule, or delete a memory that was hidden to be restorable; a delete is
// final and a hide keeps the memory. The batch's turns stay as they are,
// for the next run.
func (c *Curator) withoutDeleted(ctx context.Context, p plan) (plan, error) {
	gone := 0
	for _, set := range []struct {
		ids []string
		was memory.Type
	}{{p.batch, memory.Raw}, {p.shown, memory.Curated}, {p.curatedGone, memory.Curated}} {
		for _, id := range set.ids {
			m, err := c.Store.Get(ctx, id)
			switch {
			case errors.Is(err, memory.ErrNotFound):
				if set.was == memory.Raw || slices.Contains(p.shown, id) {
					gone++ // a model's made-up id is no change
				}
			case err != nil:
				return p, err
			case m.Type != set.was:
				gone++
			}
		}
	}
	if gone == 0 {
		return p, nil
	}
	c.log().Info("curator: memories of a batch were deleted or hidden during the run; the batch is left for the next run",
		slog.Int("changed", gone), slog.Int("batch", len(p.batch)))
	return plan{ns: p.ns, leftover: p.leftover, expired: p.expired}, nil
}

// embed gives curated memories their vectors when it can; otherwise the
// writer's backfill does it later.
func (c *Curator) embed(ctx context.Context, ms []memory.Memory) {
	if c.Embedder == nil {
		return
	}
	texts := make([]string, len(ms))
	for i, m := range ms {
		texts[i] = m.Text
	}
	ectx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	vecs, err := c.Embedder.Embed(ectx, texts)
	if err != nil {
		c.log().Warn("curated memories stored without vectors for now", slog.Any("error", err))
		return
	}
	for i := range ms {
		ms[i].Vector = vecs[i]
	}
}

// markSuperseded records on each older memory what superseded it and
// when; the memory keeps its text and dates.
func (c *Curator) markSuperseded(ctx context.Context, sps []supersession, res *Result) error {
	if len(sps) == 0 {
		return nil
	}
	var ms []memory.Memory
	for _, sp := range sps {
		m, err := c.Store.Get(ctx, sp.old)
		if errors.Is(err, memory.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		md := maps.Clone(m.Metadata)
		if md == nil {
			md = map[string]any{}
		}
		md["superseded_by"], md["superseded_at"] = sp.by, c.now().UTC().Format(time.RFC3339)
		m.Metadata = md
		ms = append(ms, m)
		res.Superseded = append(res.Superseded, m.ID)
	}
	if err := c.Store.Upsert(ctx, ms...); err != nil {
		return err
	}
	c.History.Record(ctx, memory.ViaCurator, memory.Superseded, ms...)
	return nil
}

// delete deletes ids of namespace ns from the store, counts them, and
// records action in their history.
func (c *Curator) delete(ctx context.Context, ns, action string, ids []string, res *Result) error {
	if len(ids) == 0 {
		return nil
	}
	if err := c.Store.Delete(ctx, ids...); err != nil {
		return err
	}
	c.History.RecordIDs(ctx, memory.ViaCurator, action, ns, ids...)
	res.Deleted += len(ids)
	return nil
}
