// Package routing scores the tier classifier (proxy/tier) on labelled
// queries: accuracy per tier, per language and per split, and a confusion
// matrix (`vera eval routing`).
package routing

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/vera-proxy/vera/proxy/tier"
	"github.com/vera-proxy/vera/proxy/tier/learn"
)

// Query is one labelled query: its text in "text", or in
// "query" as the shipped set writes it.
type Query struct {
	Text  string    `json:"text"`
	Query string    `json:"query"`
	Tier  tier.Tier `json:"tier"`
	Lang  string    `json:"lang,omitempty"`
	Split string    `json:"split,omitempty"` // tune | holdout
	// Group: queries that say the same thing share one (the corpus).
	Group string `json:"group,omitempty"`
}

// Load reads labelled queries, one JSON object a line; blank lines are
// skipped, a bad line is an error naming it.
func Load(r io.Reader) ([]Query, error) {
	var out []Query
	err := learn.EachLine(r, func(n int, line []byte) error {
		var q Query
		if err := json.Unmarshal(line, &q); err != nil {
			return fmt.Errorf("line %d: not a JSON object: %v", n, err)
		}
		switch q.Tier {
		case tier.Light, tier.Medium, tier.Complex:
		default:
			return fmt.Errorf("line %d: tier %q is not light, medium or complex", n, q.Tier)
		}
		if q.Query == "" {
			q.Query = q.Text
		}
		if strings.TrimSpace(q.Query) == "" {
			return fmt.Errorf("line %d: no text (want {\"text\":\"...\",\"tier\":\"light\"})", n)
		}
		out = append(out, q)
		return nil
	})
	return out, err
}

// Score is the accuracy of one slice of the set; N (the report's name) and
// Queries are the same count.
type Score struct {
	N        int     `json:"n"`
	Queries  int     `json:"queries"`
	Correct  int     `json:"correct"`
	Accuracy float64 `json:"accuracy"`
}

func (s *Score) add(ok bool) {
	s.N++
	s.Queries++
	if ok {
		s.Correct++
	}
	s.Accuracy = float64(s.Correct) / float64(s.Queries)
}

// Report is what `vera eval routing` prints.
type Report struct {
	// Queries and Accuracy are the whole set's, as in Overall.
	Queries  int               `json:"queries"`
	Accuracy float64           `json:"accuracy"`
	Embedder string            `json:"embedder"`
	Overall  Score             `json:"overall"`
	PerTier  map[string]*Score `json:"per_tier"`
	PerLang  map[string]*Score `json:"per_lang,omitempty"`
	PerSplit map[string]*Score `json:"per_split,omitempty"`
	// Confusion counts answers: confusion[want][got].
	Confusion map[string]map[string]int `json:"confusion"`
	// By counts what decided: rule, similarity, default.
	By map[string]int `json:"decided_by"`
}

// Run classifies every query with r.
func Run(ctx context.Context, r *tier.Router, qs []Query, embedder string) Report {
	rep := Report{Embedder: embedder, PerLang: map[string]*Score{}, PerSplit: map[string]*Score{}, By: map[string]int{}}
	rep.PerTier, rep.Confusion = tierTables()
	for _, q := range qs {
		d := r.Classify(ctx, q.Query, false)
		ok := d.Tier == q.Tier
		rep.Overall.add(ok)
		rep.PerTier[string(q.Tier)].add(ok)
		rep.Confusion[string(q.Tier)][string(d.Tier)]++
		rep.By[d.By]++
		addTo(rep.PerLang, q.Lang, ok)
		addTo(rep.PerSplit, q.Split, ok)
	}
	rep.Queries, rep.Accuracy = rep.Overall.Queries, rep.Overall.Accuracy
	return rep
}

// tierTables returns a score per tier and a confusion matrix, every tier
// in both, at zero.
func tierTables() (map[string]*Score, map[string]map[string]int) {
	scores, confusion := map[string]*Score{}, map[string]map[string]int{}
	for _, want := range tier.Tiers {
		scores[string(want)] = &Score{}
		confusion[string(want)] = map[string]int{}
		for _, got := range tier.Tiers {
			confusion[string(want)][string(got)] = 0
		}
	}
	return scores, confusion
}

func addTo(m map[string]*Score, key string, ok bool) {
	if key == "" {
		return
	}
	if m[key] == nil {
		m[key] = &Score{}
	}
	m[key].add(ok)
}
