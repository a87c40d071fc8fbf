package private

import (
	"regexp"
	"strings"
)

// cardRE finds 13 to 19 digits, in groups separated by one space or dash.
var cardRE = regexp.MustCompile(`\b\d(?:[ \-]?\d){12,18}\b`)

// hasCard finds a payment card number: 13 to 19 digits that pass the Luhn
// check, starting as the card networks' numbers do (2-6).
func hasCard(text string) bool {
	if digitRun(text, " -") < 13 {
		return false
	}
	for _, loc := range cardRE.FindAllStringIndex(text, -1) {
		m := text[loc[0]:loc[1]]
		if ibanHead.MatchString(text[:loc[0]]) {
			continue // the rest of an IBAN written in groups
		}
		digits := strings.Map(func(r rune) rune {
			if r >= '0' && r <= '9' {
				return r
			}
			return -1
		}, m)
		if len(digits) >= 13 && len(digits) <= 19 && digits[0] >= '2' && digits[0] <= '6' && luhn(digits) {
			return true
		}
	}
	return false
}

// ibanHead is an IBAN's country code and check digits just before.
var ibanHead = regexp.MustCompile(`\b[A-Z]{2}\d{2} ?$`)

// luhn reports whether the digits pass the Luhn check.
func luhn(digits string) bool {
	sum, double := 0, false
	for i := len(digits) - 1; i >= 0; i-- {
		d := int(digits[i] - '0')
		if double {
			if d *= 2; d > 9 {
				d -= 9
			}
		}
		sum += d
		double = !double
	}
	return sum%10 == 0
}

// ibanRE finds a country code, two check digits and 11 to 30 letters or
// digits, with or without a space every 4.
var ibanRE = regexp.MustCompile(`\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}\b`)

// ibanLengths are the IBAN lengths of the countries that use one most.
var ibanLengths = map[string]int{
	"AD": 24, "AT": 20, "BE": 16, "BG": 22, "CH": 21, "CY": 28, "CZ": 24, "DE": 22, "DK": 18, "EE": 20,
	"ES": 24, "FI": 18, "FR": 27, "GB": 22, "GR": 27, "HR": 21, "HU": 28, "IE": 22, "IS": 26, "IT": 27,
	"LI": 21, "LT": 20, "LU": 20, "LV": 21, "MC": 27, "MT": 31, "NL": 18, "NO": 15, "PL": 28, "PT": 25,
	"RO": 24, "RU": 33, "SE": 24, "SI": 19, "SK": 24, "SM": 27, "TR": 26, "UA": 29, "AE": 23, "SA": 24,
	"IL": 23, "BR": 29, "KZ": 20, "GE": 22, "RS": 22, "BA": 20, "ME": 22, "MK": 19, "AL": 28, "AZ": 28,
}

// hasIBAN finds an IBAN that passes the ISO 13616 mod-97 check, of its
// country's length when the country is known.
func hasIBAN(text string) bool {
	if !hasIBANHead(text) {
		return false
	}
	for _, m := range ibanRE.FindAllString(text, -1) {
		iban := strings.ReplaceAll(m, " ", "")
		if n, ok := ibanLengths[iban[:2]]; ok && len(iban) != n {
			// A run longer than the IBAN (text after it): try its length.
			if len(iban) < n {
				continue
			}
			iban = iban[:n]
		}
		if mod97(iban) {
			return true
		}
	}
	return false
}

// hasIBANHead reports whether s holds two capital letters and two digits
// in a row: a cheap test before the regexp.
func hasIBANHead(s string) bool {
	for i := 0; i+3 < len(s); i++ {
		if s[i] >= 'A' && s[i] <= 'Z' && s[i+1] >= 'A' && s[i+1] <= 'Z' && isDigit(s[i+2]) && isDigit(s[i+3]) {
			return true
		}
	}
	return false
}

// mod97 is the IBAN check: the first four characters moved to the end,
// letters as 10-35, the number mod 97 is 1.
func mod97(iban string) bool {
	s := iban[4:] + iban[:4]
	r := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '9':
			r = (r*10 + int(c-'0')) % 97
		case c >= 'A' && c <= 'Z':
			v := int(c-'A') + 10
			r = (r*100 + v) % 97
		default:
			return false
		}
	}
	return r == 1
}
