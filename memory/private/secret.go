package private

import (
	"math"
	"regexp"
	"strings"
)

// secretRE finds keys and tokens by their known shapes.
var secretRE = regexp.MustCompile(`(?:` + strings.Join([]string{
	`\bsk-(?:proj-|ant-)?[A-Za-z0-9_\-]{20,}`,                            // OpenAI, Anthropic
	`\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{30,}`,                         // GitHub
	`\bgithub_pat_[A-Za-z0-9_]{40,}`,                                     // GitHub fine-grained
	`\bglpat-[A-Za-z0-9_\-]{20,}`,                                        // GitLab
	`\bxox[abpr]-[A-Za-z0-9\-]{10,}`,                                     // Slack
	`\bxapp-[A-Za-z0-9\-]{10,}`,                                          // Slack app
	`\b(?:AKIA|ASIA)[A-Z0-9]{16}\b`,                                      // AWS access key
	`\bAIza[A-Za-z0-9_\-]{35}`,                                           // Google API key
	`\b(?:sk|rk|pk)_live_[A-Za-z0-9]{20,}`,                               // Stripe
	`\bhf_[A-Za-z0-9]{30,}`,                                              // Hugging Face
	`\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}`, // a JWT
	`-----BEGIN [A-Z ]*PRIVATE KEY-----`,                                 // PEM
	`\b[a-z][a-z0-9+.\-]*://[^\s:/@]+:[^\s/@]+@[^\s/]+`,                  // user:password@host
}, "|") + `)`)

// secretHints are literals every shape of secretRE holds: a text with
// none of them is not matched against it (the regexp is slow).
var secretHints = []string{"sk-", "_pat_", "hp_", "ho_", "hu_", "hs_", "hr_", "glpat-", "xox", "xapp-", "AKIA", "ASIA", "AIza",
	"_live_", "hf_", "eyJ", "PRIVATE KEY", "://"}

// containsAny reports whether s holds one of subs.
func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// tokenRE finds long runs of the characters keys are written in.
var tokenRE = regexp.MustCompile(`[A-Za-z0-9+/=_\-]{24,}`)

// hasSecret finds a key or token: a known shape, or a long random-looking
// string (see randomLooking).
func hasSecret(text string) bool {
	if containsAny(text, secretHints) && secretRE.MatchString(text) {
		return true
	}
	if !hasLongToken(text) {
		return false
	}
	for _, t := range tokenRE.FindAllString(text, -1) {
		if randomLooking(t) {
			return true
		}
	}
	return false
}

// hasLongToken reports whether s holds 24 token characters in a row: a
// cheap test before the regexp.
func hasLongToken(s string) bool {
	run := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if isAlnum(c) || c == '+' || c == '/' || c == '=' || c == '_' || c == '-' {
			if run++; run >= 24 {
				return true
			}
		} else {
			run = 0
		}
	}
	return false
}

// randomLooking reports whether t looks like a random key: at least 24
// characters mixing upper case, lower case and digits, with more than 4
// bits of entropy per character. Not words joined by dashes or
// underscores (a long file name, a slug), not a UUID or a hex digest
// (identifiers: hex has no upper case), not a path.
func randomLooking(t string) bool {
	var upper, lower, digit int
	for i := 0; i < len(t); i++ {
		switch c := t[i]; {
		case c >= 'A' && c <= 'Z':
			upper++
		case c >= 'a' && c <= 'z':
			lower++
		case c >= '0' && c <= '9':
			digit++
		}
	}
	if upper < 2 || lower < 2 || digit < 2 {
		return false
	}
	// Words: long stretches of letters between separators.
	for _, part := range strings.FieldsFunc(t, func(r rune) bool { return r == '-' || r == '_' || r == '/' }) {
		if len(part) < 16 && strings.ContainsAny(t, "-_/") {
			return false
		}
	}
	return entropy(t) > 4.0
}

// entropy is the Shannon entropy of s, in bits per character.
func entropy(s string) float64 {
	var counts [256]int
	for i := 0; i < len(s); i++ {
		counts[s[i]]++
	}
	h := 0.0
	n := float64(len(s))
	for _, c := range counts {
		if c > 0 {
			p := float64(c) / n
			h -= p * math.Log2(p)
		}
	}
	return h
}
