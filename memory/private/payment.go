package private

// ---- card ----

// hasCard finds a payment card number: 13 to 19 digits, written together
// or in groups joined by single spaces or dashes ("4111 1111 1111 1111",
// "3782-822463-10005"), that pass the Luhn check and start with a number
// that a card network issues, at a length that network uses (see
// cardLengthOK). The prefix and length rule is what keeps the one in ten
// random numbers that pass Luhn (timestamps, ids) from matching.
//
// As with phone numbers, a candidate inside a longer run of groups may
// start or end only at a space, so "card 4111 1111 1111 1111 exp 12 28"
// is found, and a dashed id is never cut. Not a card: a Luhn-invalid
// number, an order or ticket id after "#" or "№", a number glued to
// letters or to a decimal point, groups of fewer than 4 digits (except the
// last: "4222 2222 2222 2"), amounts.
func hasCard(text string) bool {
	for i := 0; i < len(text); {
		if !isDigit(text[i]) {
			i++
			continue
		}
		if !cardStartOK(text, i) {
			for i < len(text) && (isAlnum(text[i]) || text[i] == '.' || text[i] == ',' || text[i] == '-') {
				i++
			}
			continue
		}
		var r cardRun
		end := r.scan(text, i)
		if r.judge(text, end) {
			return true
		}
		i = end
	}
	return false
}

// cardStartOK reports whether a card number may start at text[i].
func cardStartOK(text string, i int) bool {
	if i == 0 {
		return true
	}
	p := runeBefore(text, i)
	if isWordRune(p) {
		return false
	}
	switch p {
	case '#', '№', '$', '€', '£', '¥', '₽', '/', '\\', '@', '+', '=', '%':
		return false
	case '.', ',', '-', ':':
		if i >= 2 && isDigit(text[i-2]) {
			return false
		}
	}
	return true
}

// maxCardGroups bounds the groups of one run (a 19-digit number has at
// most 19 one-digit groups, but cards are never written so).
const maxCardGroups = 8

// cardRun is a run of digit groups joined by one kind of separator.
type cardRun struct {
	n      int
	digits [maxCardGroups]int
	sep    [maxCardGroups]byte // what joins group i to group i-1
	start  [maxCardGroups]int
	end    [maxCardGroups]int
}

// scan reads the run at text[i:] and returns where it ends.
func (r *cardRun) scan(text string, i int) int {
	pos, end := i, i
	var sep, kind byte
	for r.n < maxCardGroups {
		s := pos
		for pos < len(text) && isDigit(text[pos]) {
			pos++
		}
		if pos == s {
			break
		}
		r.digits[r.n], r.sep[r.n], r.start[r.n], r.end[r.n] = pos-s, sep, s, pos
		r.n++
		end = pos
		if pos+1 >= len(text) || !(text[pos] == ' ' || text[pos] == '-') || !isDigit(text[pos+1]) {
			break
		}
		// One kind of separator in a run: "4111 1111-1111" is two runs.
		if kind != 0 && text[pos] != kind {
			break
		}
		kind, sep = text[pos], text[pos]
		pos++
	}
	if end == i { // more digits than a group holds: skip them
		for end < len(text) && isDigit(text[end]) {
			end++
		}
	}
	return end
}

// judge tries the stretches of the run that start and end at a space or
// at the run's ends.
func (r *cardRun) judge(text string, end int) bool {
	endOK := cardEndOK(text, end)
	for a := 0; a < r.n; a++ {
		if a > 0 && r.sep[a] != ' ' {
			continue
		}
		total := 0
		for b := a; b < r.n; b++ {
			total += r.digits[b]
			if total > 19 {
				break
			}
			if b < r.n-1 && r.sep[b+1] != ' ' {
				continue
			}
			if b == r.n-1 && !endOK {
				continue
			}
			if total >= 13 && r.grouped(a, b) && cardNumber(text, r.start[a], r.end[b], total) {
				return true
			}
		}
	}
	return false
}

// grouped reports whether groups a..b are grouped as cards are printed:
// one group, or groups of 4 to 6 digits with a last one of 1 to 6.
func (r *cardRun) grouped(a, b int) bool {
	for k := a; k < b; k++ {
		if r.digits[k] < 4 || r.digits[k] > 6 {
			return false
		}
	}
	return a == b || r.digits[b] <= 6
}

// cardEndOK reports whether a card number may end at text[end].
func cardEndOK(text string, end int) bool {
	if end >= len(text) {
		return true
	}
	r := runeAt(text, end)
	if isWordRune(r) {
		return false
	}
	switch r {
	case '%', '@', '/', '\\', '+':
		return false
	case '.', ',', '-', ':':
		if end+1 < len(text) && isDigit(text[end+1]) {
			return false
		}
	}
	return true
}

// cardNumber checks the digits of s[from:to] (n of them, separators
// skipped): a network's prefix and length, and the Luhn check.
func cardNumber(s string, from, to, n int) bool {
	var d [19]byte
	k := 0
	for i := from; i < to; i++ {
		if isDigit(s[i]) {
			d[k] = s[i] - '0'
			k++
		}
	}
	return cardLengthOK(d[:n]) && luhn(d[:n])
}

// cardLengthOK reports whether a card network issues numbers that start
// as d does, at its length (ISO/IEC 7812 issuer prefixes):
// Visa 4 (13, 16, 19); Mastercard 51-55 and 2221-2720 (16); Mir 2200-2204
// (16-19); American Express 34, 37 (15); Diners Club 30, 36, 38, 39
// (14-19); JCB 3528-3589 (16-19); Discover, UnionPay, Maestro, RuPay and
// the rest of 5 and 6 (12-19, so 13-19 here).
func cardLengthOK(d []byte) bool {
	n := len(d)
	p2 := int(d[0])*10 + int(d[1])
	p4 := p2*100 + int(d[2])*10 + int(d[3])
	switch {
	case d[0] == 4:
		return n == 13 || n == 16 || n == 19
	case p4 >= 2200 && p4 <= 2204:
		return n >= 16
	case p4 >= 2221 && p4 <= 2720:
		return n == 16
	case p2 == 34 || p2 == 37:
		return n == 15
	case p2 == 30 || p2 == 36 || p2 == 38 || p2 == 39:
		return n >= 14
	case p4 >= 3528 && p4 <= 3589:
		return n >= 16
	case d[0] == 5 || d[0] == 6:
		return true
	}
	return false
}

// luhn reports whether the digits pass the Luhn (mod 10) check.
func luhn(d []byte) bool {
	sum := 0
	for i := len(d) - 1; i >= 0; i-- {
		v := int(d[i])
		if (len(d)-1-i)%2 == 1 {
			v *= 2
			if v > 9 {
				v -= 9
			}
		}
		sum += v
	}
	return sum%10 == 0
}

// ---- IBAN ----

// hasIBAN finds an International Bank Account Number: a country code, two
// check digits and the account (BBAN), written together or in groups of
// four ("GB82 WEST 1234 5698 7654 32"), in either case; its length must be
// the one its country registered (ibanLengths, the SWIFT registry) and it
// must pass the ISO 13616 mod-97 check. Countries not in the registry are
// not matched, so a random "AB12..." identifier passes only where the
// one-in-97 checksum also does.
func hasIBAN(text string) bool {
	for i := 0; i+15 <= len(text); i++ {
		if !isASCIILetter(text[i]) || !isASCIILetter(text[i+1]) || !isDigit(text[i+2]) || !isDigit(text[i+3]) {
			continue
		}
		if i > 0 && isWordRune(runeBefore(text, i)) {
			continue
		}
		if ibanAt(text, i) {
			return true
		}
	}
	return false
}

// ibanAt judges the IBAN that may start at text[i].
func ibanAt(text string, i int) bool {
	cc := [2]byte{lowerASCII(text[i]) - 'a' + 'A', lowerASCII(text[i+1]) - 'a' + 'A'}
	want := ibanLengths[string(cc[:])]
	if want == 0 {
		return false
	}
	var buf [34]byte
	n, pos := 0, i
	spaced := false
	for n < want && pos < len(text) {
		c := text[pos]
		if c == ' ' && n%4 == 0 && n > 0 && (n == 4 || spaced) && pos+1 < len(text) && isAlnum(text[pos+1]) {
			spaced = true
			pos++
			continue
		}
		if !isAlnum(c) {
			break
		}
		buf[n] = lowerASCII(c)
		n++
		pos++
	}
	if n != want || (pos < len(text) && isWordRune(runeAt(text, pos))) {
		return false
	}
	return mod97(buf[:n]) == 1
}

// mod97 is the IBAN, its first four characters moved to the end and its
// letters read as 10..35, modulo 97 (ISO 13616; a valid IBAN gives 1).
func mod97(iban []byte) int {
	rem := 0
	for k := 0; k < len(iban); k++ {
		c := iban[(k+4)%len(iban)]
		switch {
		case isDigit(c):
			rem = (rem*10 + int(c-'0')) % 97
		case isLower(c):
			rem = (rem*100 + int(c-'a') + 10) % 97
		}
	}
	return rem
}

// ibanLengths are the IBAN lengths of the countries in the SWIFT IBAN
// registry.
var ibanLengths = map[string]int{
	"AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16,
	"BG": 22, "BH": 22, "BI": 27, "BR": 29, "BY": 28, "CH": 21, "CR": 22,
	"CY": 28, "CZ": 24, "DE": 22, "DJ": 27, "DK": 18, "DO": 28, "EE": 20,
	"EG": 29, "ES": 24, "FI": 18, "FK": 18, "FO": 18, "FR": 27, "GB": 22,
	"GE": 22, "GI": 23, "GL": 18, "GR": 27, "GT": 28, "HN": 28, "HR": 21,
	"HU": 28, "IE": 22, "IL": 23, "IQ": 23, "IS": 26, "IT": 27, "JO": 30,
	"KW": 30, "KZ": 20, "LB": 28, "LC": 32, "LI": 21, "LT": 20, "LU": 20,
	"LV": 21, "LY": 25, "MC": 27, "MD": 24, "ME": 22, "MK": 19, "MN": 20,
	"MR": 27, "MT": 31, "MU": 30, "NI": 28, "NL": 18, "NO": 15, "OM": 23,
	"PK": 24, "PL": 28, "PS": 29, "PT": 25, "QA": 29, "RO": 24, "RS": 22,
	"RU": 33, "SA": 24, "SC": 31, "SD": 18, "SE": 24, "SI": 19, "SK": 24,
	"SM": 27, "SO": 23, "ST": 25, "SV": 28, "TL": 23, "TN": 24, "TR": 26,
	"UA": 29, "VA": 22, "VG": 24, "XK": 20, "YE": 30,
}
