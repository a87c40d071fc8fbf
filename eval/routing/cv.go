package routing

import (
	"bytes"
	"context"
	"fmt"

	"github.com/vera-proxy/vera/eval"
	"github.com/vera-proxy/vera/proxy/tier"
	"github.com/vera-proxy/vera/proxy/tier/learn"
)

// CVReport is what `vera eval routing --cv K` prints: the learned stage's
// grouped K-fold cross-validation on the corpus (each fold's model tuned
// and trained on the other folds alone), the labels' agreement, and the
// shipped router on the older set, which it was never trained on.
type CVReport struct {
	Method   string  `json:"method"`
	CV       int     `json:"cv"`
	Queries  int     `json:"queries"`
	Accuracy float64 `json:"accuracy"`
	// StdError is the standard error of the folds' accuracies.
	StdError  float64                   `json:"std_error"`
	PerTier   map[string]*Score         `json:"per_tier"`
	PerLang   map[string]*Score         `json:"per_lang,omitempty"`
	Confusion map[string]map[string]int `json:"confusion"`
	Folds     []FoldScore               `json:"folds"`
	Agreement *Agreement                `json:"agreement,omitempty"`
	// Older is the shipped router (trained on the whole corpus) on the
	// older set, testdata/routing.jsonl.
	Older *Report `json:"older_set,omitempty"`
}

// FoldScore is one fold's accuracy and the hyperparameters its training
// chose.
type FoldScore struct {
	Queries  int          `json:"queries"`
	Accuracy float64      `json:"accuracy"`
	Params   learn.Params `json:"params"`
}

// Agreement compares the corpus's labels with a second, independent
// labelling of some of its lines.
type Agreement struct {
	Lines     int     `json:"lines"`
	Agreement float64 `json:"agreement"`
	Kappa     float64 `json:"kappa"`
}

// CrossValidate reports the learned stage's grouped k-fold
// cross-validation on examples.
func CrossValidate(examples []learn.Example, k int) (CVReport, error) {
	if k < 2 {
		return CVReport{}, fmt.Errorf("--cv wants 2 folds or more, not %d", k)
	}
	if g := learn.Groups(examples); g < learn.MinGroups(k) {
		return CVReport{}, fmt.Errorf("%d groups of labelled queries are too few for %d folds (want %d or more: each fold's training is cross-validated again to tune it)", g, k, learn.MinGroups(k))
	}
	cv := learn.CrossValidate(examples, k, learn.Grid)
	rep := CVReport{Method: fmt.Sprintf("grouped %d-fold cross-validation; hyperparameters tuned inside each fold by a grouped %d-fold cross-validation of its training part", k, max(k-1, 2)),
		CV: k, Queries: len(examples), PerLang: map[string]*Score{}, Folds: make([]FoldScore, k)}
	rep.PerTier, rep.Confusion = tierTables()
	right := make([]int, k)
	for i, e := range examples {
		ok := cv.Predicted[i] == e.Label
		if ok {
			right[cv.Fold[i]]++
		}
		rep.Folds[cv.Fold[i]].Queries++
		addTo(rep.PerTier, e.Label, ok)
		addTo(rep.PerLang, e.Lang, ok)
		rep.Confusion[e.Label][cv.Predicted[i]]++
	}
	total := 0
	var accs []float64
	for f := range rep.Folds {
		total += right[f]
		rep.Folds[f].Params = cv.Chosen[f]
		if rep.Folds[f].Queries > 0 {
			rep.Folds[f].Accuracy = float64(right[f]) / float64(rep.Folds[f].Queries)
			accs = append(accs, rep.Folds[f].Accuracy)
		}
	}
	rep.Accuracy = float64(total) / float64(rep.Queries)
	rep.StdError = eval.StdError(accs)
	return rep, nil
}

// Agree compares the labels of second with those of the same texts in
// corpus (lines of second that the corpus lacks are an error).
func Agree(corpus, second []learn.Example) (*Agreement, error) {
	label := map[string]string{}
	for _, e := range corpus {
		label[e.Text] = e.Label
	}
	var a, b []string
	for _, e := range second {
		l, ok := label[e.Text]
		if !ok {
			return nil, fmt.Errorf("second labelling: %q is not in the corpus", e.Text)
		}
		a, b = append(a, l), append(b, e.Label)
	}
	same := 0
	for i := range a {
		if a[i] == b[i] {
			same++
		}
	}
	return &Agreement{Lines: len(a), Agreement: float64(same) / float64(len(a)), Kappa: learn.Kappa(a, b)}, nil
}

// ReadExamples reads a labelled set for learning, its tiers checked.
func ReadExamples(data []byte) ([]learn.Example, error) {
	qs, err := Load(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	out := make([]learn.Example, len(qs))
	for i, q := range qs {
		out[i] = learn.Example{Text: q.Query, Label: string(q.Tier), Group: q.Group, Lang: q.Lang}
	}
	return out, nil
}

// Older scores r on the older set.
func Older(ctx context.Context, r *tier.Router, data []byte) (*Report, error) {
	qs, err := Load(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	rep := Run(ctx, r, qs, "none")
	return &rep, nil
}
