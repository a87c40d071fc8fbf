package private

import (
	"encoding/base64"
	"math"
	"strings"
	"unicode"
	"unicode/utf8"
)

// hasSecret finds an API key, a token, a private key or a password in a
// URL: by a known prefix (keyPrefixes), as a JWT, as a PEM private key
// block, as a connection string with a password, as the value of a
// setting named like a secret ("api_key = ...", "Authorization: Bearer
// ..."), or as a long random-looking string (randomToken).
func hasSecret(text string) bool {
	return hasPrefixedKey(text) || hasJWT(text) || hasPEMKey(text) ||
		hasURLPassword(text) || hasSecretSetting(text) || hasRandomToken(text)
}

// keyCharset is which characters follow a key's prefix.
type keyCharset uint8

const (
	alnum       keyCharset = iota // A-Z a-z 0-9
	alnumUnder                    // and _
	alnumDash                     // and -
	urlSafe                       // and _ and -
	upperDigits                   // A-Z 0-9
	hexLower                      // 0-9 a-f
)

func (cs keyCharset) has(c byte) bool {
	switch cs {
	case alnum:
		return isAlnum(c)
	case alnumUnder:
		return isAlnum(c) || c == '_'
	case alnumDash:
		return isAlnum(c) || c == '-'
	case urlSafe:
		return isAlnum(c) || c == '_' || c == '-'
	case upperDigits:
		return isUpper(c) || isDigit(c)
	case hexLower:
		return isDigit(c) || (c >= 'a' && c <= 'f')
	}
	return false
}

// keyPrefix is the shape of one vendor's keys: the prefix, then min to
// max characters of a charset (max 0: no limit), of which mixed
// requires upper and lower case (random keys have both; words in a
// kebab-case name like "sk-learn-pipeline" do not) and digit a digit.
type keyPrefix struct {
	prefix   string
	cs       keyCharset
	min, max int
	mixed    bool
	digit    bool
}

// keyPrefixes are the documented shapes of common keys and tokens.
var keyPrefixes = []keyPrefix{
	{"sk-", urlSafe, 20, 0, true, true},             // OpenAI sk-, sk-proj-, sk-svcacct-; Anthropic sk-ant-api03-
	{"ghp_", alnum, 36, 0, true, false},             // GitHub personal access token
	{"gho_", alnum, 36, 0, true, false},             // GitHub OAuth token
	{"ghu_", alnum, 36, 0, true, false},             // GitHub user-to-server token
	{"ghs_", alnum, 36, 0, true, false},             // GitHub server-to-server token
	{"ghr_", alnum, 36, 0, true, false},             // GitHub refresh token
	{"github_pat_", alnumUnder, 22, 0, true, false}, // GitHub fine-grained token
	{"glpat-", urlSafe, 20, 0, false, false},        // GitLab personal access token
	{"xoxb-", alnumDash, 10, 0, false, true},        // Slack bot token
	{"xoxp-", alnumDash, 10, 0, false, true},        // Slack user token
	{"xoxa-", alnumDash, 10, 0, false, true},        // Slack app token
	{"xoxr-", alnumDash, 10, 0, false, true},        // Slack refresh token
	{"xoxe-", alnumDash, 10, 0, false, true},        // Slack rotating token
	{"xapp-", alnumDash, 10, 0, false, true},        // Slack app-level token
	{"AKIA", upperDigits, 16, 16, false, false},     // AWS access key id
	{"ASIA", upperDigits, 16, 16, false, false},     // AWS temporary access key id
	{"AIza", urlSafe, 35, 35, false, false},         // Google API key
	{"sk_live_", alnum, 16, 0, false, false},        // Stripe secret key
	{"rk_live_", alnum, 16, 0, false, false},        // Stripe restricted key
	{"pk_live_", alnum, 16, 0, false, false},        // Stripe publishable key
	{"sk_test_", alnum, 16, 0, false, false},        // Stripe test secret key
	{"rk_test_", alnum, 16, 0, false, false},        // Stripe test restricted key
	{"hf_", alnum, 30, 0, true, false},              // Hugging Face token
	{"npm_", alnum, 36, 0, true, false},             // npm token
	{"pypi-", urlSafe, 50, 0, true, false},          // PyPI API token
	{"dop_v1_", hexLower, 64, 64, false, false},     // DigitalOcean token
	{"glptt-", urlSafe, 20, 0, false, false},        // GitLab pipeline trigger token
}

// keyStarts marks the first bytes of keyPrefixes, so that hasPrefixedKey
// looks at a position only when a prefix could start there.
var keyStarts = func() (starts [256]bool) {
	for _, k := range keyPrefixes {
		starts[k.prefix[0]] = true
	}
	return starts
}()

// maxKeyLen bounds how far a key's body is read: the longest documented
// keys have under 200 characters, and reading further would make text
// like "sk-sk-sk-..." cost the square of its length.
const maxKeyLen = 512

// hasPrefixedKey finds a key by its prefix, at the start of a word, in
// one pass over text.
func hasPrefixedKey(text string) bool {
	for i := 0; i < len(text); i++ {
		if !keyStarts[text[i]] || (i > 0 && isAlnum(text[i-1])) {
			continue // not a prefix, or inside a word: "task-...", "disk-..."
		}
		for _, k := range keyPrefixes {
			if k.prefix[0] == text[i] && strings.HasPrefix(text[i:], k.prefix) && k.match(text[i+len(k.prefix):]) {
				return true
			}
		}
	}
	return false
}

// match reports whether rest starts with a key body of this shape.
func (k keyPrefix) match(rest string) bool {
	n := 0
	var upper, lower, digit bool
	for n < len(rest) && n < maxKeyLen && k.cs.has(rest[n]) {
		c := rest[n]
		upper, lower, digit = upper || isUpper(c), lower || isLower(c), digit || isDigit(c)
		n++
	}
	if n < k.min || (k.max > 0 && n != k.max) {
		return false
	}
	if n < len(rest) && n < maxKeyLen && isAlnum(rest[n]) {
		return false // a longer word: not this key's exact shape
	}
	return (!k.mixed || (upper && lower)) && (!k.digit || digit)
}

// hasJWT finds a JSON Web Token: a base64url header and payload that both
// open a JSON object ("eyJ" is `{"`), and a signature, dot-separated.
// An unsigned token (empty signature) counts too: its claims are a
// bearer's.
func hasJWT(text string) bool {
	for off := 0; ; {
		j := strings.Index(text[off:], "eyJ")
		if j < 0 {
			return false
		}
		at := off + j
		off = at + 1
		if at > 0 && (isAlnum(text[at-1]) || text[at-1] == '_' || text[at-1] == '-') {
			continue
		}
		h := b64urlRun(text[at:])
		if h < 10 || at+h >= len(text) || text[at+h] != '.' {
			continue
		}
		rest := text[at+h+1:]
		if !strings.HasPrefix(rest, "eyJ") {
			continue
		}
		p := b64urlRun(rest)
		if p >= 10 && p < len(rest) && rest[p] == '.' {
			return true
		}
	}
}

// b64urlRun is how many base64url characters s starts with.
func b64urlRun(s string) int {
	n := 0
	for n < len(s) && n < 8192 && (isAlnum(s[n]) || s[n] == '_' || s[n] == '-') {
		n++
	}
	return n
}

// hasPEMKey finds the armour of a private key: "-----BEGIN RSA PRIVATE
// KEY-----", "... OPENSSH PRIVATE KEY", "... ENCRYPTED PRIVATE KEY", "...
// PGP PRIVATE KEY BLOCK". Public keys and certificates are not secrets.
func hasPEMKey(text string) bool {
	for off := 0; ; {
		j := strings.Index(text[off:], "-----BEGIN ")
		if j < 0 {
			return false
		}
		at := off + j + len("-----BEGIN ")
		off = at
		line := text[at:min(len(text), at+64)]
		if e := strings.Index(line, "-----"); e > 0 {
			label := line[:e]
			if strings.HasSuffix(label, "PRIVATE KEY") || strings.HasSuffix(label, "PRIVATE KEY BLOCK") {
				return true
			}
		}
	}
}

// hasURLPassword finds a URL with a password in it, a connection string
// like "postgres://user:pass@host/db" or "redis://:pass@host" (any
// scheme). A URL without one ("https://user@host", "https://host:8080")
// is not a secret, and neither is a template's placeholder password
// ("${DB_PASSWORD}", "<password>", "{{ .Pass }}", "****").
func hasURLPassword(text string) bool {
	for off := 0; ; {
		j := strings.Index(text[off:], "://")
		if j < 0 {
			return false
		}
		at := off + j
		off = at + 3
		s := at
		for s > 0 && at-s < 32 && (isAlnum(text[s-1]) || text[s-1] == '+' || text[s-1] == '.' || text[s-1] == '-') {
			s--
		}
		if s == at || !isASCIILetter(text[s]) {
			continue // no scheme
		}
		// The authority, up to the path, query, fragment or a space.
		e := at + 3
		for e < len(text) && e-at < maxKeyLen && !strings.ContainsRune("/?# \t\r\n\"'<>`", rune(text[e])) {
			e++
		}
		auth := text[at+3 : e]
		k := strings.LastIndexByte(auth, '@')
		if k < 0 || k == len(auth)-1 {
			continue
		}
		c := strings.IndexByte(auth[:k], ':')
		if c < 0 || c == k-1 {
			continue // no password
		}
		if !placeholder(auth[c+1 : k]) {
			return true
		}
	}
}

// placeholder reports whether a value stands for a secret without being
// one: a variable or template ("$X", "${X}", "<x>", "{{x}}", "%s",
// "os.Getenv(...)"), or a mask ("****", "xxxx", "...").
func placeholder(v string) bool {
	if v == "" {
		return true
	}
	switch v[0] {
	case '$', '<', '{', '%', '[':
		return true
	}
	if strings.Contains(v, "(") || strings.Contains(v, "{{") || strings.Contains(v, "…") {
		return true
	}
	for _, r := range v {
		if !strings.ContainsRune("*xX.•●#", r) {
			return false
		}
	}
	return true // a mask
}

// secretNames end the names of settings that hold secrets, written without
// "_" and "-" and in lower case: "OPENAI_API_KEY", "x-api-key", "apiKey",
// "client_secret", "GITHUB_TOKEN", "Authorization".
var secretNames = []string{
	"apikey", "secret", "secretkey", "token", "accesskey", "privatekey",
	"authorization", "auth", "credentials", "credential", "bearer",
}

// hasSecretSetting finds a setting named like a secret, given a value:
// `api_key = "..."`, `"apiKey": "..."`, `GITHUB_TOKEN=...`,
// "Authorization: Bearer ...", "my token is ...". The value must look like
// a key: at least 8 characters with letters and digits or of two cases,
// not a placeholder (`${{ secrets.X }}`, "<token>"), not a dotted name
// from code ("os.environ", "config.Token").
func hasSecretSetting(text string) bool {
	for i := 0; i < len(text); {
		if !isASCIILetter(text[i]) || (i > 0 && isAlnum(text[i-1])) {
			i++
			continue
		}
		// A name: letters, digits, "_", "-".
		s := i
		for i < len(text) && (isAlnum(text[i]) || text[i] == '_' || text[i] == '-') {
			i++
		}
		if !secretName(text[s:i]) {
			continue
		}
		if v, ok := settingValue(text[i:]); ok && keyLike(v) {
			return true
		}
	}
	return false
}

// secretName reports whether name ends in one of secretNames, ignoring
// case, "_" and "-".
func secretName(name string) bool {
	if len(name) < 4 || len(name) > 64 {
		return false
	}
	for _, w := range secretNames {
		if endsLike(name, w) {
			return true
		}
	}
	return false
}

// endsLike reports whether name, read backwards without "_" and "-" and
// in lower case, ends with w.
func endsLike(name, w string) bool {
	i := len(name) - 1
	for j := len(w) - 1; j >= 0; j-- {
		for i >= 0 && (name[i] == '_' || name[i] == '-') {
			i--
		}
		if i < 0 || lowerASCII(name[i]) != w[j] {
			return false
		}
		i--
	}
	return true
}

// settingValue reads what is assigned after a name: an optional closing
// quote, then ":", "=", ":=", "=>" or " is ", then an optional opening
// quote and "Bearer"/"Basic"/"Token", then the value up to a space,
// quote, comma or semicolon.
func settingValue(rest string) (string, bool) {
	i := 0
	if i < len(rest) && (rest[i] == '"' || rest[i] == '\'' || rest[i] == '`') {
		i++
	}
	for i < len(rest) && (rest[i] == ' ' || rest[i] == '\t') {
		i++
	}
	switch {
	case strings.HasPrefix(rest[i:], ":="), strings.HasPrefix(rest[i:], "=>"):
		i += 2
	case i < len(rest) && (rest[i] == ':' || rest[i] == '='):
		i++
	case strings.HasPrefix(rest[i:], "is ") && i > 0:
		i += 3
	default:
		return "", false
	}
	for i < len(rest) && (rest[i] == ' ' || rest[i] == '\t' || rest[i] == '"' || rest[i] == '\'' || rest[i] == '`') {
		i++
	}
	for _, scheme := range []string{"Bearer ", "bearer ", "Basic ", "basic ", "Token ", "token "} {
		if strings.HasPrefix(rest[i:], scheme) {
			i += len(scheme)
			break
		}
	}
	e := i
	for e < len(rest) && e-i < maxKeyLen && !strings.ContainsRune(" \t\r\n\"'`,;", rune(rest[e])) {
		e++
	}
	return strings.TrimRight(rest[i:e], ".)]}"), e > i
}

// keyLike reports whether a setting's value looks like a key.
func keyLike(v string) bool {
	if len(v) < 8 || placeholder(v) || dottedName(v) {
		return false
	}
	var upper, lower, digit bool
	for i := 0; i < len(v); i++ {
		upper, lower, digit = upper || isUpper(v[i]), lower || isLower(v[i]), digit || isDigit(v[i])
	}
	return (digit && (upper || lower)) || (upper && lower)
}

// dottedName reports whether v is a dotted identifier from code, like
// "os.environ" or "cfg.APIKey".
func dottedName(v string) bool {
	if !strings.Contains(v, ".") {
		return false
	}
	for _, part := range strings.Split(v, ".") {
		if part == "" || isDigit(part[0]) {
			return false
		}
		for i := 0; i < len(part); i++ {
			if !isAlnum(part[i]) && part[i] != '_' {
				return false
			}
		}
	}
	return true
}

// ---- random-looking strings ----

// minTokenLen is the shortest string hasRandomToken judges: 24 characters
// of base64 carry 144 bits, more than any password and as much as the
// shortest API keys; shorter strings are too often ids and words.
const minTokenLen = 24

// minEntropy is the least Shannon entropy, in bits per character, of a
// random-looking string. Over strings of 24 characters drawn at random
// from base62, base64 or base64url, 99.9% have at least 3.72 bits (the
// median is 4.25, and it grows with length: 4.56 at 32, 5.18 at 64;
// measured with math/rand, see TestRandomTokenEntropy). 3.5 keeps them
// and refuses strings that reuse a few characters ("AAAA0001AAAA0002",
// "abABabAB1212..."). Entropy alone does not tell a key from a camelCase
// identifier (both are near 4.0 at this length); wordFraction does.
const minEntropy = 3.5

// maxWordFraction is the largest share of a random-looking string that
// may be in words (see wordFraction). Random strings of 24 characters
// have a median of 0.17 and a 99th percentile of 0.58 (0.47 at 40);
// identifiers, class names and paths ("getUserAccountSettingsHandler2",
// "src/main/java/.../UserAccountController2", "my_Super_Long_Name_v2")
// have 0.70 to 0.97.
const maxWordFraction = 0.6

// hasRandomToken finds a long random-looking string, such as a key
// without a known prefix.
func hasRandomToken(text string) bool {
	for i := 0; i < len(text); {
		if !tokenChar(text[i]) {
			i++
			continue
		}
		s := i
		for i < len(text) && tokenChar(text[i]) {
			i++
		}
		e := i
		for e < len(text) && text[e] == '=' && e-i < 2 {
			e++ // base64 padding
		}
		if i-s >= minTokenLen && !midWord(text, s, e) && !publicBlob(text, s) && randomToken(text[s:i], text[s:e]) {
			return true
		}
	}
	return false
}

// publicBlob reports whether the token at text[s:] is public data in
// base64 by what precedes it: an SSH public key ("ssh-ed25519 AAAA...",
// "ecdsa-sha2-nistp256 AAAA...") or a data URI ("data:image/png;base64,").
func publicBlob(text string, s int) bool {
	before := text[max(0, s-32):s]
	if strings.HasSuffix(before, ";base64,") {
		return true
	}
	if !strings.HasPrefix(text[s:], "AAAA") || !strings.HasSuffix(before, " ") {
		return false
	}
	before = strings.TrimRight(before, " ")
	if k := strings.LastIndexAny(before, " \t\n\"'"); k >= 0 {
		before = before[k+1:]
	}
	return strings.HasPrefix(before, "ssh-") || strings.HasPrefix(before, "ecdsa-") || strings.HasPrefix(before, "sk-ssh-") || strings.HasPrefix(before, "sk-ecdsa-")
}

// tokenChar reports whether c is a character of base64, base64url or hex.
func tokenChar(c byte) bool {
	return isAlnum(c) || c == '+' || c == '/' || c == '_' || c == '-'
}

// midWord reports whether text[s:e] is glued to more of a word, such as
// letters of another script.
func midWord(text string, s, e int) bool {
	b, a := runeBefore(text, s), runeAt(text, e)
	return (b >= utf8.RuneSelf && unicode.IsLetter(b)) || (a >= utf8.RuneSelf && unicode.IsLetter(a))
}

// randomToken reports whether t (padded: with its base64 padding) looks
// like a random key: all of upper case, lower case and digits, entropy of
// at least minEntropy bits a character, and not one of the long strings
// that are not secrets:
//   - hex, with or without dashes: a hash, a git commit, a UUID, a digest
//     (identifiers; a hex key is still found by its setting's name, as
//     in "api_key=...");
//   - a subresource-integrity hash ("sha256-..."), public by design;
//   - an identifier, a path or a slug: mostly words (wordFraction);
//   - base64 of ordinary text (it decodes to words with spaces);
//   - public data in base64 (publicBlob): an SSH public key, a data URI.
func randomToken(t, padded string) bool {
	var upper, lower, digit int
	for i := 0; i < len(t); i++ {
		switch c := t[i]; {
		case isUpper(c):
			upper++
		case isLower(c):
			lower++
		case isDigit(c):
			digit++
		}
	}
	if upper == 0 || lower == 0 || digit == 0 {
		return false // hex in lower case, words, numbers
	}
	for _, p := range [...]string{"sha1-", "sha256-", "sha384-", "sha512-"} {
		if strings.HasPrefix(t, p) {
			return false
		}
	}
	if wordFraction(t) >= maxWordFraction {
		return false
	}
	if entropy(t) < minEntropy {
		return false
	}
	return !encodedText(padded)
}

// wordFraction is the share of t's characters in words: runs of three or
// more lower-case letters, with the capital before them ("User",
// "account", "Controller"). Identifiers and paths are mostly words; in
// random base62 a run of three lower-case letters is rare.
func wordFraction(t string) float64 {
	words := 0
	for i := 0; i < len(t); {
		j := i
		if isUpper(t[j]) {
			j++
		}
		k := j
		for k < len(t) && isLower(t[k]) {
			k++
		}
		switch {
		case k-j >= 3:
			words += k - i
			i = k
		case k > i:
			i = k
		default:
			i++
		}
	}
	return float64(words) / float64(len(t))
}

// entropy is the Shannon entropy of s, in bits per character.
func entropy(s string) float64 {
	var counts [256]int32
	for i := 0; i < len(s); i++ {
		counts[s[i]]++
	}
	h, n := 0.0, float64(len(s))
	for _, c := range counts {
		if c > 0 {
			p := float64(c) / n
			h -= p * math.Log2(p)
		}
	}
	return h
}

// encodedText reports whether s is base64 (standard or url-safe) of
// ordinary text: printable UTF-8 with spaces between words. Base64 of
// "user:password" (an HTTP Basic credential) has no space and is kept.
func encodedText(s string) bool {
	if len(s)%4 != 0 || len(s) > 4096 {
		return false
	}
	var buf [3072]byte
	for _, enc := range [...]*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
		n, err := enc.Decode(buf[:], []byte(s))
		if err != nil {
			continue
		}
		d := buf[:n]
		if !utf8.Valid(d) {
			return false
		}
		spaces := 0
		for _, r := range string(d) {
			if r == ' ' {
				spaces++
			} else if !unicode.IsPrint(r) && r != '\n' && r != '\t' {
				return false
			}
		}
		return spaces > 0
	}
	return false
}
