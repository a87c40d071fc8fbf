package learn

import (
	"cmp"
	"hash/fnv"
	"math"
	"slices"
)

// Grid is the hyperparameters Tune chooses among.
var Grid = func() []Params {
	var g []Params
	for _, chars := range []bool{false, true} {
		for _, l2 := range []float64{1e-4, 1e-3, 1e-2} {
			p := DefaultParams
			p.CharGrams, p.L2 = chars, l2
			g = append(g, p)
		}
	}
	return g
}()

// Folds assigns each example one of k folds, by group: a group's examples
// (a query, its paraphrases and translations) share a fold, so a fold
// never tests what its training saw in other words. Groups are dealt to
// the folds label by label (stratified: every fold gets its share of each
// tier), in the order of a hash of their names: fixed, and not the file's.
func Folds(examples []Example, k int) []int {
	type group struct {
		name, label string
		hash        uint32
	}
	var groups []group
	seen := map[string]bool{}
	for _, e := range examples {
		g := groupOf(e)
		if seen[g] {
			continue
		}
		seen[g] = true
		h := fnv.New32a()
		h.Write([]byte(g))
		groups = append(groups, group{g, e.Label, h.Sum32()})
	}
	slices.SortFunc(groups, func(a, b group) int {
		return cmp.Or(cmp.Compare(a.label, b.label), cmp.Compare(a.hash, b.hash), cmp.Compare(a.name, b.name))
	})
	fold := map[string]int{}
	for i, g := range groups {
		fold[g.name] = i % k
	}
	out := make([]int, len(examples))
	for i, e := range examples {
		out[i] = fold[groupOf(e)]
	}
	return out
}

// groupOf is an example's group: its own line when it names none.
func groupOf(e Example) string {
	if e.Group != "" {
		return e.Group
	}
	return "line:" + e.Text
}

// Tune returns the params of grid that classify examples best in a
// grouped k-fold cross-validation of examples alone (the first of equals).
func Tune(examples []Example, k int, grid []Params) Params {
	folds := Folds(examples, k)
	best, bestAcc := grid[0], -1.0
	for _, p := range grid {
		pred := outOfFold(examples, folds, k, func(train []Example) *Model { return Train(train, p) })
		right := 0
		for i, e := range examples {
			if pred[i] == e.Label {
				right++
			}
		}
		if acc := float64(right) / float64(len(examples)); acc > bestAcc {
			best, bestAcc = p, acc
		}
	}
	return best
}

// CV is a cross-validation's outcome: each example's label as predicted
// by the model that did not see its group, and the params each fold's
// training chose.
type CV struct {
	Predicted []string
	Fold      []int
	Chosen    []Params
}

// Groups counts the examples' groups (a line without one is its own).
func Groups(examples []Example) int {
	seen := map[string]bool{}
	for _, e := range examples {
		seen[groupOf(e)] = true
	}
	return len(seen)
}

// MinGroups is the fewest groups a k-fold cross-validation with tuning
// needs: every inner fold of every outer fold's training part gets one.
func MinGroups(k int) int { return k * max(k-1, 2) }

// CrossValidate runs a grouped k-fold cross-validation of examples, the
// hyperparameters tuned inside each fold (an inner grouped k-1 fold
// cross-validation of its training part): no figure comes from data the
// model or its tuning saw.
func CrossValidate(examples []Example, k int, grid []Params) CV {
	cv := CV{Predicted: make([]string, len(examples)), Fold: Folds(examples, k), Chosen: make([]Params, k)}
	for f := range k {
		var train []Example
		for i, e := range examples {
			if cv.Fold[i] != f {
				train = append(train, e)
			}
		}
		p := Tune(train, max(k-1, 2), grid)
		cv.Chosen[f] = p
		m := Train(train, p)
		for i, e := range examples {
			if cv.Fold[i] == f {
				cv.Predicted[i], _, _ = m.Predict(e.Text)
			}
		}
	}
	return cv
}

// outOfFold predicts each example with the model train makes of the other
// folds.
func outOfFold(examples []Example, folds []int, k int, train func([]Example) *Model) []string {
	pred := make([]string, len(examples))
	for f := range k {
		var part []Example
		for i, e := range examples {
			if folds[i] != f {
				part = append(part, e)
			}
		}
		m := train(part)
		for i, e := range examples {
			if folds[i] == f {
				pred[i], _, _ = m.Predict(e.Text)
			}
		}
	}
	return pred
}

// GenerateFolds is how many folds Generate tunes with.
const GenerateFolds = 5

// Generate makes the shipped model: hyperparameters tuned by a grouped
// cross-validation of all the examples, then trained on all of them.
func Generate(examples []Example) *Model {
	return Train(examples, Tune(examples, GenerateFolds, Grid))
}

// Kappa is Cohen's κ between two labellings of the same items: their
// agreement beyond what their label frequencies give by chance (1: they
// agree on all, 0: as by chance).
func Kappa(a, b []string) float64 {
	if len(a) != len(b) || len(a) == 0 {
		return math.NaN()
	}
	n := float64(len(a))
	agree := 0.0
	ca, cb := map[string]float64{}, map[string]float64{}
	for i := range a {
		if a[i] == b[i] {
			agree++
		}
		ca[a[i]]++
		cb[b[i]]++
	}
	po, pe := agree/n, 0.0
	for l, x := range ca {
		pe += x / n * cb[l] / n
	}
	if pe == 1 {
		return 1
	}
	return (po - pe) / (1 - pe)
}
