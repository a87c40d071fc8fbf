package curator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/vera-proxy/vera/memory"
)

// A run first rewrites what is withheld (memory.Withheld): the curated
// memories, rules and profile it wrote while a memory since forgotten or
// erased was current. The model is shown them, what was removed when it is
// still known (a forgotten memory's text, or an erased one's while this
// process remembers it; never from disk), and the curated memories still
// kept; it answers each one's text without what was removed, or "" when
// nothing is left. Each rewritten one is released; one the model leaves
// out, or answers badly, stays withheld for the next run.

// RewriteSchema is the JSON schema of a rewrite's answer.
var RewriteSchema = json.RawMessage(`{
  "type": "object",
  "properties": {
    "rewritten": {"type": "array", "items": {"type": "object", "properties": {
      "id": {"type": "string"},
      "text": {"type": "string"}
    }, "required": ["id", "text"]}}
  },
  "required": ["rewritten"]
}`)

// rewritePrompt is the system prompt of a rewrite.
const rewritePrompt = `You keep a person's long-term memory. The person removed some memories. ` +
	`The memories under "memories" were written while the removed ones were current, and may repeat what they said.
Rewrite each one so that nothing of the removed memories remains in it: no fact, name, number or detail that only they gave. ` +
	`Keep everything else as it was, in the same form: a curated memory stays a "User: ...\nAssistant: ..." exchange, a rule a rule, a profile a short portrait.
"removed" lists what the person removed, when it is still known. When it is empty, keep only what "current" (the memories still kept) or the memory itself supports beyond doubt.
When nothing is left of a memory, answer an empty text for it.
Answer only JSON: {"rewritten":[{"id":"...","text":"..."}]}, one entry per memory.`

// rewriteAnswer is a rewrite's answer.
type rewriteAnswer struct {
	Rewritten []rewritten `json:"rewritten"`
}

type rewritten struct {
	ID   string `json:"id"`
	Text string `json:"text"`
}

// RewriteWithheld is a run that only rewrites namespace ns's withheld
// memories, started the moment a memory they came from is removed. It
// returns a busy result at once when a run is going (that run, or the
// next, rewrites them).
func (c *Curator) RewriteWithheld(ctx context.Context, ns string) Result {
	return c.exclusive(ctx, func() Result { return c.rewriteNamespace(ctx, ns) })
}

func (c *Curator) rewriteNamespace(ctx context.Context, ns string) Result {
	start := c.now()
	res := Result{Status: StatusOK, Started: start.UTC(), Namespaces: []string{ns}}
	if err := c.rewriteWithheld(ctx, ns, start, &res); err != nil {
		res.Status, res.Error = StatusError, err.Error()
	}
	if res.FailedBatches > 0 && res.Status == StatusOK {
		res.Status, res.Error = StatusError, "the curator model gave no valid rewrite; they stay withheld"
	}
	res.Finished = c.now().UTC()
	c.log().Info("curator rewrite of withheld memories", slog.String("namespace", ns), slog.String("status", string(res.Status)),
		slog.String("summary", res.Summary), slog.String("error", res.Error))
	return res
}

// rewriteWithheld rewrites namespace ns's withheld memories.
func (c *Curator) rewriteWithheld(ctx context.Context, ns string, runAt time.Time, res *Result) error {
	if c.Withheld == nil || res.DryRun {
		return nil
	}
	// What is withheld from now on (a removal while the model answers)
	// was not known to this rewrite: it stays withheld.
	asOf := time.Now().UTC()
	held := c.Withheld.Of(ns)
	if len(held) == 0 {
		return nil
	}
	var ms []memory.Memory
	var gone []string
	removed := c.Withheld.RemovedTexts(ns)
	because := map[string]bool{}
	for _, h := range held {
		m, err := c.Store.Get(ctx, h.ID)
		switch {
		case errors.Is(err, memory.ErrNotFound):
			gone = append(gone, h.ID)
			continue
		case err != nil:
			return fmt.Errorf("reading a withheld memory: %w", err)
		case m.Type == memory.Profile && m.Metadata["superseded_by"] != nil:
			gone = append(gone, h.ID) // a past version, never injected
			continue
		case m.Type == memory.Forgotten:
			continue // hidden: withheld still, should it be restored
		}
		ms = append(ms, m)
		because[h.Because] = true
	}
	for id := range because {
		// Forgotten, not erased: its text is still known.
		if r, err := c.Store.Get(ctx, id); err == nil && r.Type == memory.Forgotten && !slices.Contains(removed, r.Text) {
			removed = append(removed, r.Text)
		}
	}
	if err := c.Withheld.Release(ctx, ns, time.Time{}, gone...); err != nil {
		return err
	}
	if len(ms) == 0 {
		return nil
	}
	current, err := c.Store.Latest(ctx, memory.Filter{Namespace: ns, Types: []memory.Type{memory.Curated}}, c.sampleSize()+len(ms))
	if err != nil {
		return fmt.Errorf("reading curated memories: %w", err)
	}
	current = slices.DeleteFunc(current, func(m memory.Memory) bool { return c.Withheld.Is(m.ID) })
	current = current[:min(len(current), c.sampleSize())]
	n := 0
	for _, chunk := range c.batchesOf(ms, 8) { // a few at a time: each answer is whole texts
		ans, err := c.askRewrite(ctx, chunk, removed, current)
		if err != nil {
			res.FailedBatches++
			c.log().Warn("curator: withheld memories stay withheld", slog.String("namespace", ns), slog.Int("memories", len(chunk)), slog.Any("error", err))
			continue
		}
		for _, m := range chunk {
			i := slices.IndexFunc(ans.Rewritten, func(r rewritten) bool { return r.ID == m.ID })
			if i < 0 {
				continue // left out: withheld still, for the next run
			}
			ok, err := c.rewrite(ctx, m, strings.TrimSpace(ans.Rewritten[i].Text), runAt, res)
			if err != nil {
				return err
			}
			if ok {
				n++
				if err := c.Withheld.Release(ctx, ns, asOf, m.ID); err != nil {
					return err
				}
			}
		}
	}
	if n > 0 {
		res.Summary = join(res.Summary, " ", fmt.Sprintf("Rewrote %d memories written from what was removed.", n))
	}
	return nil
}

func (c *Curator) sampleSize() int {
	if c.SampleSize > 0 {
		return c.SampleSize
	}
	return 20
}

// askRewrite asks the model to rewrite ms.
func (c *Curator) askRewrite(ctx context.Context, ms []memory.Memory, removed []string, current []memory.Memory) (*rewriteAnswer, error) {
	type shown struct {
		ID   string      `json:"id"`
		Type memory.Type `json:"type"`
		Text string      `json:"text"`
	}
	in := struct {
		Removed  []string     `json:"removed"`
		Memories []shown      `json:"memories"`
		Current  []promptTurn `json:"current"`
	}{Removed: removed, Current: c.promptTurns(current)}
	if in.Removed == nil {
		in.Removed = []string{}
	}
	for _, m := range ms {
		in.Memories = append(in.Memories, shown{m.ID, m.Type, m.Text})
	}
	b, err := json.MarshalIndent(in, "", "  ")
	if err != nil {
		return nil, err
	}
	system := rewritePrompt + "\n\n" + dataNote
	var last error
	for range c.attempts() {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		cctx, cancel := context.WithTimeout(ctx, c.callTimeout())
		text, err := c.Model.Complete(cctx, system, string(b), RewriteSchema)
		cancel()
		if err != nil {
			last = err
			continue
		}
		var a rewriteAnswer
		for _, cand := range candidates(strings.TrimSpace(text)) {
			if err = json.Unmarshal([]byte(cand), &a); err == nil {
				break
			}
		}
		if err == nil {
			return &a, nil
		}
		last = fmt.Errorf("the answer is not the expected JSON: %w", err)
	}
	return nil, fmt.Errorf("rewriting %d withheld memories: %w", len(ms), last)
}

// attempts is how often a request is tried; Attempts, or 2.
func (c *Curator) attempts() int {
	if c.Attempts > 0 {
		return c.Attempts
	}
	return 2
}

// callTimeout bounds one call; CallTimeout, or 5 minutes.
func (c *Curator) callTimeout() time.Duration {
	if c.CallTimeout > 0 {
		return c.CallTimeout
	}
	return 5 * time.Minute
}

// rewrite stores m with text (deletes it when text is ""); false when
// text is not a valid rewrite, or m changed while the model answered (a
// person's edit, or its erasure, stands), which leaves m withheld.
func (c *Curator) rewrite(ctx context.Context, m memory.Memory, text string, runAt time.Time, res *Result) (bool, error) {
	now, err := c.Store.Get(ctx, m.ID)
	switch {
	case errors.Is(err, memory.ErrNotFound):
		return false, c.Withheld.Release(ctx, m.Namespace, time.Time{}, m.ID)
	case err != nil:
		return false, fmt.Errorf("reading a withheld memory again: %w", err)
	case now.Text != m.Text || now.Type != m.Type:
		return false, nil
	}
	if text == "" {
		if err := c.delete(ctx, m.Namespace, memory.Deleted, []string{m.ID}, res); err != nil {
			return false, fmt.Errorf("deleting a withheld memory: %w", err)
		}
		return true, nil
	}
	if m.Type == memory.Curated {
		if _, _, ok := memory.ParseExchange(text); !ok {
			return false, nil
		}
	}
	limit := c.MaxTokens
	if limit <= 0 {
		limit = memory.DefaultMaxTurnTokens
	}
	if m.Type == memory.Profile {
		limit = min(limit, c.profileTokens())
	}
	text, tokens, _ := memory.CapText(c.Tokens, text, limit)
	md := maps.Clone(m.Metadata)
	md["rewritten_at"] = runAt.UTC().Format(time.RFC3339)
	if m.Type == memory.Profile {
		// A new current profile; the withheld one becomes its past.
		p := m
		p.ID, p.Text, p.Tokens, p.Vector, p.Metadata = memory.NewID(), text, tokens, nil, md
		p.Time = runAt.UTC()
		var pl plan
		pl.newProfile(&p, &m)
		return true, c.writeProfile(ctx, pl)
	}
	m.Text, m.Tokens, m.Vector, m.Metadata = text, tokens, nil, md
	ms := []memory.Memory{m}
	c.embed(ctx, ms)
	if err := c.Store.Upsert(ctx, ms...); err != nil {
		return false, fmt.Errorf("writing a rewritten memory: %w", err)
	}
	c.History.Record(ctx, memory.ViaCurator, memory.Edited, m)
	return true, nil
}

func (c *Curator) profileTokens() int {
	if c.ProfileTokens > 0 {
		return c.ProfileTokens
	}
	return 200
}
