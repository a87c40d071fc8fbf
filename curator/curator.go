// Package curator distils raw turns into curated memories and permanent
// rules, on a schedule and on demand, without ever losing a raw
// turn that has no curated successor.
//
// Per namespace, a run:
//  1. pages through every raw turn of its window (the last 24 h, or all of
//     them on the 1st of the month), up to the run's start: turns that
//     arrive during the run are left for the next one;
//  2. first finishes what an interrupted run left: raw turns that a curated
//     memory already names as its source are deleted;
//  3. sends the rest to the curator model in batches that fit its context,
//     with the current date and a sample of the curated memories;
//  4. plans each valid answer (plan.go), then executes the plan in this
//     order: write the curated memories (with their source ids), delete
//     the raw turns they distil and those the model dropped, delete the
//     curated memories it replaced, store the rules as rule memories of
//     the namespace (never twice). A dry run previews the same plan
//     instead. An answer that is not valid is retried, then its batch is
//     left as it was and reported.
//
// Rules belong to the namespace whose turns taught them: the curator never
// writes into the prompts dir, whose files are the operator's.
package curator

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/vera-proxy/vera/memory"
	"github.com/vera-proxy/vera/prompts"
	"github.com/vera-proxy/vera/text"
)

// Modes of a run.
const (
	Daily   = "daily"
	Monthly = "monthly"
)

// Curator runs curation. Set the fields before the first Run.
type Curator struct {
	Store    memory.Store
	Model    Model
	Embedder memory.Embedder // nil: curated memories wait for the backfill
	Tokens   *text.Tokenizer
	// Prompts is read for curator_prompt.md, never written.
	Prompts *prompts.Dir
	// ModelName is recorded on the curated memories and rules.
	ModelName string
	// Location is curator.timezone: it decides the date the model is told
	// and whether today is the 1st. nil means local time.
	Location *time.Location
	Now      func() time.Time
	Log      *slog.Logger

	// ProfileTokens bounds the profile a run writes; 0 means 200
	// (layers.profile_token_budget).
	ProfileTokens int
	// MaxTokens caps the text of every curated memory, rule and profile a
	// run writes (memory.max_turn_tokens): a longer one keeps its head and
	// tail around a "[…]" marker. 0 means memory.DefaultMaxTurnTokens.
	MaxTokens int
	// BatchTokens bounds the raw turns of one batch; 0 means 3000, which
	// with the prompt, the curated sample and the answer fits an 8k
	// context.
	BatchTokens int
	// Attempts per batch before it is left untouched; 0 means 2.
	Attempts int
	// CallTimeout bounds one call to the model; 0 means 5 minutes.
	CallTimeout time.Duration
	// SampleSize is how many recent curated memories the model sees; 0
	// means 20.
	SampleSize int
	// Lock, when set, is taken for each run on top of the in-process one:
	// several vera instances sharing a store run one curator at a time.
	// ok false means another instance holds it.
	Lock func(ctx context.Context) (release func(), ok bool, err error)
	// Observe, when set, hears of every run's result (busy ones too).
	Observe func(Result)
	// History records what each run changes; nil: nothing is.
	History *memory.History
	// Withheld are the memories a run rewrites first: what it wrote from
	// a memory since forgotten or erased; nil: none.
	Withheld *memory.Withheld

	running sync.Mutex
	mu      sync.Mutex
	last    map[string]Result
}

// Options select a run.
type Options struct {
	DryRun    bool
	Namespace string // "" means every namespace
}

// Status is how a run ended, as the curator's status reports name it.
type Status string

// Statuses of a run.
const (
	StatusOK    Status = "ok"
	StatusError Status = "error"
	// StatusBusy: another run was going, in this process or, with Lock,
	// in another vera instance; this one did nothing.
	StatusBusy Status = "busy"
)

// Result is a run's outcome (the fields of the API, then details).
type Result struct {
	Status    Status `json:"status"`
	Mode      string `json:"mode,omitempty"`
	Processed int    `json:"processed"`
	Curated   int    `json:"curated"`
	Deleted   int    `json:"deleted"`
	Rules     int    `json:"rules"`
	Summary   string `json:"summary"`
	Error     string `json:"error,omitempty"`

	DryRun        bool      `json:"dry_run,omitempty"`
	Namespaces    []string  `json:"namespaces,omitempty"`
	FailedBatches int       `json:"failed_batches"`
	Started       time.Time `json:"started"`
	Finished      time.Time `json:"finished"`
	// Preview lists, on a dry run, what the run would have written.
	Preview *Preview `json:"preview,omitempty"`
	// Superseded lists the curated memories a newer one superseded (kept
	// as the past, no longer injected as current).
	Superseded []string `json:"superseded,omitempty"`
}

// Preview is what a dry run would have changed.
type Preview struct {
	Curated    []string   `json:"curated"`
	Deleted    []Deletion `json:"deleted"`
	Rules      []string   `json:"rules"`
	Superseded []Deletion `json:"superseded"`
	// Profile is the profile the run would write; "" for none.
	Profile string `json:"profile,omitempty"`
}

// Deletion is a memory a dry run would delete, with what it says; Type
// and Text are empty when the store has no such memory (a model may name
// an id that is not there).
type Deletion struct {
	ID   string      `json:"id"`
	Type memory.Type `json:"type,omitempty"`
	Text string      `json:"text"`
}

func (c *Curator) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

func (c *Curator) loc() *time.Location {
	if c.Location != nil {
		return c.Location
	}
	return time.Local
}

func (c *Curator) log() *slog.Logger {
	if c.Log != nil {
		return c.Log
	}
	return slog.New(slog.DiscardHandler)
}

// ModeAt returns the mode of a run starting at t: monthly on the 1st (in
// the curator's time zone), else daily.
func (c *Curator) ModeAt(t time.Time) string {
	if t.In(c.loc()).Day() == 1 {
		return Monthly
	}
	return Daily
}

// Last returns the last result per namespace.
func (c *Curator) Last() map[string]Result {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]Result, len(c.last))
	for k, v := range c.last {
		out[k] = v
	}
	return out
}

// Running reports whether a run is going.
func (c *Curator) Running() bool {
	if c.running.TryLock() {
		c.running.Unlock()
		return false
	}
	return true
}

// Run curates once. It returns a busy result at once when a run is going.
func (c *Curator) Run(ctx context.Context, o Options) Result {
	res := c.run(ctx, o)
	if c.Observe != nil {
		c.Observe(res)
	}
	return res
}

// exclusive runs fn as the only run: in this process, and with Lock in
// every instance. A run going already makes it a busy result at once.
func (c *Curator) exclusive(ctx context.Context, fn func() Result) Result {
	if !c.running.TryLock() {
		return Result{Status: StatusBusy, Error: "a curator run is already going"}
	}
	defer c.running.Unlock()
	if c.Lock != nil {
		release, ok, err := c.Lock(ctx)
		switch {
		case err != nil:
			return Result{Status: StatusError, Error: fmt.Sprintf("taking the curator lock: %v", err)}
		case !ok:
			return Result{Status: StatusBusy, Error: "another vera instance is running the curator"}
		}
		defer release()
	}
	return fn()
}

func (c *Curator) run(ctx context.Context, o Options) Result {
	return c.exclusive(ctx, func() Result { return c.runAll(ctx, o) })
}

func (c *Curator) runAll(ctx context.Context, o Options) Result {
	start := c.now()
	res := Result{Status: StatusOK, Mode: c.ModeAt(start), DryRun: o.DryRun, Started: start.UTC()}
	if o.DryRun {
		res.Preview = &Preview{Curated: []string{}, Deleted: []Deletion{}, Rules: []string{}, Superseded: []Deletion{}}
	}
	spaces, err := c.namespaces(ctx, o)
	if err != nil {
		res.Status, res.Error = StatusError, fmt.Sprintf("listing namespaces: %v", err)
		res.Finished = c.now().UTC()
		return res
	}
	for _, ns := range spaces {
		nr := c.runNamespace(ctx, ns, start, res)
		res.add(ns, nr)
		if !o.DryRun {
			c.remember(ns, nr)
		}
	}
	res.Finished = c.now().UTC()
	c.log().Info("curator run", slog.String("status", string(res.Status)), slog.String("mode", res.Mode), slog.Bool("dry_run", o.DryRun),
		slog.Int("processed", res.Processed), slog.Int("curated", res.Curated), slog.Int("deleted", res.Deleted),
		slog.Int("rules", res.Rules), slog.Int("failed_batches", res.FailedBatches), slog.String("error", res.Error))
	return res
}

// namespaces returns the namespaces a run covers.
func (c *Curator) namespaces(ctx context.Context, o Options) ([]string, error) {
	if o.Namespace != "" {
		return []string{o.Namespace}, nil
	}
	return c.Store.Namespaces(ctx)
}

// runNamespace curates namespace ns within run, which started at start:
// the raw turns of the mode's window, up to the start. A dry run's
// namespaces share the run's preview.
func (c *Curator) runNamespace(ctx context.Context, ns string, start time.Time, run Result) Result {
	var since time.Time
	if run.Mode == Daily {
		since = start.Add(-24 * time.Hour)
	}
	nr := Result{Status: StatusOK, Mode: run.Mode, DryRun: run.DryRun, Started: run.Started, Preview: run.Preview}
	if err := c.curate(ctx, ns, since, start, &nr); err != nil {
		nr.Status, nr.Error = StatusError, err.Error()
	}
	nr.Finished = c.now().UTC()
	nr.Namespaces = []string{ns}
	return nr
}

// add counts namespace ns's result nr into the run's result r.
func (r *Result) add(ns string, nr Result) {
	r.Processed += nr.Processed
	r.Curated += nr.Curated
	r.Deleted += nr.Deleted
	r.Rules += nr.Rules
	r.FailedBatches += nr.FailedBatches
	r.Superseded = append(r.Superseded, nr.Superseded...)
	r.Summary = join(r.Summary, " ", nr.Summary)
	if nr.Status == StatusError {
		r.Status, r.Error = StatusError, join(r.Error, "; ", ns+": "+nr.Error)
	}
	r.Namespaces = append(r.Namespaces, ns)
}

// join appends s to list after sep, leaving out an empty s.
func join(list, sep, s string) string {
	switch {
	case s == "":
		return list
	case list == "":
		return s
	}
	return list + sep + s
}

// remember keeps nr as namespace ns's last result.
func (c *Curator) remember(ns string, nr Result) {
	nr.Preview = nil
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.last == nil {
		c.last = map[string]Result{}
	}
	c.last[ns] = nr
}

// scrollAll pages through every memory matching f.
func (c *Curator) scrollAll(ctx context.Context, f memory.Filter) ([]memory.Memory, error) {
	var out []memory.Memory
	cursor := ""
	for {
		page, next, err := c.Store.Scroll(ctx, f, cursor, 500)
		if err != nil {
			return nil, err
		}
		out = append(out, page...)
		if next == "" {
			return out, nil
		}
		cursor = next
	}
}

// sources returns the raw ids a curated memory names as its sources.
func sources(m memory.Memory) []string {
	var out []string
	switch v := m.Metadata["source_ids"].(type) {
	case []any:
		for _, x := range v {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
	case []string:
		out = v
	}
	return out
}

// curate runs one namespace: it finishes what an interrupted run left,
// then curates the rest batch by batch.
func (c *Curator) curate(ctx context.Context, ns string, since, until time.Time, res *Result) error {
	if err := c.rewriteWithheld(ctx, ns, until, res); err != nil {
		return err
	}
	curated, raws, err := c.read(ctx, ns, since, until)
	if err != nil {
		return err
	}
	leftovers, todo := planLeftovers(curated, raws)
	leftovers.ns = ns
	expired, err := c.expiredForgotten(ctx, ns)
	if err != nil {
		return err
	}
	leftovers.expired = expired
	if err := c.carryOut(ctx, leftovers, res); err != nil {
		return err
	}
	return c.curateBatches(ctx, ns, todo, curated, until, res)
}

// ForgottenFor is how long a forgotten memory stays restorable; the
// curator deletes it after that.
const ForgottenFor = 30 * 24 * time.Hour

// expiredForgotten lists the namespace's forgotten memories hidden more
// than ForgottenFor ago.
func (c *Curator) expiredForgotten(ctx context.Context, ns string) ([]string, error) {
	forgotten, err := c.scrollAll(ctx, memory.Filter{Namespace: ns, Types: []memory.Type{memory.Forgotten}})
	if err != nil {
		return nil, fmt.Errorf("reading forgotten memories: %w", err)
	}
	var ids []string
	for _, m := range forgotten {
		at, _ := m.Metadata["forgotten_at"].(string)
		if t, err := time.Parse(time.RFC3339, at); err == nil && c.now().Sub(t) > ForgottenFor {
			ids = append(ids, m.ID)
		}
	}
	return ids, nil
}

// read returns a namespace's curated memories and its raw turns between
// since and until, oldest first.
func (c *Curator) read(ctx context.Context, ns string, since, until time.Time) (curated, raws []memory.Memory, err error) {
	curated, err = c.scrollAll(ctx, memory.Filter{Namespace: ns, Types: []memory.Type{memory.Curated}})
	if err != nil {
		return nil, nil, fmt.Errorf("reading curated memories: %w", err)
	}
	raws, err = c.scrollAll(ctx, memory.Filter{Namespace: ns, Types: []memory.Type{memory.Raw}, Since: since, Until: until})
	if err != nil {
		return nil, nil, fmt.Errorf("reading raw turns: %w", err)
	}
	slices.SortFunc(raws, func(a, b memory.Memory) int { return a.Time.Compare(b.Time) })
	return curated, raws, nil
}

// curateBatches asks the model about todo batch by batch and carries out
// each valid answer's plan. A batch without a valid answer is left as it
// was and reported.
func (c *Curator) curateBatches(ctx context.Context, ns string, todo, curated []memory.Memory, runAt time.Time, res *Result) error {
	// What is withheld (written from a memory since removed, and not
	// rewritten yet) is never shown: what the run writes would carry it
	// on.
	sample := c.sample(slices.DeleteFunc(slices.Clone(curated), func(m memory.Memory) bool { return c.Withheld.Is(m.ID) }))
	profile, err := c.currentProfile(ctx, ns)
	if err != nil {
		return err
	}
	var rules ruleSet
	var failures []string
	for _, batch := range c.batches(todo) {
		shown := profile
		if profile != nil && c.Withheld.Is(profile.ID) {
			shown = nil
		}
		ans, err := c.ask(ctx, batch, sample, shown)
		if err != nil {
			res.FailedBatches++
			failures = append(failures, err.Error())
			c.log().Warn("curator batch left untouched", slog.String("namespace", ns), slog.Int("turns", len(batch)), slog.Any("error", err))
			continue
		}
		res.Processed += len(batch)
		p, err := c.plan(ctx, ns, batch, ans, &rules, runAt)
		if err != nil {
			return err
		}
		for _, m := range sample {
			p.shown = append(p.shown, m.ID)
		}
		p.dropRepeats(curated)
		p.supersede(curated)
		p.newProfile(c.profileFrom(ns, ans.Profile, ans.ProfilePrivate, runAt, sourceOf(batch)), profile)
		p.saw(sample, shown)
		if err := c.carryOut(ctx, p, res); err != nil {
			return err // a store failure: stop here, nothing is lost (see execute)
		}
		if p.profile != nil {
			profile = p.profile // later batches update it
		}
		// Later batches see what this one did, on a dry run as on a run,
		// so that both take the same decisions: what it wrote, replaced
		// and superseded. What it replaced is not shown again, nor taken
		// for a change made by someone else.
		curated = p.applied(curated)
		sample = slices.DeleteFunc(slices.Clone(sample), func(m memory.Memory) bool { return slices.Contains(p.curatedGone, m.ID) })
		if s := strings.TrimSpace(ans.Summary); s != "" {
			res.Summary = strings.TrimSpace(res.Summary + " " + s)
		}
	}
	if len(failures) > 0 {
		return fmt.Errorf("%d batch(es) left untouched: %s", len(failures), strings.Join(failures, "; "))
	}
	return nil
}

// ids returns the ids of ms, as a set.
func ids(ms []memory.Memory) map[string]bool {
	out := make(map[string]bool, len(ms))
	for _, m := range ms {
		out[m.ID] = true
	}
	return out
}
