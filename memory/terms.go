package memory

import (
	"strings"
	"unicode"
)

// Terms splits text into the terms of lexical (BM25) search: lower-cased
// words and numbers, English stop words dropped, plurals and common verb
// endings folded so "paints", "painted" and "painting" meet. Both backends
// use it (Qdrant's sparse vectors are built from it too), so lexical
// matching behaves the same everywhere.
func Terms(text string) []string {
	var out []string
	start := -1
	flush := func(end int) {
		if start < 0 {
			return
		}
		w := strings.ToLower(text[start:end])
		start = -1
		if len(w) > 64 || stopWords[w] {
			return
		}
		if w = stem(w); w != "" {
			out = append(out, w)
		}
	}
	for i, r := range text {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			if start < 0 {
				start = i
			}
			continue
		}
		if r == '\'' || r == '’' { // don't, Caroline's: keep the stem only
			flush(i)
			continue
		}
		flush(i)
	}
	flush(len(text))
	return out
}

// stem folds the most common English inflections. It is deliberately
// light: over-stemming merges unrelated words and costs more than it wins
// on short chat messages.
func stem(w string) string {
	n := len(w)
	switch {
	case n > 4 && strings.HasSuffix(w, "ies"):
		return w[:n-3] + "y"
	case n > 5 && strings.HasSuffix(w, "ing"):
		return undouble(w[:n-3])
	case n > 4 && strings.HasSuffix(w, "ed") && !strings.HasSuffix(w, "eed"):
		return undouble(w[:n-2])
	case n > 4 && (strings.HasSuffix(w, "sses") || strings.HasSuffix(w, "xes") || strings.HasSuffix(w, "ches") || strings.HasSuffix(w, "shes")):
		return w[:n-2]
	case n > 3 && strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss") && !strings.HasSuffix(w, "us") && !strings.HasSuffix(w, "is"):
		return w[:n-1]
	}
	return w
}

// undouble turns "runn" (from running) into "run"; an "e" dropped by the
// suffix (making → mak) is left dropped on both sides, which is enough for
// matching.
func undouble(w string) string {
	n := len(w)
	if n >= 3 && w[n-1] == w[n-2] && !strings.ContainsRune("aeiouls", rune(w[n-1])) {
		return w[:n-1]
	}
	return w
}

var stopWords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`a about above after again against all am an and any are aren as at
be because been before being below between both but by can cannot could couldn did didn do does
doesn doing don down during each few for from further had hadn has hasn have haven having he her
here hers herself him himself his how i if in into is isn it its itself just let ll me more most
mustn my myself no nor not now of off on once only or other ought our ours ourselves out over own
re s same shan she should shouldn so some such t than that the their theirs them themselves then
there these they this those through to too under until up ve very was wasn we were weren what when
where which while who whom why will with won would wouldn you your yours yourself yourselves d m o
y also get got oh yeah yes hey hi hello really just like well thanks thank okay ok much many lot
one`) {
		m[w] = true
	}
	return m
}()
