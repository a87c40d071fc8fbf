package memory

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

// The two layers recalled from the store: the semantic layer (memories
// relevant to the conversation, with the turns around the best of them)
// and the recent layer (the namespace's latest turns).

// semantic fills the semantic layer and returns its entries.
func (b *Builder) semantic(ctx context.Context, req Request, query, lexical string, thr float64, hist historySet, seen map[string]bool, c *Context) []string {
	if c.SemanticBudget <= 0 {
		return nil
	}
	n := b.contextHits(c.SemanticBudget)
	_, contextual := b.store.(Contextual)
	hits, err := b.searchSemantic(ctx, req, query, lexical, thr, n, contextual, c)
	if err != nil {
		c.Err = fmt.Errorf("semantic layer: %w", err)
		return nil
	}
	// Recency breaks ties: of two memories that match as well, the newer
	// is likelier true now.
	slices.SortStableFunc(hits, BestFirst)
	intro := b.fixed(semanticIntro) + 2
	t := &semanticTaker{b: b, req: req, hist: hist, seen: seen, c: c, left: c.SemanticBudget - intro,
		header: b.fixed("[2006-01-02]\n"), days: map[string]bool{}}
	var context [][]Hit
	if contextual {
		context = make([][]Hit, min(n, len(hits)))
		for i := range context {
			for _, m := range hits[i].Context {
				context[i] = append(context[i], Hit{Memory: m})
			}
		}
	} else {
		context = b.neighbours(ctx, hits[:min(n, len(hits))])
	}
	for i, h := range hits {
		t.take(h)
		if i < len(context) {
			for _, n := range context[i] {
				t.take(n)
			}
		}
	}
	if len(c.Semantic) == 0 {
		return nil
	}
	c.SemanticTokens += intro
	return renderDays(c.Semantic)
}

// searchSemantic searches the store for the semantic layer: lexically
// for lexical, by vector for query (embedded while the lexical side runs,
// where the store can), asking a contextual store for the turns around
// its n best hits.
func (b *Builder) searchSemantic(ctx context.Context, req Request, query, lexical string, thr float64, n int, contextual bool, c *Context) ([]Hit, error) {
	q := Query{
		Filter: Filter{Namespace: req.Namespace, Types: []Type{Raw, Curated}}, Threshold: thr,
		Text: lexical, Limit: min(200, c.SemanticBudget/40+10), Around: b.aroundShare(),
	}
	if req.Later {
		// A later turn's best hits are mostly in the prompt already (the
		// plan's, the blocks', the turns forwarded): look further.
		q.Limit = max(q.Limit, laterHits)
	}
	if contextual {
		q.Context = n
	}
	if ahead, ok := b.store.(SearchAhead); ok && b.embedder != nil {
		// The lexical side runs while the question is embedded.
		finish := ahead.SearchAhead(ctx, q)
		return finish(b.queryVector(ctx, query, c))
	}
	q.Vector = b.queryVector(ctx, query, c)
	return b.store.Search(ctx, q)
}

// semanticTaker takes hits into the semantic layer while its budget
// lasts. Every date header has the same shape, and so the same count. The
// memories are rendered in time order under one header per day, so a
// memory costs a header only when its day is new to the block.
type semanticTaker struct {
	b      *Builder
	req    Request
	hist   historySet
	seen   map[string]bool
	c      *Context
	left   int // tokens of the budget left
	header int // a date header's tokens
	days   map[string]bool
}

// take adds h to the layer unless it is excluded, withheld, kept back,
// already in the prompt or the layer, or over what is left of the budget.
func (t *semanticTaker) take(h Hit) {
	b, c := t.b, t.c
	if t.req.Exclude[h.ID] || b.Withheld.Is(h.ID) || keptBack(t.req, h.Memory, c) {
		return
	}
	// What it costs first: once the budget is nearly spent, most
	// hits do not fit, and are not normalised for nothing.
	day := h.Time.Format(time.DateOnly)
	own := h.Tokens
	if own <= 0 {
		own = b.countAtMost(h.Text, t.left)
	}
	n := own + 2
	if !t.days[day] {
		n += t.header
	}
	past := pastMark(h.Memory)
	if past != "" {
		n += b.count(past)
	}
	if n > t.left {
		return
	}
	key := normalize(h.Text)
	if t.seen[key] || t.hist.has(h.Text) || t.hist.repeats(h.Text) || t.hist.carries(h.Text) {
		return
	}
	if framed, changed := frame(h.Text); changed {
		// Framed only once it is taken: most hits are not.
		n += b.countAtMost(framed, t.left) - own
		if n > t.left {
			return
		}
		h.Text = framed
	}
	if past != "" {
		// Superseded by a newer memory of the same key: kept for
		// questions about the past, never given as current.
		h.Text = past + h.Text
	}
	t.seen[key], t.days[day] = true, true
	t.left -= n
	c.SemanticTokens += n
	c.Semantic = append(c.Semantic, h)
}

// queryVector embeds the recall's query; nil (and c.LexicalOnly) when
// there is no embedder or it fails: recall goes on lexically.
func (b *Builder) queryVector(ctx context.Context, query string, c *Context) []float32 {
	if c.queried {
		c.LexicalOnly = c.qvec == nil
		return c.qvec
	}
	c.queried = true
	c.qvec = b.embed(ctx, query, c)
	return c.qvec
}

// embed embeds a query, within EmbedTimeout; nil when it cannot.
func (b *Builder) embed(ctx context.Context, query string, c *Context) []float32 {
	if b.embedder == nil {
		c.LexicalOnly = true
		return nil
	}
	timeout := b.EmbedTimeout
	if timeout <= 0 {
		timeout = 3 * time.Second
	}
	ectx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	v, err := b.embedder.Embed(ectx, []string{query})
	if err != nil || len(v) != 1 {
		c.LexicalOnly = true
		return nil
	}
	return v[0]
}

// laterHits is how many hits a later turn's block looks through.
const laterHits = 50

// defaultAround: see Builder.Around.
const defaultAround = 0.3

// aroundShare is the share of its neighbours' scores a turn takes in.
func (b *Builder) aroundShare() float64 {
	switch {
	case b.Around < 0:
		return 0
	case b.Around == 0:
		return defaultAround
	}
	return b.Around
}

// contextHits is how many of the best hits bring their neighbours, for a
// semantic layer of budget tokens.
func (b *Builder) contextHits(budget int) int {
	if b.ContextHits > 0 {
		return b.ContextHits
	}
	rate := b.ContextHitsPer1000
	if rate <= 0 {
		rate = defaultContextHitsPer1000
	}
	return max(1, int(rate*float64(budget)/1000))
}

// neighbours returns the turns around each of the given hits: the
// question a hit answers, or what it goes on to say, often lies there.
// Looked up at once (a round trip each on Qdrant).
func (b *Builder) neighbours(ctx context.Context, hits []Hit) [][]Hit {
	context := make([][]Hit, len(hits))
	var wg sync.WaitGroup
	for i := range context {
		if hits[i].Type == Raw {
			wg.Go(func() { context[i] = b.around(ctx, hits[i].Memory) })
		}
	}
	wg.Wait()
	return context
}

// defaultContextHitsPer1000: see Builder.ContextHits.
const defaultContextHitsPer1000 = 3

// ExchangeWindow is how far apart in time two turns of one exchange can
// be: the builder's context of a hit, and a turn's neighbours in a
// store's share of their scores (Query.Around).
const ExchangeWindow = 30 * time.Minute

// around returns the raw turns just before and just after h in its
// namespace, within ExchangeWindow: the context of a hit.
func (b *Builder) around(ctx context.Context, h Memory) []Hit {
	f := Filter{Namespace: h.Namespace, Types: []Type{Raw}}
	var out []Hit
	before := f
	before.Since, before.Until = h.Time.Add(-ExchangeWindow), h.Time
	// Two: a store that keeps time in microseconds (Qdrant) rounds until
	// up, and finds h itself.
	if prev, err := b.store.Latest(ctx, before, 2); err == nil {
		for _, m := range prev {
			if m.ID != h.ID && !m.Time.After(h.Time) {
				out = append(out, Hit{Memory: m})
				break
			}
		}
	}
	if e, ok := b.store.(Earliest); ok {
		after := f
		after.Since, after.Until = h.Time.Add(time.Microsecond), h.Time.Add(ExchangeWindow)
		if next, err := e.Earliest(ctx, after, 1); err == nil && len(next) > 0 && next[0].ID != h.ID {
			out = append(out, Hit{Memory: next[0]})
		}
		return out
	}
	// Newest first: the turn right after h is the last of a window that
	// holds few enough of them; the narrow window first.
	for _, w := range []time.Duration{2 * time.Minute, ExchangeWindow} {
		after := f
		after.Since, after.Until = h.Time.Add(time.Microsecond), h.Time.Add(w)
		next, err := b.store.Latest(ctx, after, aroundLimit)
		if err != nil || len(next) == 0 {
			continue
		}
		if m := next[len(next)-1]; m.ID != h.ID {
			out = append(out, Hit{Memory: m})
		}
		break
	}
	return out
}

// aroundLimit bounds one look for the turn after a hit.
const aroundLimit = 32

// pastMark is what a superseded memory is rendered after: "(past,
// superseded on 2026-11-20) ", or "" for a current memory.
func pastMark(m Memory) string {
	if m.Metadata["superseded_by"] == nil {
		return ""
	}
	at, _ := m.Metadata["superseded_at"].(string)
	if len(at) >= len(time.DateOnly) {
		return "(past, superseded on " + at[:len(time.DateOnly)] + ") "
	}
	return "(past, superseded) "
}

// renderDays puts hits in time order (in place) and renders them, one
// "[YYYY-MM-DD]" header for each day's run of memories.
func renderDays(hits []Hit) []string {
	slices.SortStableFunc(hits, func(a, b Hit) int { return a.Time.Compare(b.Time) })
	var block []string
	var day string
	for _, h := range hits {
		if d := h.Time.Format(time.DateOnly); d != day || len(block) == 0 {
			day = d
			block = append(block, "["+d+"]\n"+h.Text)
			continue
		}
		block[len(block)-1] += "\n\n" + h.Text
	}
	return block
}

// recent fills the recent layer: newest first until the budget runs out,
// then put back in time order.
func (b *Builder) recent(ctx context.Context, req Request, turns int, hist historySet, seen map[string]bool, c *Context) {
	if c.RecentBudget <= 0 {
		return
	}
	exclude := req.Exclude
	latest, err := b.store.Latest(ctx, Filter{Namespace: req.Namespace, Types: []Type{Raw}}, turns+len(c.Semantic)+8)
	if err != nil {
		c.Err = fmt.Errorf("recent layer: %w", err)
	}
	left := c.RecentBudget
	for _, m := range latest {
		if len(c.RecentIDs) == turns {
			break
		}
		key := normalize(m.Text)
		if seen[key] || exclude[m.ID] || hist.has(m.Text) || hist.carries(m.Text) || keptBack(req, m, c) {
			continue
		}
		user, assistant, ok := ParseExchange(m.Text)
		if !ok {
			continue
		}
		n := m.Tokens + 10
		if m.Tokens <= 0 {
			n = b.countAtMost(m.Text, left) + 10
		}
		if n > left {
			break // older turns would leave a gap in the recent past
		}
		seen[key] = true
		left -= n
		c.RecentTokens += n
		c.RecentIDs = append(c.RecentIDs, m.ID)
		c.Recent = append(c.Recent, Message{Role: "assistant", Content: assistant}, Message{Role: "user", Content: user})
	}
	slices.Reverse(c.Recent)
	slices.Reverse(c.RecentIDs)
}
