// Package learn is the tier classifier's learned first stage: the
// features of a message, a multinomial logistic regression over them
// trained from labelled queries (at `go generate` time, into the weights
// proxy/tier ships), and the grouped cross-validation that `vera eval
// routing --cv K` reports. It knows nothing of HTTP or of the tiers'
// models: labels are strings.
package learn

import (
	"strconv"
	"strings"
	"unicode"

	"github.com/kljensen/snowball/english"
	"github.com/kljensen/snowball/russian"
)

// Options choose the features.
type Options struct {
	// CharGrams adds the character 3- and 4-grams of each word, which
	// carry a word's family across inflections and typos.
	CharGrams bool `json:"char_grams"`
}

// Features returns the distinct features of text, in a fixed order: its
// stemmed words (stop words kept: how a question is put matters) and
// their pairs, its first words, and the shapes that rules used to catch
// (code, mathematics, a link, its length, how many questions and lines).
func Features(text string, o Options) []string {
	f := featureSet{seen: make(map[string]bool, 64)}
	words := stems(text)
	for i, w := range words {
		f.add("w:" + w)
		if i > 0 {
			f.add("b:" + words[i-1] + "_" + w)
		}
	}
	if len(words) > 0 {
		f.add("f:" + words[0])
		if len(words) > 1 {
			f.add("f2:" + words[0] + "_" + words[1])
		}
	}
	if o.CharGrams {
		for _, w := range strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return !unicode.IsLetter(r) }) {
			rs := []rune("<" + w + ">")
			for n := 3; n <= 4; n++ {
				for i := 0; i+n <= len(rs); i++ {
					f.add("c:" + string(rs[i:i+n]))
				}
			}
		}
	}
	trimmed := strings.TrimSpace(text)
	f.add("len:" + bucket(len(words), 1, 2, 3, 5, 8, 13, 21, 34, 55, 89))
	f.add("lines:" + bucket(strings.Count(trimmed, "\n")+1, 1, 2, 4, 8))
	f.add("q:" + bucket(strings.Count(text, "?"), 0, 1, 2))
	if strings.HasSuffix(trimmed, "?") {
		f.add("ends:?")
	}
	for _, sh := range shapes(text) {
		f.add("s:" + sh)
	}
	return f.list
}

// stems are the words of text, lower-cased and stemmed (Porter2 for
// words in Latin letters, the Russian Snowball stemmer for Cyrillic ones;
// numbers and other words as they are), stop words kept.
func stems(text string) []string {
	var out []string
	for _, w := range strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		switch script(w) {
		case 'l':
			w = english.Stem(w, false)
		case 'c':
			w = russian.Stem(w, false)
		}
		out = append(out, w)
	}
	return out
}

// script is 'l' for a word all in Latin letters, 'c' all in Cyrillic, 0
// otherwise.
func script(w string) byte {
	var s byte
	for _, r := range w {
		var this byte
		switch {
		case r < 0x80 && unicode.IsLetter(r):
			this = 'l'
		case unicode.Is(unicode.Cyrillic, r):
			this = 'c'
		default:
			return 0
		}
		if s != 0 && s != this {
			return 0
		}
		s = this
	}
	return s
}

// featureSet keeps features once each, in the order they came.
type featureSet struct {
	seen map[string]bool
	list []string
}

func (f *featureSet) add(s string) {
	if !f.seen[s] {
		f.seen[s] = true
		f.list = append(f.list, s)
	}
}

// shapes names what a message holds beyond its words: code, mathematics,
// bare arithmetic, a link, a number, Cyrillic, a list.
func shapes(text string) []string {
	var out []string
	lower := strings.ToLower(text)
	if containsAny(text, codeMarks) || endsAnyLine(text, ";", "{") {
		out = append(out, "code")
	}
	if containsAny(lower, mathMarks) {
		out = append(out, "math")
	}
	digits, arith := false, strings.TrimSpace(text) != ""
	cyr := false
	for _, r := range text {
		switch {
		case unicode.IsDigit(r):
			digits = true
		case strings.ContainsRune(" \t\n.,+-*/×x÷^%()=?", r):
		default:
			arith = false
		}
		if unicode.Is(unicode.Cyrillic, r) {
			cyr = true
		}
	}
	if digits {
		out = append(out, "num")
	}
	if digits && arith {
		out = append(out, "arith")
	}
	if cyr {
		out = append(out, "cyr")
	}
	if containsAny(lower, []string{"http://", "https://", "www."}) {
		out = append(out, "url")
	}
	for line := range strings.Lines(text) {
		l := strings.TrimLeft(line, " \t")
		n := len(l) - len(strings.TrimLeft(l, "0123456789"))
		if strings.HasPrefix(l, "- ") || strings.HasPrefix(l, "* ") || strings.HasPrefix(l, "• ") ||
			n > 0 && (strings.HasPrefix(l[n:], ". ") || strings.HasPrefix(l[n:], ") ")) {
			out = append(out, "list")
			break
		}
	}
	return out
}

var (
	codeMarks = []string{"```", "func ", "def ", "class ", "import ", "#include", "=>", "){", ") {", "Traceback", "Exception", "error:", "SELECT ", "$ "}
	mathMarks = []string{"\\frac", "\\sum", "\\int", "\\sqrt", "^", "=", "≤", "≥", "∑", "∫", "√", "∞", "∀", "∃"}
)

func containsAny(s string, marks []string) bool {
	for _, m := range marks {
		if strings.Contains(s, m) {
			return true
		}
	}
	return false
}

// endsAnyLine reports whether a line of text ends with one of ends.
func endsAnyLine(text string, ends ...string) bool {
	for line := range strings.Lines(text) {
		l := strings.TrimRight(line, " \t\r\n")
		for _, e := range ends {
			if strings.HasSuffix(l, e) {
				return true
			}
		}
	}
	return false
}

// bucket names the range of edges n falls in: "5-7" between the edges 5
// and 8, "89+" past the last.
func bucket(n int, edges ...int) string {
	for i := len(edges) - 1; i >= 0; i-- {
		if n >= edges[i] {
			if i == len(edges)-1 {
				return strconv.Itoa(edges[i]) + "+"
			}
			if edges[i+1]-1 == edges[i] {
				return strconv.Itoa(edges[i])
			}
			return strconv.Itoa(edges[i]) + "-" + strconv.Itoa(edges[i+1]-1)
		}
	}
	return "<" + strconv.Itoa(edges[0])
}
