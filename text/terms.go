package text

import (
	"strings"
	"sync"
	"unicode"

	"github.com/kljensen/snowball/english"
	"github.com/kljensen/snowball/russian"
)

// TermsVersion numbers what Terms does. A store that keeps terms (Qdrant's
// sparse vectors) records it with each memory, and re-indexes memories
// written with another version.
const TermsVersion = 2

// Terms splits text into the terms of lexical (BM25) search: lower-cased
// words and numbers, stop words dropped (English and Russian), each word
// stemmed by the Snowball stemmer of its script (Porter2 for Latin
// letters, Russian for Cyrillic) so "paints", "painted" and "painting", or
// "переехала" and "переехать", meet. Numbers and words in other scripts
// are kept whole, so names and numbers match exactly. Both backends use it
// (Qdrant's sparse vectors are built from it too), so lexical matching
// behaves the same everywhere.
//
// Terms stems every word afresh; a Stemmer's Terms gives the same terms,
// remembering the stems it has found.
func Terms(text string) []string {
	return (*Stemmer)(nil).Terms(text)
}

// Terms is Terms, with s's cache of stems; a nil s caches nothing.
func (s *Stemmer) Terms(text string) []string {
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
		if w = s.stem(w); w != "" {
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

// Stemmer remembers the stems it has found. A store's vocabulary is
// small next to its words, and the Snowball stemmer allocates for each
// word it reads: loading the index of a million memories stems each of
// their words again, and with a Stemmer almost every one is a lookup. It
// is bounded: past stemCacheMax words, new words are stemmed each time.
// The zero value is ready, and it is safe for concurrent use; it must not
// be copied after first use.
type Stemmer struct {
	mu sync.RWMutex
	m  map[string]string
}

const stemCacheMax = 1 << 18

// stem is stem(w), through s's cache when s is not nil.
func (s *Stemmer) stem(w string) string {
	if s == nil {
		return stem(w)
	}
	s.mu.RLock()
	st, ok := s.m[w]
	full := len(s.m) >= stemCacheMax
	s.mu.RUnlock()
	if ok {
		return st
	}
	st = stem(w)
	if full || st == w && !hasLetter(w) {
		return st // numbers cost nothing to "stem": not worth a place
	}
	s.mu.Lock()
	if s.m == nil {
		s.m = map[string]string{}
	}
	if len(s.m) < stemCacheMax {
		// w may share the bytes of the whole text it came from.
		s.m[strings.Clone(w)] = st
	}
	s.mu.Unlock()
	return st
}

func hasLetter(w string) bool {
	for _, r := range w {
		if unicode.IsLetter(r) {
			return true
		}
	}
	return false
}

// stem stems a lower-cased word by the Snowball stemmer of its script; a
// word mixing scripts, or of another script, is kept as it is.
func stem(w string) string {
	latin, cyrillic, other := 0, 0, 0
	for _, r := range w {
		switch {
		case r < 0x80 && unicode.IsLetter(r):
			latin++
		case unicode.Is(unicode.Cyrillic, r):
			cyrillic++
		case unicode.IsLetter(r):
			other++
		}
	}
	switch {
	case latin > 0 && cyrillic == 0 && other == 0:
		return english.Stem(w, true)
	case cyrillic > 0 && latin == 0 && other == 0:
		return russian.Stem(w, true)
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
one
и в во не что он на я с со как а то все она так его но да ты к у же вы за бы по только ее её мне
было вот от меня еще ещё нет о из ему теперь когда даже ну вдруг ли если уже или ни быть был него до
вас нибудь опять уж вам ведь там потом себя ничего ей может они тут где есть надо ней для мы тебя их
чем была сам чтоб без будто чего раз тоже себе под будет ж тогда кто этот того потому этого какой
совсем ним здесь этом один почти мой тем чтобы нее неё сейчас были куда зачем всех никогда можно при
наконец два об другой хоть после над больше тот через эти нас про всего них какая много разве три
эту моя впрочем хорошо свою этой перед иногда лучше чуть том нельзя такой им более всегда конечно
всю между это мой моё мои моего привет спасибо пожалуйста`) {
		m[w] = true
	}
	return m
}()
