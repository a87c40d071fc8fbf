package private

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// hasPassword finds a password, passcode or PIN stated with its value, in
// English, Russian, German, French or Spanish: a word that names one
// ("password", "pw", "passcode", "PIN", "пароль", "пин-код", "Passwort",
// "mot de passe", "contraseña"...), optionally what it is for ("the wifi
// password for the office is ..."), a connector (":", "=", "is", "—",
// "это", "ist", "est", "es"...), then the value.
//
// Without a connector the value must look like one: digits for a PIN
// ("PIN code 1234", "ПИН 4417"), or letters with digits or symbols for a
// password ("password hunter2", "с паролем qwerty123"), so that "password
// reset link" and "I forgot my password" stay clear. A value that says
// there is none ("the password is wrong", "пароль неверный", "password:
// required", "Password: ****"), a placeholder ("<password>", "$DB_PASS")
// or a name from code ("password = cfg.Password", "password: string") does
// not count; nor does a PIN that is not 4 to 8 digits ("what is a
// PIN?"), nor the English word "pin" followed by a number ("the pin 2048
// of the connector"), unless written "PIN", or with a connector or
// "code" ("my pin is 4417", "pin code 1234"). Door and access codes count when named as
// such ("door code 1234", "код от домофона 1234", "код доступа 4417").
func hasPassword(text string) bool {
	for i := 0; i < len(text); {
		if c := text[i]; c < utf8.RuneSelf {
			if !isASCIILetter(c) {
				i++
				continue
			}
		} else if r, n := utf8.DecodeRuneInString(text[i:]); !unicode.IsLetter(r) {
			i += n
			continue
		}
		s := i
		i = wordEnd(text, i)
		if s > 0 && isDigitOrLetter(runeBefore(text, s)) {
			continue
		}
		if next := runeAt(text, i); isDigitOrLetter(next) || next == '_' {
			continue // "password_hash", "pin2"
		}
		t, after, ok := trigger(text, s, i)
		if ok && stated(text, after, t) {
			return true
		}
	}
	return false
}

// wordEnd is where the word at text[i:] ends: letters, and hyphens
// between letters ("пин-код", "wi-fi").
func wordEnd(text string, i int) int {
	for i < len(text) {
		if isASCIILetter(text[i]) {
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(text[i:])
		if unicode.IsLetter(r) {
			i += n
			continue
		}
		if r == '-' && unicode.IsLetter(runeAt(text, i+1)) {
			i++
			continue
		}
		break
	}
	return i
}

func isDigitOrLetter(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

// secretKind is what a trigger word names.
type secretKind uint8

const (
	passwordKind secretKind = iota + 1 // any value
	shortKind                          // "pw", "pwd", "pass": any value, after ":" or "=" only
	pinKind                            // 4 to 8 digits
	pinWordKind                        // "pin", "Pin": a PIN only with a connector or "code"
	codeKind                           // a door or access code: 3 to 8 digits
)

// triggerWords name a password or a PIN, in lower case.
var triggerWords = map[string]secretKind{
	"password": passwordKind, "passwd": passwordKind, "passphrase": passwordKind,
	"passcode": passwordKind, "passwort": passwordKind, "kennwort": passwordKind,
	"contraseña": passwordKind, "contrasena": passwordKind, "clave": passwordKind,
	"пароль": passwordKind, "пароля": passwordKind, "паролем": passwordKind,
	"pw": shortKind, "pwd": shortKind, "pass": shortKind,
	"pin": pinKind, "pincode": pinKind, "pin-code": pinKind, "pin-код": pinKind,
	"пин": pinKind, "пинкод": pinKind, "пин-код": pinKind,
}

// codeOwners are the words that make "code" a door or access code, in
// lower case: before "code" in English, after "код" in Russian.
var codeOwners = map[string]bool{
	"door": true, "gate": true, "alarm": true, "access": true, "entry": true,
	"safe": true, "lock": true, "garage": true, "keypad": true, "building": true,
	"домофона": true, "подъезда": true, "доступа": true, "двери": true,
	"сейфа": true, "замка": true, "калитки": true, "сигнализации": true,
	"ворот": true, "от": true,
}

// trigger reports whether the word text[s:e] names a password or a PIN,
// and where what follows it starts.
func trigger(text string, s, e int) (secretKind, int, bool) {
	word := text[s:e]
	if len(word) < 2 || len(word) > 24 {
		return 0, 0, false
	}
	switch unicode.ToLower(runeAt(word, 0)) {
	case 'p', 'k', 'c', 'm', 'п', 'к':
	default:
		return 0, 0, false
	}
	var buf [64]byte
	lower := lowerBytes(buf[:0], word)
	if k, ok := triggerWords[string(lower)]; ok {
		if k == pinKind && word != "PIN" && string(lower) == "pin" {
			k = pinWordKind // the English word: "pin 13", "the pin 2048 of the connector"
		}
		return k, e, true
	}
	switch {
	case string(lower) == "mot": // "mot de passe"
		rest := text[e:]
		if len(rest) >= 9 && strings.EqualFold(rest[:9], " de passe") && !isDigitOrLetter(runeAt(rest, 9)) {
			return passwordKind, e + 9, true
		}
	case string(lower) == "code":
		if codeOwners[string(lowerBytes(buf[:0], lastWord(text[:s])))] {
			return codeKind, e, true
		}
	case string(lower) == "код":
		w, we := nextWord(text, e)
		if codeOwners[string(lowerBytes(buf[:0], w))] {
			if strings.EqualFold(w, "от") { // "код от домофона": skip what it opens
				_, we = nextWord(text, we)
			}
			return codeKind, we, true
		}
	}
	return 0, 0, false
}

// lastWord is the word that ends text, past spaces.
func lastWord(text string) string {
	e := len(strings.TrimRight(text, " \t"))
	s := e
	for s > 0 {
		r, n := utf8.DecodeLastRuneInString(text[:s])
		if !unicode.IsLetter(r) {
			break
		}
		s -= n
	}
	return text[s:e]
}

// nextWord is the word after spaces at text[i:], and where it ends.
func nextWord(text string, i int) (string, int) {
	j := skipSpaces(text, i)
	e := wordEnd(text, j)
	return text[j:e], e
}

// skipSpaces is i past spaces and tabs (a value stays on its line).
func skipSpaces(text string, i int) int {
	for i < len(text) && (text[i] == ' ' || text[i] == '\t') {
		i++
	}
	return i
}

// fillerWords start what a password is for: "password for the router
// is", "пароль от почты —", "Passwort für WLAN:", "mot de passe du wifi".
var fillerWords = map[string]bool{
	"for": true, "to": true, "of": true, "on": true, "at": true,
	"от": true, "для": true, "к": true, "на": true,
	"für": true, "fur": true, "zum": true, "zur": true, "vom": true,
	"pour": true, "du": true, "de": true, "des": true,
	"para": true, "del": true,
	"code": true, "number": true, "код": true, "номер": true, // "PIN code", "PIN number"
}

// qualifierWords make a PIN of the English "pin": "pin code 1234".
var qualifierWords = map[string]bool{"code": true, "number": true}

// connectorWords join a name to its value.
var connectorWords = map[string]bool{
	"is": true, "was": true, "это": true, "будет": true, "был": true,
	"ist": true, "lautet": true, "war": true, "est": true, "était": true,
	"es": true, "era": true,
}

// laterWords may stand between a connector and the value.
var laterWords = map[string]bool{
	"now": true, "still": true, "currently": true, "just": true,
	"теперь": true, "сейчас": true, "jetzt": true, "maintenant": true, "ahora": true,
}

// stated reports whether what follows a trigger, text[i:], states its
// value.
func stated(text string, i int, k secretKind) bool {
	connected, qualified, from := false, false, i
	// What it is for, at most four words: "password for the office wifi".
	for words, filler := 0, false; words <= 4; words++ {
		i = skipSpaces(text, i)
		if c, ok := connector(text, i, k == shortKind); ok {
			i, connected = c, true
			break
		}
		w, e := nextWord(text, i)
		if w == "" {
			// Not a word: a value straight away ("PIN 4417") or nothing.
			// A quoted or bracketed word of what it is for: skip it.
			if filler && i < len(text) && strings.ContainsRune("\"'«“(", runeAt(text, i)) {
				_, next := readValue(text, i)
				if next > i {
					i = next
					continue
				}
			}
			break
		}
		if words == 0 && !isWord(fillerWords, w) && !digitsOnly(k) {
			break // the next word may be the value: "password hunter2"
		}
		filler = true
		qualified = qualified || isWord(qualifierWords, w)
		i = e
		// Tokens glued to a word ("wi-fi", "5G") belong to it.
		for i < len(text) && (isAlnum(text[i]) || text[i] == '-' || text[i] == '.') && !(text[i] == '.' && (i+1 >= len(text) || text[i+1] == ' ')) {
			i++
		}
		if words == 4 {
			return false // too far: a sentence about a password
		}
	}
	if !connected && (k == shortKind || i == from || (i < len(text) && !isDigitOrLetter(runeAt(text, i)) && !strings.ContainsRune("\"'`«“„", runeAt(text, i)))) {
		return false // a value must stand apart: not "${DB_PASSWORD}@db"
	}
	if connected {
		// "is now ...", "is: ..."
		i = skipSpaces(text, i)
		if w, e := nextWord(text, i); isWord(laterWords, w) {
			i = skipSpaces(text, e)
		}
		if i < len(text) && text[i] == ':' {
			i = skipSpaces(text, i+1)
		}
		if i < len(text) && text[i] == '\n' { // "Password:\nhunter2"
			i = skipSpaces(text, i+1)
		}
	}
	v, _ := readValue(text, i)
	quoted := i < len(text) && strings.ContainsRune("\"'`«“„", runeAt(text, i))
	switch k {
	case pinWordKind:
		return (connected || qualified) && digitCode(v, 4, 8)
	case pinKind:
		return digitCode(v, 4, 8)
	case codeKind:
		return digitCode(v, 3, 8)
	}
	return passwordValue(v, connected, quoted)
}

// digitsOnly reports whether k's values are digits: then any word may
// stand between the name and the value ("PIN-код карты 0000", "pin code
// for my card 1234"), since a word is never the value.
func digitsOnly(k secretKind) bool { return k == pinKind || k == pinWordKind || k == codeKind }

// connector reports whether a connector starts at text[i], and where
// what follows it starts; symbolOnly takes ":", "=" and arrows only.
func connector(text string, i int, symbolOnly bool) (int, bool) {
	if i >= len(text) {
		return i, false
	}
	rest := text[i:]
	for _, c := range [...]string{":=", "=>", "->", ":", "=", "→"} {
		if strings.HasPrefix(rest, c) {
			return i + len(c), true
		}
	}
	if symbolOnly {
		return i, false
	}
	for _, c := range [...]string{"—", "–"} {
		if strings.HasPrefix(rest, c) {
			return i + len(c), true
		}
	}
	if strings.HasPrefix(rest, "- ") || strings.HasPrefix(rest, "-\t") {
		return i + 1, true
	}
	w, e := nextWord(text, i)
	if isWord(connectorWords, w) {
		return e, true
	}
	return i, false
}

// readValue reads the value at text[i:]: a quoted string, or everything
// up to a space without the punctuation that ends a sentence. It returns
// the value and where it ends.
func readValue(text string, i int) (string, int) {
	if i >= len(text) {
		return "", i
	}
	q, n := utf8.DecodeRuneInString(text[i:])
	if closing, ok := quotePairs[q]; ok {
		j := strings.IndexRune(text[i+n:], closing)
		if j >= 0 && j <= 128 && !strings.ContainsAny(text[i+n:i+n+j], "\n") {
			return text[i+n : i+n+j], i + n + j + utf8.RuneLen(closing)
		}
	}
	e := i
	for e < len(text) && e-i < 256 && text[e] != ' ' && text[e] != '\t' && text[e] != '\n' && text[e] != '\r' {
		e++
	}
	v := strings.TrimRight(text[i:e], ".,;!?)]}»\"'`”")
	v = strings.TrimLeft(v, "\"'`«“„(")
	return v, e
}

var quotePairs = map[rune]rune{'"': '"', '\'': '\'', '`': '`', '«': '»', '“': '”', '„': '“'}

// digitCode reports whether v is a PIN or door code: lo to hi digits,
// with a "#", "*" or a letter K/К (some door phones) at one end.
func digitCode(v string, lo, hi int) bool {
	v = strings.TrimSuffix(strings.TrimPrefix(v, "#"), "#")
	v = strings.Trim(v, "*")
	for _, k := range [...]string{"K", "k", "К", "к"} {
		v = strings.TrimSuffix(strings.TrimPrefix(v, k), k)
	}
	if len(v) < lo || len(v) > hi {
		return false
	}
	for i := 0; i < len(v); i++ {
		if !isDigit(v[i]) {
			return false
		}
	}
	return true
}

// passwordValue reports whether v is a password's value. After a
// connector, or in quotes, any value of 3 or more characters that is not a
// word saying there is none; without one, only a value that mixes letters
// with digits or symbols.
func passwordValue(v string, connected, quoted bool) bool {
	if utf8.RuneCountInString(v) < 3 || placeholder(v) || dottedName(v) {
		return false
	}
	if strings.HasPrefix(v, "/") && strings.Count(v, "/") > 1 {
		return false // a path ("pwd: /home/me")
	}
	var letters, others bool
	for _, r := range v {
		if unicode.IsLetter(r) {
			letters = true
		} else {
			others = true
		}
	}
	if !letters && !others {
		return false
	}
	if quoted {
		return true
	}
	if !connected {
		// "password hunter2", "пароль 12345678"
		return (letters && others) || (!letters && digitCode(v, 4, 64))
	}
	if isWord(noValueWords, v) {
		return false
	}
	// Only dashes and dots: a line, not a value.
	return strings.Trim(v, "-—–.…_=*") != ""
}

// noValueWords, after "password is", say something about a password
// rather than give it. In lower case.
var noValueWords = setOf(
	// English
	"a", "an", "the", "is", "was", "not", "no", "too", "very", "so", "also",
	"still", "now", "just", "being", "been", "be", "required", "optional",
	"needed", "necessary", "mandatory", "incorrect", "correct", "wrong",
	"invalid", "valid", "expired", "expiring", "changed", "reset", "updated",
	"saved", "stored", "hashed", "encrypted", "encoded", "protected", "set",
	"unset", "empty", "blank", "missing", "same", "different", "weak",
	"strong", "secure", "insecure", "safe", "unsafe", "long", "short",
	"simple", "complex", "hard", "easy", "sensitive", "case-sensitive",
	"hidden", "visible", "shown", "forgotten", "lost", "known", "unknown",
	"compromised", "leaked", "locked", "generated", "sent", "my", "your",
	"his", "her", "their", "our", "its", "this", "that", "it", "in", "on",
	"at", "for", "to", "of", "from", "with", "by", "and", "or", "but", "if",
	"when", "what", "which", "how", "who", "where", "why", "here", "there",
	"below", "above", "attached", "ok", "okay", "fine", "good", "bad",
	"great", "something", "anything", "nothing", "none", "null", "nil",
	"undefined", "true", "false", "string", "str", "int", "bool", "text",
	"field", "manager", "policy", "hint", "prompt", "change", "protection",
	"strength", "length", "characters", "chars", "letters", "digits",
	"mismatch", "match", "matches", "does", "doesn't", "don't", "will",
	"would", "should", "must", "can", "could", "may", "might", "needs",
	"has", "have", "had", "incorrectly", "secret", "private", "same",
	"yours", "mine", "stolen", "please", "enter", "type", "see", "ask",
	"requirements", "rules", "reuse",
	// Russian
	"не", "нет", "это", "неверный", "неправильный", "верный", "правильный",
	"сброшен", "сброшён", "изменён", "изменен", "забыт", "забыл", "забыла",
	"неизвестен", "простой", "сложный", "слабый", "надёжный", "надежный",
	"от", "для", "к", "в", "на", "и", "или", "но", "мой", "твой", "ваш",
	"его", "её", "их", "был", "была", "будет", "такой", "очень", "слишком",
	"тот", "же", "тоже", "совпадает", "обязателен", "обязательно", "нужен",
	"пустой", "скрыт", "истёк", "истек", "введите", "укажите", "какой",
	// German
	"ist", "nicht", "falsch", "richtig", "ungültig", "erforderlich",
	"vergessen", "zu", "der", "die", "das", "ein", "eine", "mein", "dein",
	"sehr", "geändert", "zurückgesetzt", "leer",
	// French
	"est", "pas", "faux", "requis", "oublié", "trop", "le", "la", "les",
	"un", "une", "mon", "ton", "votre", "changé", "réinitialisé", "vide",
	// Spanish
	"es", "incorrecta", "incorrecto", "requerida", "olvidé", "demasiado",
	"el", "los", "una", "mi", "tu", "su", "cambiada", "vacía",
)

// lowerBytes appends s in lower case to buf.
func lowerBytes(buf []byte, s string) []byte {
	for _, r := range s {
		buf = utf8.AppendRune(buf, unicode.ToLower(r))
	}
	return buf
}

// isWord reports whether w, in lower case, is in set; without allocating.
func isWord(set map[string]bool, w string) bool {
	if w == "" || len(w) > 48 {
		return false
	}
	var buf [64]byte
	return set[string(lowerBytes(buf[:0], w))]
}

func setOf(words ...string) map[string]bool {
	m := make(map[string]bool, len(words))
	for _, w := range words {
		m[w] = true
	}
	return m
}
