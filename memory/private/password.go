package private

import (
	"regexp"
	"strings"
)

// passwordRE finds a password, passcode or PIN stated with its value:
// the word, then "is", a colon, a dash or an equals sign (or, for a PIN,
// nothing), then a value of 3 or more characters that is not a word
// saying there is none. English, Russian, German, French, Spanish.
var passwordRE = regexp.MustCompile(`(?i)(?:` +
	// English
	`\b(?:pass(?:word|code|phrase)|pwd|pw|wi-?fi key)\b(?:\s+(?:for|to|of)\s+[\p{L}\p{N}'’ ._-]{1,30}?)?\s*(?:is|was|=|:|-|—)\s*["'«]?[^\s"'»]{3,}` +
	`|\bpin(?:\s*code|\s*number)?\b\s*(?:is|was|=|:|-|—)?\s*\d{3,8}\b` +
	// Russian
	`|(?:пароль|пароля|код\s+доступа|код\s+от\s+[\p{L}]+)\s*(?:[—:=\-]|это|такой)?\s*["'«]?[^\s"'»]{3,}` +
	`|(?:пин-?\s*код|пин)\s*(?:[—:=\-]|это)?\s*\d{3,8}` +
	// German, French, Spanish
	`|\b(?:passwort|kennwort|mot\s+de\s+passe|contraseña|clave)\b\s*(?:ist|est|es|=|:|-|—)\s*["'«]?[^\s"'»]{3,}` +
	`)`)

// passwordHints are the keywords of passwordRE, lower case.
var passwordHints = []string{"pass", "pwd", "pw", "wi-fi key", "wifi key", "pin", "пароль", "пин", "код", "kennwort", "mot de passe", "contraseña", "clave"}

// noValue are what follows "password is" when nothing is given.
var noValue = regexp.MustCompile(`(?i)(?:is|was|=|:|-|—|это)\s*["'«]?(?:wrong|incorrect|invalid|expired|required|needed|missing|forgotten|lost|too|not|the|a|an|my|your|reset|неверный|неправильный|забыт)\b`)

// hasPassword finds a password or PIN stated with its value; "I forgot
// my password", "password reset link", "what is a PIN?" are not.
func hasPassword(text string) bool {
	// The regexp is slow: it reads only around the keywords.
	lower := strings.ToLower(text)
	for _, hint := range passwordHints {
		for from := 0; ; {
			i := strings.Index(lower[from:], hint)
			if i < 0 {
				break
			}
			i += from
			window := lower[max(0, i-24):min(len(lower), i+len(hint)+96)]
			for _, m := range passwordRE.FindAllString(window, -1) {
				if !noValue.MatchString(m) {
					return true
				}
			}
			from = i + len(hint)
		}
	}
	return false
}
