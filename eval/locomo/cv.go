package locomo

import (
	"context"
	"fmt"
	"slices"

	"github.com/vera-proxy/vera/eval"
	"github.com/vera-proxy/vera/memory"
	"github.com/vera-proxy/vera/text"
)

// Grid is the retrieval choices CrossValidate chooses among: how many of
// the best hits bring the turns around them, a fixed number (8, the
// choice before cross-validation) or so many for each 1000 tokens of the
// budget; each with no share of the neighbours' scores (Options.Around
// -1, the choice before), then with each share of aroundShares.
var Grid = withAround([]Options{{ContextHits: 8}, {ContextHitsPer1000: 1}, {ContextHitsPer1000: 2}, {ContextHitsPer1000: 3}, {ContextHitsPer1000: 4}})

// aroundShares are the shares of its neighbours' lexical scores a turn
// may take in (memory.Builder.Around).
var aroundShares = []float64{0.3, 0.5, 0.7, 1}

// withAround is base without Around, then base with each of aroundShares.
func withAround(base []Options) []Options {
	var out []Options
	for _, a := range slices.Concat([]float64{-1}, aroundShares) {
		for _, o := range base {
			o.Around = a
			out = append(out, o)
		}
	}
	return out
}

// CV is a leave-one-conversation-out cross-validation: for each
// conversation, the options that score best on the others, scored on it.
type CV struct {
	Method string `json:"method"`
	Budget int    `json:"budget"`
	Result
	// StdError is the standard error of the folds' evidence recall.
	StdError float64 `json:"std_error"`
	Folds    []Fold  `json:"folds"`
	// Defaults is the builder's defaults on every question, and Before
	// the grid's first options (the choice before cross-validation), each
	// with the cross-validated choice's gain over it.
	Defaults Baseline `json:"defaults"`
	Before   Baseline `json:"before"`
	// WithoutAround is the same cross-validation over the grid's options
	// without Around, when the grid has others too, with the choice's
	// gain over it.
	WithoutAround *Baseline `json:"without_around,omitempty"`
}

// Baseline is fixed options on every question, and what the
// cross-validated choice gains over them, with the standard error of the
// folds' gains (paired: the same questions on both sides).
type Baseline struct {
	Result
	Gain         float64 `json:"gain"`
	GainStdError float64 `json:"gain_std_error"`
}

// Fold is one held-out conversation.
type Fold struct {
	HeldOut        string  `json:"held_out"`
	Questions      int     `json:"questions"`
	Chosen         Options `json:"chosen"`
	EvidenceRecall float64 `json:"evidence_recall"`
	Default        float64 `json:"defaults_evidence_recall"`
}

// CrossValidate seeds the conversations into store and cross-validates
// grid over them, leaving one conversation out at a time (at least two).
func CrossValidate(ctx context.Context, convs []*Conversation, store memory.Store, embedder memory.Embedder, tok *text.Tokenizer, budget int, grid []Options) (CV, error) {
	if len(convs) < 2 {
		return CV{}, fmt.Errorf("cross-validation leaves one conversation out: give two or more, not %d", len(convs))
	}
	if err := seed(ctx, convs, store, embedder, tok); err != nil {
		return CV{}, err
	}
	// scores[o][c]: option o on conversation c; the defaults last.
	options := slices.Concat(grid, []Options{{}})
	scores := make([][]score, len(options))
	for o, opt := range options {
		scores[o] = make([]score, len(convs))
		for c, conv := range convs {
			s, err := scoreConversation(ctx, builder(store, embedder, tok, budget, opt), conv)
			if err != nil {
				return CV{}, err
			}
			if s.questions == 0 {
				return CV{}, fmt.Errorf("%s: no questions of categories 1-4 with evidence", conv.Name)
			}
			scores[o][c] = s
		}
	}
	cv := CV{Method: fmt.Sprintf("leave one conversation out, %d times: the options of the grid that score best on the other %d conversations (their questions pooled), scored on the one left out", len(convs), len(convs)-1),
		Budget: budget}
	var held score
	var recalls []float64
	chosen := choose(scores[:len(grid)])
	for c, conv := range convs {
		s, d := scores[chosen[c]][c], scores[len(grid)][c]
		held.add(s)
		cv.Folds = append(cv.Folds, Fold{HeldOut: conv.Name, Questions: s.questions, Chosen: grid[chosen[c]],
			EvidenceRecall: round(s.recall / float64(s.questions)), Default: round(d.recall / float64(d.questions))})
		recalls = append(recalls, s.recall/float64(s.questions))
	}
	cv.Result, cv.StdError = held.result(), round(eval.StdError(recalls))
	// baseline is option o on every question, against the choice.
	baseline := func(o int) Baseline {
		var all score
		var gains []float64
		for c := range convs {
			s, b := scores[chosen[c]][c], scores[o][c]
			all.add(b)
			gains = append(gains, (s.recall-b.recall)/float64(s.questions))
		}
		r := all.result()
		return Baseline{Result: r, Gain: round(cv.EvidenceRecall - r.EvidenceRecall), GainStdError: round(eval.StdError(gains))}
	}
	cv.Defaults, cv.Before = baseline(len(grid)), baseline(0)
	var without []int
	for o, opt := range grid {
		if opt.Around < 0 {
			without = append(without, o)
		}
	}
	if len(without) > 0 && len(without) < len(grid) {
		sub := make([][]score, len(without))
		for i, o := range without {
			sub[i] = scores[o]
		}
		var all score
		var gains []float64
		for c, o := range choose(sub) {
			s, b := scores[chosen[c]][c], sub[o][c]
			all.add(b)
			gains = append(gains, (s.recall-b.recall)/float64(s.questions))
		}
		r := all.result()
		cv.WithoutAround = &Baseline{Result: r, Gain: round(cv.EvidenceRecall - r.EvidenceRecall), GainStdError: round(eval.StdError(gains))}
	}
	return cv, nil
}

// choose returns, for each conversation c, the option o whose scores[o]
// on the other conversations (their questions pooled) recall the most:
// the first of equals.
func choose(scores [][]score) []int {
	if len(scores) == 0 {
		return nil
	}
	out := make([]int, len(scores[0]))
	for c := range out {
		best, bestRecall := 0, -1.0
		for o := range scores {
			var train score
			for other := range scores[o] {
				if other != c {
					train.add(scores[o][other])
				}
			}
			if r := train.recall / float64(train.questions); r > bestRecall {
				best, bestRecall = o, r
			}
		}
		out[c] = best
	}
	return out
}
