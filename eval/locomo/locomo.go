// Package locomo measures memory quality on LoCoMo conversations (Maharana
// et al., ACL 2024): it stores each conversation as turns, then for every
// question builds the semantic layer under a token budget and checks how
// much of the question's evidence made it in.
package locomo

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/vera-proxy/vera/memory"
	"github.com/vera-proxy/vera/text"
)

// Conversation is one LoCoMo file.
type Conversation struct {
	Name     string
	SpeakerA string
	Sessions []Session
	QA       []Question
}

// Session is one dated session of messages.
type Session struct {
	Time     time.Time
	Messages []Message
}

// Message is one message of a session.
type Message struct {
	Speaker string `json:"speaker"`
	DiaID   string `json:"dia_id"`
	Text    string `json:"text"`
	Caption string `json:"blip_caption"`
}

// Question is one benchmark question.
type Question struct {
	Question string   `json:"question"`
	Evidence []string `json:"evidence"`
	Category int      `json:"category"`
}

var sessionKey = regexp.MustCompile(`^session_(\d+)$`)

// Load reads a LoCoMo JSON file.
func Load(path string) (*Conversation, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if c, ok := raw["conversation"]; ok { // the upstream file nests it
		qa := raw["qa"]
		if err := json.Unmarshal(c, &raw); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		raw["qa"] = qa
	}
	c := &Conversation{Name: strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))}
	_ = json.Unmarshal(raw["speaker_a"], &c.SpeakerA)
	if err := json.Unmarshal(raw["qa"], &c.QA); err != nil {
		return nil, fmt.Errorf("%s: qa: %w", path, err)
	}
	var nums []int
	for k := range raw {
		if m := sessionKey.FindStringSubmatch(k); m != nil {
			n, _ := strconv.Atoi(m[1])
			nums = append(nums, n)
		}
	}
	sort.Ints(nums)
	for _, n := range nums {
		var s Session
		if err := json.Unmarshal(raw[fmt.Sprintf("session_%d", n)], &s.Messages); err != nil {
			return nil, fmt.Errorf("%s: session_%d: %w", path, n, err)
		}
		var date string
		_ = json.Unmarshal(raw[fmt.Sprintf("session_%d_date_time", n)], &date)
		s.Time, err = time.Parse("3:04 pm on 2 January, 2006", date)
		if err != nil {
			return nil, fmt.Errorf("%s: session_%d date %q: %w", path, n, date, err)
		}
		c.Sessions = append(c.Sessions, s)
	}
	if len(c.Sessions) == 0 {
		return nil, fmt.Errorf("%s: no sessions: not a LoCoMo conversation", path)
	}
	return c, nil
}

// Turns turns the conversation into stored memories: consecutive messages
// form a user/assistant pair (a session's odd last message is paired with
// an empty reply marker), each with the session date and the dialogue ids
// it holds.
func (c *Conversation) Turns(ns string, tok *text.Tokenizer) []memory.Memory {
	var out []memory.Memory
	say := func(m Message) string {
		s := m.Speaker + ": " + m.Text
		if m.Caption != "" {
			s += " [photo: " + m.Caption + "]"
		}
		return s
	}
	for _, s := range c.Sessions {
		for i := 0; i < len(s.Messages); i += 2 {
			u := s.Messages[i]
			ids := []any{u.DiaID}
			reply := "(no reply)"
			if i+1 < len(s.Messages) {
				reply = say(s.Messages[i+1])
				ids = append(ids, s.Messages[i+1].DiaID)
			}
			m := memory.Memory{
				ID: memory.NewID(), Namespace: ns, Type: memory.Raw,
				Text: memory.FormatExchange(say(u), reply),
				Time: s.Time.Add(time.Duration(i) * time.Minute), Model: "locomo",
				Metadata: map[string]any{"dia_ids": ids},
			}
			m.Tokens = tok.Count(m.Text)
			out = append(out, m)
		}
	}
	return out
}

// Result is the benchmark's output.
type Result struct {
	Questions      int     `json:"questions"`
	EvidenceRecall float64 `json:"evidence_recall"`
	AllEvidence    float64 `json:"all_evidence"`
	TokensMean     float64 `json:"tokens_mean"`
	P50MS          float64 `json:"p50_ms"`
	P95MS          float64 `json:"p95_ms"`
}

// Run stores the conversations in store (one namespace each, embedded with
// embedder when it is not nil) and scores every question of categories
// 1-4 that names its evidence.
func Run(ctx context.Context, convs []*Conversation, store memory.Store, embedder memory.Embedder, tok *text.Tokenizer, budget int) (Result, error) {
	if err := seed(ctx, convs, store, embedder, tok); err != nil {
		return Result{}, err
	}
	var total score
	for _, c := range convs {
		s, err := scoreConversation(ctx, builder(store, embedder, tok, budget, Options{}), c)
		if err != nil {
			return Result{}, err
		}
		total.add(s)
	}
	if total.questions == 0 {
		return Result{}, fmt.Errorf("no questions of categories 1-4 with evidence")
	}
	return total.result(), nil
}

// Options are the retrieval choices that cross-validation chooses among
// (memory.Builder's fields of the same names); zero values are the
// builder's defaults.
type Options struct {
	ContextHits        int     `json:"context_hits,omitempty"`
	ContextHitsPer1000 float64 `json:"context_hits_per_1000,omitempty"`
	// Around is memory.Builder.Around: 0 its default, -1 none.
	Around float64 `json:"around,omitempty"`
}

// builder is a builder of the semantic layer alone, with o.
func builder(store memory.Store, embedder memory.Embedder, tok *text.Tokenizer, budget int, o Options) *memory.Builder {
	b := memory.NewBuilder(store, embedder, tok)
	b.SemanticBudget = budget
	b.EmbedTimeout = time.Minute
	b.ContextHits, b.ContextHitsPer1000, b.Around = o.ContextHits, o.ContextHitsPer1000, o.Around
	return b
}

// score sums a run's figures over questions.
type score struct {
	questions, all, tokens int
	recall                 float64
	lat                    []time.Duration
}

func (s *score) add(o score) {
	s.questions += o.questions
	s.all += o.all
	s.tokens += o.tokens
	s.recall += o.recall
	s.lat = append(s.lat, o.lat...)
}

func (s score) result() Result {
	n := float64(s.questions)
	res := Result{Questions: s.questions, EvidenceRecall: round(s.recall / n), AllEvidence: round(float64(s.all) / n), TokensMean: round(float64(s.tokens) / n)}
	lat := slices.Clone(s.lat)
	slices.Sort(lat)
	res.P50MS = round(ms(lat[len(lat)/2]))
	res.P95MS = round(ms(lat[min(len(lat)-1, len(lat)*95/100)]))
	return res
}

// scoreConversation scores c's questions of categories 1-4 that name
// their evidence, with b.
func scoreConversation(ctx context.Context, b *memory.Builder, c *Conversation) (score, error) {
	var s score
	for _, q := range c.QA {
		if q.Category < 1 || q.Category > 4 || len(q.Evidence) == 0 {
			continue
		}
		start := time.Now()
		mc := b.Recall(ctx, memory.Request{
			Namespace: c.Name, SemanticOnly: true, ContextLength: 1 << 20,
			Messages: []memory.Message{{Role: "user", Content: q.Question}},
		})
		s.lat = append(s.lat, time.Since(start))
		if mc.Err != nil {
			return s, mc.Err
		}
		found := evidenceFound(mc, q.Evidence)
		s.recall += float64(found) / float64(len(q.Evidence))
		if found == len(q.Evidence) {
			s.all++
		}
		s.tokens += mc.SemanticTokens
		s.questions++
	}
	return s, nil
}

// seed stores every conversation's turns, embedded when there is an
// embedder, in batches of 64.
func seed(ctx context.Context, convs []*Conversation, store memory.Store, embedder memory.Embedder, tok *text.Tokenizer) error {
	for _, c := range convs {
		turns := c.Turns(c.Name, tok)
		for i := 0; i < len(turns); i += 64 {
			batch := turns[i:min(i+64, len(turns))]
			if embedder != nil {
				texts := make([]string, len(batch))
				for j, m := range batch {
					texts[j] = m.Text
				}
				vecs, err := embedder.Embed(ctx, texts)
				if err != nil {
					return fmt.Errorf("embedding %s: %w", c.Name, err)
				}
				for j := range batch {
					batch[j].Vector = vecs[j]
				}
			}
			if err := store.Upsert(ctx, batch...); err != nil {
				return err
			}
		}
	}
	return nil
}

// evidenceFound counts the question's evidence turns that recall
// injected.
func evidenceFound(mc *memory.Context, evidence []string) int {
	got := map[string]bool{}
	for _, h := range mc.Semantic {
		ids, _ := h.Metadata["dia_ids"].([]any)
		for _, id := range ids {
			if s, ok := id.(string); ok {
				got[s] = true
			}
		}
	}
	found := 0
	for _, e := range evidence {
		// A few evidence ids carry spaces or lists ("D8:6; D9:17").
		for _, id := range strings.FieldsFunc(e, func(r rune) bool { return r == ';' || r == ',' || r == ' ' }) {
			if got[id] {
				found++
				break
			}
		}
	}
	return found
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// round keeps four decimals.
func round(x float64) float64 { return math.Round(x*1e4) / 1e4 }
