package private

import (
	"regexp"
	"strings"
)

// emailRE is an address with a dotted domain whose last label is
// letters: not "name@2x.png" (a file), not "user@localhost", not an
// @mention.
var emailRE = regexp.MustCompile(`(?i)\b[a-z0-9][a-z0-9._%+\-]*@[a-z0-9](?:[a-z0-9\-]*[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9\-]*[a-z0-9])?)*\.([a-z]{2,24})\b`)

// fileExts are the endings of file names written like addresses.
var fileExts = map[string]bool{"png": true, "jpg": true, "jpeg": true, "gif": true, "svg": true, "webp": true, "pdf": true}

func hasEmail(text string) bool {
	if !strings.Contains(text, "@") {
		return false
	}
	for _, m := range emailRE.FindAllStringSubmatchIndex(text, -1) {
		if m[0] > 0 && (text[m[0]-1] == ':' || text[m[0]-1] == '/') {
			continue // a URL's user:password@host: a secret, not an address
		}
		if !fileExts[strings.ToLower(text[m[2]:m[3]])] {
			return true
		}
	}
	return false
}

// phoneRE finds runs that look like phone numbers as people write them:
// an international "+" number, or a national one whose digits are grouped
// by spaces, dashes or brackets ("(415) 555-2671", "8 912 345-67-89",
// "020 7946 0958"). Dots never separate (dates, versions, IP addresses).
var phoneRE = regexp.MustCompile(`(?:\+\d{1,3}[ \-]?)?(?:\(\d{1,5}\)[ \-]?)?\d{1,5}(?:[ \-]\d{1,5}){1,6}|\+\d{8,15}`)

func hasPhone(text string) bool {
	if digitRun(text, " -()+") < 7 {
		return false
	}
	for _, loc := range phoneRE.FindAllStringIndex(text, -1) {
		s := text[loc[0]:loc[1]]
		if phoneLike(text, loc[0], loc[1], s) {
			return true
		}
	}
	return false
}

// phoneLike judges one candidate: 7 to 15 digits; international, or
// grouped as a phone number is (a bracketed area code, a trunk 0 or 8, or
// a last group of 2 to 4 digits after at least two groups); and not part
// of a longer token (an amount, a date, a version, an id).
func phoneLike(text string, start, end int, s string) bool {
	digits := 0
	for _, r := range s {
		if r >= '0' && r <= '9' {
			digits++
		}
	}
	if digits < 7 || digits > 15 {
		return false
	}
	if start > 0 {
		switch text[start-1] {
		case '#', '$', '.', ',', '/', ':', '-', '_':
			return false
		}
		if c := text[start-1]; isAlnum(c) {
			return false
		}
	}
	if end < len(text) {
		switch text[end] {
		case '.', ',', '/', ':', '-', '_', '%':
			if end+1 < len(text) && isDigit(text[end+1]) {
				return false // 1,234,567 or 2026-11-28 or 1.24.0
			}
		}
		if isAlnum(text[end]) {
			return false
		}
	}
	if strings.HasPrefix(s, "+") || strings.HasPrefix(s, "(") {
		return true
	}
	if dateRE.MatchString(s) {
		return false
	}
	groups := strings.FieldsFunc(s, func(r rune) bool { return r == ' ' || r == '-' })
	if len(groups) < 2 {
		return false
	}
	if len(groups) == 2 {
		// "555-2671" is too short to say; "4155 552671" too.
		return false
	}
	first := groups[0]
	if (first == "8" || strings.HasPrefix(first, "0")) && len(groups) >= 3 {
		return true
	}
	last := groups[len(groups)-1]
	return len(last) >= 2 && len(last) <= 4 && len(groups[1]) >= 2
}

// dateRE is a date written with dashes or spaces.
var dateRE = regexp.MustCompile(`^(?:\d{4}[ \-]\d{1,2}[ \-]\d{1,2}|\d{1,2}[ \-]\d{1,2}[ \-]\d{4})$`)

// digitRun is the most digits s holds in one run where single
// separators (from seps) may stand between them: a cheap test before a
// regexp.
func digitRun(s, seps string) int {
	best, run, gap := 0, 0, 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case isDigit(c):
			run++
			gap = 0
			best = max(best, run)
		case gap == 0 && strings.IndexByte(seps, c) >= 0:
			gap++
		default:
			run, gap = 0, 0
		}
	}
	return best
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isAlnum(c byte) bool {
	return isDigit(c) || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}
