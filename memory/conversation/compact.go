package conversation

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"time"

	"github.com/vera-proxy/vera/memory"
)

// A conversation longer than its window is compacted, not cut by Ollama:
// once its prompt passes CompactAt of the window, a summary of its oldest
// turns is written in the background (Compact, after the answer went
// out), and from the next turn on the plan carries that summary at the
// end of its system message in place of those turns (memory.Context's
// KeepFrom), the latest turns verbatim after it. That is one rebuild;
// later turns keep the new prefix until the next compaction, which
// summarises the summary and the turns since. A summary not ready when
// the conversation no longer fits never delays a chat: the oldest turns
// are left out, and recall brings back what the question needs.

// Tokenizer counts tokens (text.Tokenizer). CountAtMost stops counting
// once past limit: a 10 MB message costs no more than a window.
type Tokenizer interface {
	CountAtMost(s string, limit int) int
	Head(s string, n int) string
}

// summaryIntro marks the summary in the system message.
const summaryIntro = "Summary of the earlier part of this conversation (its messages are not shown here):"

// compaction is a conversation's: the summary in its plan and where the
// turns it forwards start, and the summary under way or ready.
type compaction struct {
	Summary string
	// Covered: the summary covers the turns before the Covered-th user
	// message; KeepFrom: forwarded turns start at that user message (at
	// least Covered: turns left out while their summary is written).
	Covered, KeepFrom int
	job               *summaryJob
	running           bool
	// stop interrupts the summary under way: the conversation's next
	// request must not wait behind it in a one-request-at-a-time Ollama.
	stop        context.CancelFunc
	interrupted bool
	// arrived is when the conversation's latest request came.
	arrived time.Time
	// grace is how long after an answer its summary starts (0:
	// summaryGrace).
	grace time.Duration
	// digest identifies the messages before KeepFrom (coveredDigest).
	digest string
	ready  *summaryJob // written, for the next turn's plan
}

// count counts s's tokens, stopping past limit (text.Tokenizer keeps
// long texts' counts: a first turn's prompt is measured twice, and a
// conversation's older messages at every turn).
func (cs *Set) count(s string, limit int) int {
	if cs.Tokens == nil {
		return min((len(s)+3)/4, limit+1)
	}
	return cs.Tokens.CountAtMost(s, max(limit, 0))
}

// tail returns msgs without the turns before the keep-th user message;
// what comes before the first user message (system and developer
// instructions) stays. msgs when there are fewer.
func tail(msgs []memory.Message, keep int) []memory.Message {
	if keep <= 0 {
		return msgs
	}
	lead, users := -1, 0
	for i, m := range msgs {
		if m.Role != "user" {
			continue
		}
		if lead < 0 {
			lead = i
		}
		if users == keep {
			return append(msgs[:lead:lead], msgs[i:]...)
		}
		users++
	}
	return msgs
}

// head returns the messages from the first user message up to the n-th
// (from 0), in a slice of its own.
func head(msgs []memory.Message, n int) []memory.Message {
	var out []memory.Message
	users := 0
	for _, m := range msgs {
		if m.Role == "user" {
			if users == n {
				break
			}
			users++
		}
		if users > 0 {
			out = append(out, m)
		}
	}
	return out
}

// coveredDigest identifies the messages before the keep-th user message:
// a compaction stands only while the request still starts with them (an
// edit of an earlier message, or another branch of the chat, undoes it).
func coveredDigest(msgs []memory.Message, keep int) string {
	h := sha256.New()
	users := 0
	for _, m := range msgs {
		if m.Role == "user" {
			if users == keep {
				break
			}
			users++
		}
		writeMessage(h, m)
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// tailRequest is mreq recalling and sized for the turns forwarded from
// keep on.
func tailRequest(mreq memory.Request, keep int) memory.Request {
	mreq.Messages = tail(mreq.Messages, keep)
	if mreq.Recall != nil {
		mreq.Recall = tail(mreq.Recall, keep)
	}
	return mreq
}

// over reports whether what a request forwards with mc passes limit
// tokens. Every token is at least a byte, so a prompt with fewer bytes
// is not counted; a longer one is counted only as far as limit.
func (cs *Set) over(mc *memory.Context, msgs []memory.Message, limit int) bool {
	var parts []string
	bytes, known := 0, 0
	add := func(s string) {
		parts = append(parts, s)
		bytes += len(s) + 4
	}
	// The builder's figures for what it made: counting the memories it
	// injected again would take longer than recalling them.
	switch {
	case mc.System == "":
	case mc.SystemTokens > 0:
		known += mc.SystemTokens + 4
	default:
		add(mc.System)
	}
	if mc.RecentTokens > 0 {
		known += mc.RecentTokens
	} else {
		for _, m := range mc.Recent {
			add(m.Content)
		}
	}
	for _, b := range mc.Blocks {
		add(b.Text)
	}
	for i, m := range tail(msgs, mc.KeepFrom) {
		if i < mc.SystemReplaces && m.Role == "system" {
			continue // in mc.System
		}
		add(m.Content)
	}
	if known+bytes <= limit {
		return false
	}
	n := known
	if n > limit {
		return true
	}
	for _, p := range parts {
		if n += cs.count(p, limit-n) + 4; n > limit {
			return true
		}
	}
	return false
}

// weight is about how many tokens the turns from the from-th to the
// to-th user message (excluded) take, counted as far as limit.
func (cs *Set) weight(msgs []memory.Message, from, to, limit int) int {
	n, users := 0, 0
	for _, m := range msgs {
		if m.Role == "user" {
			users++
		}
		if users > from && users <= to && n <= limit {
			n += cs.count(m.Content, limit-n) + 4
		}
	}
	return n
}

// cutFor is the first user turn (its ordinal) from which msgs's turns
// take at most budget tokens; the last user turn at least.
func (cs *Set) cutFor(msgs []memory.Message, budget int) int {
	users := 0
	for _, m := range msgs {
		if m.Role == "user" {
			users++
		}
	}
	cut, used, ordinal := users-1, 0, users
	for i := len(msgs) - 1; i >= 0 && ordinal > 0; i-- {
		if msgs[i].Role == "system" {
			continue
		}
		used += cs.count(msgs[i].Content, budget-used) + 4
		if msgs[i].Role != "user" {
			continue
		}
		ordinal--
		if used > budget {
			break
		}
		cut = ordinal
	}
	return max(cut, 0)
}

// withSummary is mc forwarding the turns from keep on, with the summary
// of the covered turns before at the end of its system message.
func (cs *Set) withSummary(mc *memory.Context, mreq memory.Request, keep, covered int, summary string) *memory.Context {
	if keep <= 0 {
		return mc
	}
	out := *mc
	out.KeepFrom = keep
	if summary = memory.Frame(strings.TrimSpace(summary)); summary != "" {
		out.Compacted = covered
		sys := out.System
		if sys == "" && out.SystemReplaces == 0 {
			// vera adds a system message: it carries the Modelfile's.
			sys = strings.TrimSpace(mreq.ModelSystem)
		}
		out.System = strings.TrimLeft(sys+"\n\n"+summaryIntro+"\n"+summary, "\n")
		if out.SystemTokens > 0 {
			out.SystemTokens += cs.count(summaryIntro+"\n"+summary, len(out.System)) + 2
		}
	}
	return &out
}

// recallCompacted recalls a conversation's layers for the turns it
// forwards, with its summary; when even those overflow the window, the
// oldest of them are left out too (keep moves on) and recalled again. A
// compacted conversation gets no recent layer (its latest turns are its
// own, or in its summary), and half the room is left for it to grow in.
func (cs *Set) recallCompacted(mreq memory.Request, st step, keep, covered int, summary string) (*memory.Context, int) {
	if keep == 0 {
		mc := cs.recall(st, mreq)
		if cs.CompactAt <= 0 || mc.Err != nil || !cs.over(mc, mreq.Messages, mreq.PromptRoom()) {
			return mc, 0
		}
	}
	r := mreq.PromptRoom()
	if cut := cs.cutFor(mreq.Messages, int(float64(r)*cs.CompactAt/3)); cs.over(&memory.Context{KeepFrom: keep}, mreq.Messages, r/2) && cut > keep {
		keep = cut
	}
	tr := tailRequest(mreq, keep)
	if n := min(covered, keep); n > 0 && summary != "" {
		// The model sees the turns the summary stands for in it: they
		// are kept out of recall as the turns forwarded are. Turns left
		// out without a summary may be recalled when a question needs
		// them.
		src := mreq.Recall
		if src == nil {
			src = mreq.Messages
		}
		tr.Recall = append(head(src, n), tail(src, keep)...)
	}
	tr.SemanticOnly = true
	tr.Reserve = max(tr.Reserve, r/2)
	return cs.withSummary(cs.recall(st, tr), mreq, keep, covered, summary), keep
}

// due plans the summary a conversation needs: when the prompt it
// forwards passes CompactAt of the room its window leaves it, of the
// turns since the last summary but the last few, which stay verbatim; and
// of turns left out without a summary (the conversation overflowed first).
func (cs *Set) due(cv *conversation, msgs []memory.Message, mreq memory.Request, mc *memory.Context) {
	if cs.CompactAt <= 0 || cv == nil || mc.Err != nil {
		return
	}
	r := mreq.PromptRoom()
	keepBudget := int(float64(r) * cs.CompactAt / 3)
	upTo := 0
	// Only when the conversation's own turns weigh: a long system layer
	// alone would have every turn summarised again.
	var kept int
	cs.locked(func() { kept = cv.Compaction.KeepFrom })
	if cs.over(&memory.Context{KeepFrom: kept, SystemReplaces: len(msgs)}, msgs, 2*keepBudget) && cs.over(mc, msgs, int(cs.CompactAt*float64(r))) {
		upTo = cs.cutFor(msgs, keepBudget)
	}
	w := mreq.Window()
	var covered int
	cs.locked(func() { covered = cv.Compaction.Covered })
	if upTo == 0 && kept > covered && cs.weight(msgs, covered, kept, keepBudget/2) < keepBudget/2 {
		// Turns left out of an overflowing prompt are summarised a few
		// at a time, not one by one.
		return
	}
	var busy bool
	var prev string
	cs.locked(func() {
		c := &cv.Compaction
		upTo = max(upTo, c.KeepFrom)
		busy = c.job != nil || c.running || c.ready != nil || upTo <= c.Covered
		covered, prev = c.Covered, c.Summary
	})
	if busy {
		return
	}
	job := &summaryJob{upTo: upTo, window: w, prev: prev, pieces: cs.summaryPieces(msgs, covered, upTo, w)}
	cs.locked(func() {
		c := &cv.Compaction
		if c.job != nil || c.running || c.ready != nil || c.Covered != covered {
			return // planned meanwhile
		}
		c.job = job
	})
}

// takeReady moves a written summary into the conversation's compaction,
// reporting whether there was one: the plan is then rebuilt.
func (cs *Set) takeReady(cv *conversation) (ok bool) {
	cs.locked(func() {
		c := &cv.Compaction
		if c.ready != nil && c.ready.upTo > c.Covered {
			c.Summary, c.Covered, ok = c.ready.text, c.ready.upTo, true
			c.KeepFrom = max(c.KeepFrom, c.Covered)
		}
		c.ready = nil
	})
	return ok
}

// checkCompaction undoes a conversation's compaction when the request no
// longer starts with the messages it stands for (an edit of an earlier
// message, another branch of the chat), or carries no history of its own
// (a chain by previous_response_id): its summary would speak of turns
// that are not there.
func (cs *Set) checkCompaction(cv *conversation, at place, msgs []memory.Message) {
	cs.locked(func() {
		c := &cv.Compaction
		if c.KeepFrom == 0 && c.Covered == 0 && c.job == nil && c.ready == nil {
			return
		}
		if !at.Chained && at.User >= c.KeepFrom && coveredDigest(msgs, c.KeepFrom) == c.digest {
			return
		}
		if c.stop != nil {
			c.stop()
		}
		*c = compaction{arrived: c.arrived}
		cv.Plan = nil // rebuilt afresh
	})
}
