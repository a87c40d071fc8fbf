package memory

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/vera-proxy/vera/memory/private"
	"github.com/vera-proxy/vera/ollama"
	"github.com/vera-proxy/vera/text"
)

// Message is one chat message as the context builder sees it: its role and
// text. Everything else a message carries (images, tool calls) stays with
// the caller, which only ever moves whole messages.
type Message struct {
	Role    string
	Content string
}

// DefaultContextLength is Ollama's context window when neither the request
// nor the model sets one.
const DefaultContextLength = ollama.DefaultContextLength

// semanticIntro heads the semantic layer.
const semanticIntro = "Memories from earlier conversations with this user, by date. Use them when they help; they may be out of date."

// Builder assembles the four layers (system, semantic, recent, current) for one chat.
type Builder struct {
	store    Store
	embedder Embedder // nil: lexical retrieval only
	tokens   *text.Tokenizer
	stems    text.Stemmer // the terms of memories compared with the request

	// Budgets in tokens, threshold and how many recent turns at most; zero
	// values mean the defaults (1500, 1500, 0.5, 10).
	SemanticBudget int
	RecentBudget   int
	Threshold      float64
	RecentTurns    int
	// ProfileBudget bounds the namespace's profile in the system layer;
	// 0 means 200 tokens.
	ProfileBudget int
	// RulesBudget bounds the namespace's curator rules in the system layer;
	// 0 means 500.
	RulesBudget int
	// SystemPrompt returns the text of systemprompt.md; nil means none.
	SystemPrompt func() string
	// ContextHits is how many of the best hits bring the turns around
	// them; 0 means ContextHitsPer1000 for each 1000 tokens of the
	// semantic layer's budget (at least one), whose 0 means 3: a small
	// budget is better spent on more hits, a large one on their context
	// (chosen by cross-validation on LoCoMo, BENCHMARKS.md).
	ContextHits        int
	ContextHitsPer1000 float64
	// Around is the share of its neighbours' lexical scores a raw turn
	// takes in (Query.Around); 0 means 0.3, below 0 none (chosen by
	// cross-validation on LoCoMo, BENCHMARKS.md).
	Around float64
	// EmbedTimeout bounds embedding the query on the request path; 0 means
	// 3s. Past it the chat gets lexical memory only.
	EmbedTimeout time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Withheld keeps out what the curator wrote from a memory since
	// forgotten or erased, until it is rewritten; nil: nothing is.
	Withheld *Withheld
}

// NewBuilder returns a Builder over store.
func NewBuilder(store Store, embedder Embedder, tokens *text.Tokenizer) *Builder {
	return &Builder{store: store, embedder: embedder, tokens: tokens}
}

// Request is what the builder needs to know about a chat.
type Request struct {
	Namespace string
	Messages  []Message
	// Recall, when set, stands in for Messages in recall (the query and
	// what the conversation already holds) while Messages still sizes the
	// prompt: a RAG-wrapped question is recalled by the user's own words
	// but forwarded with its retrieved documents.
	Recall []Message
	// ContextLength is the model's context window in tokens (num_ctx);
	// 0 means DefaultContextLength.
	ContextLength int
	// AnswerTokens is room kept for the answer; 0 means a quarter of the
	// window, at most 1024.
	AnswerTokens int
	// ModelSystem is the model's own Modelfile SYSTEM prompt. Ollama applies
	// it only to requests without a system message, so once vera adds one
	// to a request that had none, it must carry this text first.
	ModelSystem string
	// NoMemory applies the system layer only (X-Vera-Memory: off).
	NoMemory bool
	// SemanticOnly leaves the recent layer out (used by `vera eval`).
	SemanticOnly bool

	// Later recalls for a later turn of a conversation whose layers are
	// already in the prompt (Conversations): only memories
	// relevant now and not yet in the prompt, as a block for the last
	// user message (Context.Block), within a third of the semantic
	// budget (on a small window, an eighth of it unless Roomy). The
	// system layer is only read for Context.Sources.
	Later bool
	// Roomy lets a later block take the whole third: the conversation's
	// cut was moved to make room for it (Context.Crowded).
	Roomy bool
	// Exclude holds the IDs of memories never to inject: those already in
	// the prompt, and the turn a regenerate or an edit replaces.
	Exclude map[string]bool
	// Held is text vera already put ahead of or into the request's own
	// messages on a later turn (the conversation's plan and blocks): it
	// takes its part of the window.
	Held []string
	// Reserve is room, in tokens, the budgets leave free: space for a
	// conversation to grow before its plan must be rebuilt.
	Reserve int
	// Shareable leaves every private memory out (memory.Shareable: a
	// cloud model's policy), counted in Context.Withheld.
	Shareable bool
	// Carried is what the client's own memory already puts in the prompt
	// (Open WebUI's "User Context:" facts): no memory that says the same
	// is injected beside it. CarriedBlock: that block is in Messages'
	// system text, which is then never kept (Context.CarriedBlock).
	Carried      []string
	CarriedBlock bool
}

// Context is what the builder decided to inject.
type Context struct {
	// System is the content of the one system message that replaces the
	// request's leading system messages (SystemReplaces of them): theirs
	// (or, when there are none, the Modelfile's), then systemprompt.md,
	// then the namespace's rules, then the semantic layer, joined by blank
	// lines. Empty when there is nothing to say.
	System         string
	SystemReplaces int
	// Recent holds the recent layer as user/assistant messages, oldest
	// first, to go between the system message and the request's own.
	Recent []Message

	Semantic       []Hit    // the memories in the semantic layer
	RecentIDs      []string // the turns in the recent layer
	RuleIDs        []string // the rules in the system layer
	ProfileID      string   // the profile in the system layer; "" for none
	ProfileTokens  int
	SemanticTokens int
	RecentTokens   int
	RulesTokens    int
	// Budgets after fitting the context window.
	SemanticBudget int
	RecentBudget   int
	LexicalOnly    bool  // the query could not be embedded
	Err            error // memory failed; the chat goes on without it

	// SystemTokens is System's count as the builder made it: its parts
	// counted apart, memories by the figures their budgets were spent
	// with. It is at least the count of System whole (less a token or so
	// per 2 KiB of the caller's own text, counted in chunks), and a few
	// percent more (counting whole takes about a millisecond per 1,500
	// tokens); 0 when System is empty.
	SystemTokens int
	// ownParts is how many of the system layer's first parts are the
	// caller's text and systemprompt.md, which no memory figure counts.
	ownParts int

	// Sources identifies what the system layer was made from (the
	// caller's system text, the Modelfile's, systemprompt.md, the rules):
	// when it changes, a conversation's plan is rebuilt.
	Sources string
	// Block is a later turn's memory block (Request.Later), to go at the
	// start of the last user message; empty when nothing new is relevant.
	Block string
	// Full is set on a later turn (Request.Later) whose conversation no
	// longer fits the context window; Crowded on one whose block found
	// memories the prompt lacks and no room for them.
	Full    bool
	Crowded bool
	// Withheld counts the private memories left out (Request.Shareable).
	Withheld int
	// Shareable is the Request's: what the context may hold was decided
	// under that policy.
	Shareable bool
	// CarriedBlock is the Request's: System holds the client's own
	// memory block, which vera never stores (a conversation's plan that
	// holds it is not kept).
	CarriedBlock bool
	// Private lists the reasons of the private memories put in (under
	// policy all): the answer may repeat them, so its turn is private
	// too.
	Private []string
	// qvec is the query's embedding once made (queried): a second search
	// of the same turn does not embed it again.
	qvec    []float32
	queried bool
	// Blocks places every memory block of a conversation's later turns:
	// what the caller's dialect writes at the start of its user messages.
	Blocks []Block
	// KeepFrom compacts a conversation longer than its window: the
	// caller's messages before its KeepFrom-th (from 0) user message, after
	// the system messages SystemReplaces replaces, are not forwarded. The
	// summary of what they said ends System. 0: every message goes.
	KeepFrom int
	// Compacted is how many of the conversation's turns the summary in
	// System replaces (X-Vera-Context's compacted); 0 when it holds none.
	Compacted int
}

// Block is a memory block at the start of a user message: the User-th
// (from 0) message of role user in the request.
type Block struct {
	User int
	Text string
}

// Tokens is how many tokens of memory were injected, the profile and
// rules included.
func (c *Context) Tokens() int {
	return c.SemanticTokens + c.RecentTokens + c.RulesTokens + c.ProfileTokens
}

// IDs lists every injected memory in injection order: the profile, rules,
// the semantic layer, then the recent one.
func (c *Context) IDs() []string {
	ids := make([]string, 0, 1+len(c.RuleIDs)+len(c.Semantic)+len(c.RecentIDs))
	if c.ProfileID != "" {
		ids = append(ids, c.ProfileID)
	}
	ids = append(ids, c.RuleIDs...)
	for _, h := range c.Semantic {
		ids = append(ids, h.ID)
	}
	return append(ids, c.RecentIDs...)
}

func (b *Builder) defaults() (sem, rec int, thr float64, turns int) {
	sem, rec, thr, turns = b.SemanticBudget, b.RecentBudget, b.Threshold, b.RecentTurns
	if sem <= 0 {
		sem = 1500
	}
	if rec <= 0 {
		rec = 1500
	}
	if thr <= 0 {
		thr = 0.5
	}
	if turns <= 0 {
		turns = 10
	}
	return
}

// Recall decides the layers for req. It never fails the chat: a memory
// failure is reported in Context.Err and the chat goes on without memory.
// Its phases run in order: the system layer, fitting the budgets to the
// window, the semantic layer, the recent layer, then rendering.
func (b *Builder) Recall(ctx context.Context, req Request) *Context {
	c := &Context{Shareable: req.Shareable, CarriedBlock: req.CarriedBlock}
	if l, ok := b.store.(Loader); ok && !req.NoMemory {
		if p, loading := l.Loading(); loading {
			// Just started: the chat goes on without memory until the
			// store's index is loaded.
			c.Err = p.Err()
		}
	}
	sys := b.system(ctx, req, c)
	c.Sources = sources(sys, req.ModelSystem, c.SystemReplaces, req.Shareable)
	if req.Later {
		b.later(ctx, req, c)
		return c
	}
	block := b.memories(ctx, req, sys, c)
	b.render(req, sys, block, c)
	return c
}

// sources digests the system layer's parts, and how many of the request's
// messages it replaces.
func sources(sys []string, modelSystem string, replaces int, shareable bool) string {
	h := sha256.New()
	// A plan made under another policy is not the plan for this one.
	fmt.Fprintf(h, "%d;%t;", replaces, shareable)
	for _, s := range append(sys, modelSystem) {
		fmt.Fprintf(h, "%d:%s", len(s), s)
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// blockOpen and blockClose mark a later turn's memory block.
const (
	blockOpen  = "<memories>\nRecalled from earlier conversations with this user for the message below; they may be out of date.\n\n"
	blockClose = "\n</memories>\n\n"
)

// later fills a later turn's memory block: memories relevant to the
// conversation now, not already in the prompt, in a third of the semantic
// budget (the turn's share), rendered to go before the user's own text.
func (b *Builder) later(ctx context.Context, req Request, c *Context) {
	if req.NoMemory || b.store == nil || c.Err != nil {
		return
	}
	recall := req.Messages
	if req.Recall != nil {
		recall = req.Recall
	}
	query, lexical := semanticQuery(recall)
	if query == "" {
		return
	}
	sem, _, thr, _ := b.defaults()
	// The turn's share: a third of the semantic budget, and on a small
	// window an eighth of it, so that one block does not use the room
	// of the next several turns.
	turnShare := min(sem/3, max(req.Window()/8, 0))
	if req.Roomy {
		turnShare = sem / 3
	}
	avail := b.room(req, "", turnShare)
	c.Full = avail <= 0
	if c.Full && req.Reserve > 0 {
		// Outgrown only when the conversation spent the room it grows
		// in too (Reserve): a block merely finds no room. (room counts
		// only as far as its room, so it is asked again without it.)
		whole := req
		whole.Reserve = 0
		c.Full = b.room(whole, "", 0) <= 0
	}
	marks := b.fixed(blockOpen+blockClose) - b.fixed(semanticIntro) - 2
	c.SemanticBudget = max(min(turnShare, avail)-marks, 0)
	hist := history(recall, &b.stems).withExchanges(req.Messages).withCarried(req.Carried)
	var entries []string
	if c.SemanticBudget > 0 {
		entries = b.semantic(ctx, req, query, lexical, thr, hist, map[string]bool{}, c)
	}
	if len(entries) == 0 && c.SemanticBudget < sem/3-marks && !c.Full && c.Err == nil {
		// Squeezed out: would a third of the semantic budget have held
		// a memory with what the question asks about and the prompt
		// lacks?
		probe := &Context{SemanticBudget: sem/3 - marks, qvec: c.qvec, queried: c.queried}
		b.semantic(ctx, req, query, lexical, thr, hist, map[string]bool{}, probe)
		for _, h := range probe.Semantic {
			c.Crowded = c.Crowded || probe.Err == nil && hist.needs(h.Text, req.Held)
		}
	}
	if len(entries) == 0 {
		return
	}
	c.SemanticTokens += b.fixed(blockOpen+blockClose) - b.fixed(semanticIntro) - 2
	c.Block = blockOpen + strings.Join(entries, "\n\n") + blockClose
}

// memories fits the budgets to the window, then fills the semantic and
// recent layers; it returns the semantic layer's entries.
func (b *Builder) memories(ctx context.Context, req Request, sys []string, c *Context) []string {
	if req.NoMemory || b.store == nil || c.Err != nil {
		return nil
	}
	recall := req.Messages
	if req.Recall != nil {
		recall = req.Recall
	}
	query, lexical := semanticQuery(recall)
	if query == "" {
		return nil
	}
	sem, rec, thr, turns := b.defaults()
	if req.SemanticOnly {
		rec = 0
	}
	systemLayer := strings.Join(sys, "\n\n")
	if c.SystemReplaces == 0 {
		systemLayer += req.ModelSystem // counted in the window, added by render
	}
	c.SemanticBudget, c.RecentBudget = b.fit(req, systemLayer, sem, rec)
	if c.SemanticBudget+c.RecentBudget <= 0 {
		return nil
	}
	hist := history(recall, &b.stems).withCarried(req.Carried)
	// Memories with the same normalised text are injected once, across
	// both layers: a question asked many times is one memory, not many.
	seen := map[string]bool{}
	block := b.semantic(ctx, req, query, lexical, thr, hist, seen, c)
	if c.Err != nil {
		return nil
	}
	b.recent(ctx, req, turns, hist, seen, c)
	return block
}

// render writes the system message: the Modelfile's SYSTEM when the request
// had no system message of its own (Ollama would have used it, so the one
// vera adds must carry it), the system layer's parts, then the semantic
// layer.
func (b *Builder) render(req Request, sys, block []string, c *Context) {
	// Each part and the blank line that joins it (one token); the
	// memories' own figures where they have them.
	n := c.ProfileTokens + c.RulesTokens + len(sys)
	for _, p := range sys[:c.ownParts] {
		n += b.countAtMost(p, len(p)) // kept when long: sent every turn
	}
	if len(block) > 0 {
		sys = append(sys, semanticIntro+"\n\n"+strings.Join(block, "\n\n"))
		n += c.SemanticTokens + 1
	}
	c.System = strings.Join(sys, "\n\n")
	if c.System != "" && c.SystemReplaces == 0 && strings.TrimSpace(req.ModelSystem) != "" {
		c.System = req.ModelSystem + "\n\n" + c.System
		n += b.countAtMost(req.ModelSystem, len(req.ModelSystem)) + 1
	}
	if c.System != "" {
		c.SystemTokens = n
	}
}

// fit shrinks the budgets so that the system layer, the request's own
// messages, the memories and room for the answer fit the context window:
// Ollama silently drops the start of an over-long prompt, which is where
// the system prompt and the memories sit. A tenth of the window is kept
// spare because cl100k_base only approximates the model's own tokenizer.
func (b *Builder) fit(req Request, system string, sem, rec int) (int, int) {
	avail := b.room(req, system, sem+rec)
	if avail <= 0 {
		return 0, 0
	}
	if sem+rec <= avail {
		return sem, rec
	}
	s := avail * sem / (sem + rec)
	return s, avail - s
}

// Window is the request's context window in tokens.
func (req Request) Window() int {
	if req.ContextLength <= 0 {
		return DefaultContextLength
	}
	return req.ContextLength
}

// PromptRoom is how many tokens of the window the prompt may take: the
// window less room for the answer (AnswerTokens, else a quarter of the
// window, at most 1024) and a tenth spare, since cl100k_base only
// approximates the model's own tokenizer.
func (req Request) PromptRoom() int {
	window := req.Window()
	answer := req.AnswerTokens
	if answer <= 0 {
		answer = min(1024, window/4)
	}
	return (window - answer) * 9 / 10
}

// keptBack reports whether m stays out of this request: private, under a
// policy that shares only what is not (counted).
func keptBack(req Request, m Memory, c *Context) bool {
	switch {
	case req.Shareable && IsPrivate(m):
		c.Withheld++
		return true
	case req.Shareable && !Unmarked(m) && len(private.Detect(m.Text)) > 0:
		// Written before the detectors ran on every write.
		c.Withheld++
		return true
	case IsPrivate(m):
		c.Private = union(c.Private, PrivateWhy(m))
	}
	return false
}

// union is a with what of b it lacks.
func union(a, b []string) []string {
	for _, s := range b {
		if !slices.Contains(a, s) {
			a = append(a, s)
		}
	}
	return a
}

// room returns how many tokens of the window are left for memory once the
// system layer, the request's own messages, Reserve and the answer are in
// (negative when they overflow it). It counts exactly only when fewer than
// want are left by bytes.
func (b *Builder) room(req Request, system string, want int) int {
	room := req.PromptRoom() - 4*(len(req.Messages)+3) - req.Reserve
	// Every token is at least one byte: when the bytes fit, so do the
	// tokens, and long histories need not be counted on every chat.
	used := len(system)
	for _, h := range req.Held {
		used += len(h)
	}
	for _, m := range req.Messages {
		if m.Role != "system" {
			used += len(m.Content)
		}
	}
	if room-used < want {
		// Count only as far as it matters: once the request fills the
		// room, a huge message costs no more than a full window.
		used = b.countAtMost(system, room)
		for _, h := range req.Held {
			if used <= room {
				used += b.countAtMost(h, room-used)
			}
		}
		for _, m := range req.Messages {
			if used > room {
				break
			}
			if m.Role != "system" {
				used += b.countAtMost(m.Content, room-used)
			}
		}
	}
	return room - used
}

func (b *Builder) count(s string) int {
	if b.tokens == nil {
		return (len(s) + 3) / 4
	}
	return b.tokens.Count(s)
}

// fixed counts a text the builder writes itself: an intro, a header's
// shape. Each is counted once.
func (b *Builder) fixed(s string) int {
	if b.tokens == nil {
		return (len(s) + 3) / 4
	}
	return b.tokens.CountFixed(s)
}

// countAtMost counts s's tokens, stopping past limit (see
// text.Tokenizer.CountAtMost).
func (b *Builder) countAtMost(s string, limit int) int {
	return text.CountAtMost(b.tokens, s, limit)
}
