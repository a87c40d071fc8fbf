// Package private finds what makes a memory private: contact details,
// payment data, secrets and passwords in its text.
//
// The detectors run when a memory is written, so that a private memory is
// never sent to a cloud model. A false alarm only keeps a memory on the
// local machine, so they lean towards marking; but the common near-misses
// (dates, versions, order numbers, amounts, checksum-invalid numbers,
// hashes, paths, a password mentioned without a value) are left alone.
//
// Every detector is a single left-to-right scan, or a few substring
// searches, over the text, with small anchored checks at the few places
// that could match; nothing is backtracking, and nothing is kept between
// calls, so Detect is safe for concurrent use.
package private

// Reasons, as metadata.private_why lists them.
const (
	Email    = "email"
	Phone    = "phone"
	Card     = "card"
	IBAN     = "iban"
	Secret   = "secret"
	Password = "password"
)

// detector is one kind of private data: its reason and its test.
type detector struct {
	reason string
	found  func(text string) bool
}

// detectors, in the order Detect reports their reasons (the constants').
var detectors = [...]detector{
	{Email, hasEmail},
	{Phone, hasPhone},
	{Card, hasCard},
	{IBAN, hasIBAN},
	{Secret, hasSecret},
	{Password, hasPassword},
}

// Detect returns the reasons text is private, each once, in the order of the constants above; nil when none.
func Detect(text string) []string {
	var out []string
	for _, d := range detectors {
		if d.found(text) {
			if out == nil {
				out = make([]string, 0, len(detectors))
			}
			out = append(out, d.reason)
		}
	}
	return out
}

// Shared byte and rune classes.

func isDigit(c byte) bool       { return c >= '0' && c <= '9' }
func isUpper(c byte) bool       { return c >= 'A' && c <= 'Z' }
func isLower(c byte) bool       { return c >= 'a' && c <= 'z' }
func isASCIILetter(c byte) bool { return isUpper(c) || isLower(c) }
func isAlnum(c byte) bool       { return isDigit(c) || isASCIILetter(c) }

// lowerASCII is c in lower case when it is an ASCII letter.
func lowerASCII(c byte) byte {
	if isUpper(c) {
		return c + 'a' - 'A'
	}
	return c
}
