package private

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/nyaruka/phonenumbers"
)

// runeBefore is the rune that ends text[:i], or utf8.RuneError at the start.
func runeBefore(text string, i int) rune {
	if i <= 0 {
		return utf8.RuneError
	}
	r, _ := utf8.DecodeLastRuneInString(text[:i])
	return r
}

// runeAt is the rune that starts text[i:], or utf8.RuneError at the end.
func runeAt(text string, i int) rune {
	if i >= len(text) {
		return utf8.RuneError
	}
	r, _ := utf8.DecodeRuneInString(text[i:])
	return r
}

// isWordRune reports whether r is part of a word: a letter, a digit or _.
func isWordRune(r rune) bool {
	return r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r)
}

// ---- email ----

// hasEmail finds an address: a local part, "@", then a domain of at least
// two dot-separated labels whose last (the top-level domain) is two or
// more letters. Internationalised addresses (letters of any script) count.
//
// Not an address: an @mention (no local part), "user@localhost" or any
// single-label domain (an intranet name, an npm "pkg@latest", a Docker
// "img@sha256:..."; leaving these out also keeps code and commands from
// matching), "name@2x.png" (a retina file name: a "2x" label, or a
// top-level domain that is a file extension no registry has issued),
// "pkg@1.2.3" (digits are no top-level domain) and the SSH remote
// "git@github.com:owner/repo".
func hasEmail(text string) bool {
	for off := 0; ; {
		k := strings.IndexByte(text[off:], '@')
		if k < 0 {
			return false
		}
		at := off + k
		off = at + 1
		if emailAt(text, at) {
			return true
		}
	}
}

// emailAt judges the '@' at text[at].
func emailAt(text string, at int) bool {
	// The local part: dot-atoms of letters, digits and !#$%&'*+/=?^_`{|}~-,
	// at most 64 bytes (RFC 5321).
	start := at
	for start > 0 && at-start < 64 {
		r, n := utf8.DecodeLastRuneInString(text[:start])
		if r < utf8.RuneSelf && !isAlnum(byte(r)) && !strings.ContainsRune(".%+-_'=", r) {
			break
		}
		if r >= utf8.RuneSelf && !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			break
		}
		start -= n
	}
	// user:password@host in a URL is a credential (hasURLPassword), and
	// https://user@host a login, not an address.
	from := max(0, at-maxURLBefore)
	ts := from + strings.LastIndexAny(text[from:at], " \t\r\n\"'<>(") + 1
	if strings.Contains(text[ts:at], "://") {
		return false
	}
	local := strings.TrimLeft(text[start:at], ".'=")
	if local == "" || local[len(local)-1] == '.' || strings.Contains(local, "..") {
		return false
	}
	// The domain: labels of letters, digits and inner hyphens.
	end, labels, first, last := at+1, 0, "", ""
	for end-at < 256 { // a domain has at most 253 bytes
		ls := end
		for end < len(text) {
			r, n := utf8.DecodeRuneInString(text[end:])
			if !(r == '-' || (r < utf8.RuneSelf && isAlnum(byte(r))) || (r >= utf8.RuneSelf && (unicode.IsLetter(r) || unicode.IsDigit(r)))) {
				break
			}
			end += n
		}
		label := text[ls:end]
		if label == "" || label[0] == '-' || label[len(label)-1] == '-' {
			if labels > 0 && label == "" {
				end = ls - 1 // a trailing dot ends the sentence, not the domain
				break
			}
			return false
		}
		labels++
		if labels == 1 {
			first = label
		}
		last = label
		if end+1 < len(text) && text[end] == '.' && runeAt(text, end+1) != '.' && isWordRune(runeAt(text, end+1)) {
			end++
			continue
		}
		break
	}
	if labels < 2 || utf8.RuneCountInString(last) < 2 || !allLetters(last) {
		return false
	}
	if isRetina(first) || fileExtensions[strings.ToLower(last)] {
		return false
	}
	if local == "git" && end < len(text) && text[end] == ':' {
		return false // an SSH remote, git@host:owner/repo
	}
	return true
}

// allLetters reports whether s is letters only.
func allLetters(s string) bool {
	for _, r := range s {
		if !unicode.IsLetter(r) {
			return false
		}
	}
	return true
}

// isRetina reports whether label is "2x", "3x"...: "icon@2x.png".
func isRetina(label string) bool {
	n := len(label)
	if n < 2 || (label[n-1] != 'x' && label[n-1] != 'X') {
		return false
	}
	for i := 0; i < n-1; i++ {
		if !isDigit(label[i]) {
			return false
		}
	}
	return true
}

// maxURLBefore is how far before an "@" hasEmail looks for the "://" of
// a URL that the "@" belongs to.
const maxURLBefore = 256

// fileExtensions are the endings of file names written like addresses
// ("logo@dark.svg") that are no top-level domain. Real domains that are
// also extensions (.zip, .mov, .py, .sh, .md, .rs, .ai, .io) are left
// out: an address there is still an address.
var fileExtensions = map[string]bool{
	"png": true, "jpg": true, "jpeg": true, "gif": true, "svg": true,
	"webp": true, "bmp": true, "ico": true, "tif": true, "tiff": true,
	"avif": true, "heic": true, "pdf": true, "css": true, "scss": true,
	"js": true, "mjs": true, "ts": true, "tsx": true, "jsx": true,
	"json": true, "yaml": true, "yml": true, "toml": true, "lock": true,
	"txt": true, "html": true, "htm": true, "xml": true, "mp3": true,
	"mp4": true, "wav": true, "ogg": true, "webm": true, "woff": true,
	"woff2": true, "ttf": true, "otf": true, "map": true, "vue": true,
}

// ---- phone ----

// hasPhone finds a phone number written the way people write one, and
// confirms it against the numbering plans of libphonenumber (its Go port,
// github.com/nyaruka/phonenumbers): the digits must form a valid number
// of some country, not only a possible one.
//
// A candidate is a run of digit groups joined by single spaces, dashes or
// dots, with brackets around a group ("+7 (912) 345-67-89"). Inside a run,
// a candidate may start or end only where groups are joined by a space,
// so "2026-11-28 020 7946 0958" still finds the number, while a dashed
// ISBN or a dotted IP address is never cut into a number. Its shape must
// be one of:
//
//   - international: "+" and 8 to 15 digits, grouped or not
//     ("+44 20 7946 0958", "+1-415-555-2671", "+14155552671");
//   - a trunk 0 and an area code, then groups of two or more digits, 9 to
//     12 digits in all ("020 7946 0958", "030 1234567", "06 12 34 56 78");
//     tried as DE, GB, FR, IT, NL, UA;
//   - the Russian trunk 8, then a three-digit code ("8 912 345-67-89",
//     "8 (800) 555-35-35"); tried as RU, BY;
//   - a bracketed area code ("(415) 555-2671", "(495) 123-45-67"), tried
//     as US, RU, DE, GB, FR, IT; the groups 3-3-4, with or without a
//     leading 1 ("415-555-2671", "1-800-555-0199"), tried as US (all of
//     +1); the groups 3-3-2-2 ("912 345 67 89"), tried as RU;
//   - 10 to 12 bare digits right after a word that announces a phone
//     ("phone", "tel", "call", "mobile", "whatsapp", "телефон", "тел",
//     "звоните"...): "call me at 4155552671".
//
// Not a phone: dates (4-2-2 and 2-2-4 digits are too few, and no shape
// has them), times (":" joins no groups), versions and IP addresses (too
// few digits or no shape), amounts ("$", "," and a leading currency sign
// end or refuse a run), order ids ("#123456789": "#" refuses the run, and
// bare digits need a phone word), ISBNs (dash-joined, with one-digit
// groups), card numbers and IBANs (four groups of four digits, or the
// groups after an IBAN's "GB82 "), and bare long numbers in a sentence
// about quantities ("we shipped 4155552671 units" has no phone word, so it
// does not match). A stretch of an international number is never tried
// without its country code ("+1 (800) 123-4567" is not read as the
// Russian "(800) 123-4567").
//
// Missed: numbers written with other separators (slashes, non-breaking
// spaces), short local numbers without an area code ("555-1234"), numbers
// of countries not tried whose trunk is not 0 or 8 unless written with
// "+", and bare digits without a phone word.
//
// Cost: the scan is linear; each candidate that reaches libphonenumber
// costs about 17 µs (its first use of a region also compiles that
// region's patterns once), and at most maxPhoneParses are tried per text.
func hasPhone(text string) bool {
	budget := maxPhoneParses
	for i := 0; i < len(text); {
		c := text[i]
		if !(c == '+' || c == '(' || isDigit(c)) {
			i++
			continue
		}
		if !phoneStartOK(text, i) {
			// Skip the rest of this token, so that its digits do not start
			// a run of their own ("ID12345", "1.24.0").
			i++
			for i < len(text) && (isAlnum(text[i]) || text[i] == '.' || text[i] == '-' || text[i] == '/') {
				i++
			}
			continue
		}
		var r phoneRun
		r.budget = &budget
		end := r.scan(text, i)
		if end == i {
			i++
			continue
		}
		if r.n > 0 && r.judge(text, i, end) {
			return true
		}
		i = end
	}
	return false
}

// phoneStartOK reports whether a phone number may start at text[i]: not
// inside a word, a number, an amount, an order id or a path.
func phoneStartOK(text string, i int) bool {
	if i == 0 {
		return true
	}
	p := runeBefore(text, i)
	if isWordRune(p) {
		return false
	}
	switch p {
	case '#', '№', '$', '€', '£', '¥', '₽', '/', '\\', '@', '+', '&', '=', '%':
		return false
	case '.', ',', '-', ':':
		// "1.8 912", "3,020 ...", "2026-020...": a number goes on.
		if i >= 2 && isDigit(text[i-2]) {
			return false
		}
	}
	return true
}

// phoneEndOK reports whether a phone number may end at text[end]: not
// followed by more of a word, a decimal, a time or a path.
func phoneEndOK(text string, end int) bool {
	if end >= len(text) {
		return true
	}
	r := runeAt(text, end)
	if isWordRune(r) {
		return false
	}
	switch r {
	case '%', '@', '/', '\\', '$', '€', '£', '¥', '₽', '+':
		return false
	case '.', ',', '-', ':':
		if end+1 < len(text) && isDigit(text[end+1]) {
			return false
		}
	}
	return true
}

// maxGroups bounds the groups of one run: longer runs are lists of
// numbers, and their tail starts a run of its own.
const maxGroups = 12

// phoneGroup is one group of digits in a run.
type phoneGroup struct {
	start, end int  // bytes of text, brackets included
	digits     int  // how many digits
	paren      bool // in brackets
	sep        byte // what joins it to the group before: ' ', '-', '.', or 0
}

// maxPhoneParses bounds the numbers one call of hasPhone gives to
// libphonenumber, at about 17 µs each: a text with more phone-shaped
// candidates than this that are no valid number (a table of numbers, or
// an attack on the write path) is taken to hold a phone number, as the
// detectors lean towards marking.
const maxPhoneParses = 32

// phoneRun is a run of digit groups: the candidates of hasPhone.
type phoneRun struct {
	budget *int // what is left of maxPhoneParses
	plus   bool // the run starts with "+"
	n      int
	groups [maxGroups]phoneGroup
}

// scan reads a run at text[i:] and returns where it ends (i when there is
// none). The run ends before anything that is not a group joined by one
// separator.
func (r *phoneRun) scan(text string, i int) int {
	pos := i
	if text[pos] == '+' {
		r.plus = true
		pos++
	}
	end := i
	var sep byte
	for r.n < maxGroups {
		g, next, ok := scanGroup(text, pos)
		if !ok {
			break
		}
		g.sep = sep
		r.groups[r.n] = g
		r.n++
		end = next
		// A separator, then another group; or, after a bracket, a group
		// straight away: "(912)345-67-89", "+7(912)...".
		sep = 0
		pos = next
		if pos < len(text) && (text[pos] == ' ' || text[pos] == '-' || text[pos] == '.') {
			sep = text[pos]
			pos++
		} else if !(g.paren || (pos < len(text) && text[pos] == '(')) {
			break
		}
		if pos >= len(text) || !(isDigit(text[pos]) || text[pos] == '(') {
			break
		}
	}
	if r.n == 0 {
		return i
	}
	return end
}

// scanGroup reads digits, or digits in brackets, at text[pos:].
func scanGroup(text string, pos int) (g phoneGroup, next int, ok bool) {
	g.start = pos
	if pos < len(text) && text[pos] == '(' {
		g.paren = true
		pos++
	}
	d := pos
	for pos < len(text) && isDigit(text[pos]) {
		pos++
	}
	g.digits = pos - d
	if g.digits == 0 || g.digits > 15 {
		return g, 0, false
	}
	if g.paren {
		if pos >= len(text) || text[pos] != ')' {
			return g, 0, false
		}
		pos++
	}
	g.end = pos
	return g, pos, true
}

// judge tries the candidates of the run text[start:end]: its stretches of
// whole groups that start and end where groups are joined by a space (or
// at the run's ends), longest first.
func (r *phoneRun) judge(text string, start, end int) bool {
	endOK := phoneEndOK(text, end)
	if afterIBANHead(text, start) || cardGrouped(r) {
		return false
	}
	for a := 0; a < r.n; a++ {
		if a > 0 && (r.plus || r.groups[a].sep != ' ') {
			continue // no stretch of an international number drops its country code
		}
		for b := r.n - 1; b >= a; b-- {
			if b < r.n-1 && r.groups[b+1].sep != ' ' {
				continue
			}
			if b == r.n-1 && !endOK {
				continue
			}
			if r.candidate(text, start, a, b) {
				return true
			}
		}
	}
	return false
}

// cardGrouped reports whether the run starts with four groups of four
// digits, as card numbers and IBANs are printed; no country writes phone
// numbers so, and the groups in the middle of "4000 0566 5566 5556" would
// pass for a national one.
func cardGrouped(r *phoneRun) bool {
	if r.plus || r.n < 4 {
		return false
	}
	for _, g := range r.groups[:4] {
		if g.digits != 4 || g.paren {
			return false
		}
	}
	return true
}

// afterIBANHead reports whether the run at text[i:] goes on an IBAN
// written in groups of four ("RU02 0445 2560 ...", "GB82 WEST 1234 ..."),
// whose digits would otherwise pass for a national phone number: the
// word before it is a country code and two check digits, or a group of
// four after one.
func afterIBANHead(text string, i int) bool {
	for back := 0; back < 2; back++ {
		if i < 5 || text[i-1] != ' ' {
			return false
		}
		w := text[i-5 : i-1]
		if i > 5 && isAlnum(text[i-6]) {
			return false
		}
		if isASCIILetter(w[0]) && isASCIILetter(w[1]) && isDigit(w[2]) && isDigit(w[3]) {
			return true
		}
		if !isAlnum(w[0]) || !isAlnum(w[1]) || !isAlnum(w[2]) || !isAlnum(w[3]) {
			return false
		}
		i -= 5
	}
	return false
}

// candidate judges the groups a..b of the run.
func (r *phoneRun) candidate(text string, start, a, b int) bool {
	gs := r.groups[a : b+1]
	digits := 0
	for _, g := range gs {
		digits += g.digits
	}
	plus := r.plus && a == 0
	s := text[gs[0].start:gs[len(gs)-1].end]
	if plus {
		s = text[start:gs[len(gs)-1].end]
		return digits >= 8 && digits <= 15 && r.valid(s, "ZZ")
	}
	if len(gs) == 1 {
		return digits >= 10 && digits <= 12 && !gs[0].paren &&
			phoneWordBefore(text, gs[0].start) && r.valid(s, bareRegions...)
	}
	first := gs[0]
	lead := text[first.start]
	if first.paren {
		lead = text[first.start+1]
	}
	rest := gs[1:]
	switch {
	case lead == '0' && first.digits >= 2 && first.digits <= 5:
		if text[first.start+boolInt(first.paren)+1] == '0' {
			// "00 44 ...": the international prefix of most countries.
			return digits >= 11 && digits <= 17 && minDigits(rest, 1) && r.valid(s, "DE")
		}
		return digits >= 9 && digits <= 12 && minDigits(rest, 2) && r.valid(s, trunkZeroRegions...)
	case lead == '8' && first.digits == 1 && !first.paren:
		return digits == 11 && rest[0].digits == 3 && minDigits(rest, 2) && r.valid(s, "RU", "BY")
	case first.paren && first.digits >= 2 && first.digits <= 5:
		return digits >= 9 && digits <= 12 && minDigits(rest, 2) && r.valid(s, parenRegions...)
	case lead == '1' && first.digits == 1 && len(rest) == 3 && nanp(rest):
		return r.valid(s, "US")
	case nanp(gs):
		return r.valid(s, "US")
	case groupsAre(gs, 3, 3, 2, 2):
		return r.valid(s, "RU")
	}
	return false
}

// Regions tried for national numbers, most likely first.
var (
	trunkZeroRegions = []string{"DE", "GB", "FR", "IT", "NL", "UA"}
	parenRegions     = []string{"US", "RU", "DE", "GB", "FR", "IT"}
	bareRegions      = []string{"US", "RU", "GB", "DE", "FR"}
)

// nanp reports whether gs are grouped 3-3-4, as the US writes numbers.
func nanp(gs []phoneGroup) bool { return groupsAre(gs, 3, 3, 4) }

// groupsAre reports whether gs have exactly the given digit counts.
func groupsAre(gs []phoneGroup, sizes ...int) bool {
	if len(gs) != len(sizes) {
		return false
	}
	for i, g := range gs {
		if g.digits != sizes[i] {
			return false
		}
	}
	return true
}

// minDigits reports whether every group has at least n digits.
func minDigits(gs []phoneGroup, n int) bool {
	for _, g := range gs {
		if g.digits < n {
			return false
		}
	}
	return true
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// valid reports whether s is a valid number when read in one of the
// regions (a "+" number is read alike in all); or, once the run's text
// has used up maxPhoneParses, true.
func (r *phoneRun) valid(s string, regions ...string) bool {
	for _, region := range regions {
		if *r.budget <= 0 {
			return true
		}
		*r.budget--
		n, err := phonenumbers.Parse(s, region)
		if err == nil && phonenumbers.IsValidNumber(n) {
			return true
		}
	}
	return false
}

// phoneWords announce a phone number; a bare number must follow one,
// within phoneWordReach bytes. Each must start a word.
var phoneWords = []string{
	"phone", "tel", "call", "mobile", "cell", "whatsapp", "viber", "signal",
	"telegram", "sms", "text me", "fax", "handy", "ruf", "téléphone",
	"portable", "appel", "teléfono", "móvil", "celular", "llama",
	"телефон", "тел", "моб", "сотов", "звон", "позвон", "вотсап", "ватсап",
}

const phoneWordReach = 40

// phoneWordBefore reports whether a phone word precedes text[i].
func phoneWordBefore(text string, i int) bool {
	from := max(0, i-phoneWordReach)
	for from < i && !utf8.RuneStart(text[from]) {
		from++
	}
	window := strings.ToLower(text[from:i])
	for _, w := range phoneWords {
		for off := 0; ; {
			k := strings.Index(window[off:], w)
			if k < 0 {
				break
			}
			if !isWordRune(runeBefore(window, off+k)) {
				return true
			}
			off += k + 1
		}
	}
	return false
}
