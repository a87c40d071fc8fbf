// Package private finds what makes a memory private: contact details,
// payment data, secrets and passwords in its text. A false alarm only
// keeps a memory on this machine, so the detectors lean towards marking;
// the near-misses that matter (dates, versions, order numbers, amounts,
// Luhn-invalid or checksum-invalid numbers, a password mentioned without
// a value) are left alone.
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

// detectors, in the order Detect reports their reasons.
var detectors = []struct {
	reason string
	found  func(string) bool
}{
	{Email, hasEmail},
	{Phone, hasPhone},
	{Card, hasCard},
	{IBAN, hasIBAN},
	{Secret, hasSecret},
	{Password, hasPassword},
}

// Detect returns the reasons text is private, each once, in the order of
// the constants above; nil when none.
func Detect(text string) []string {
	var out []string
	for _, d := range detectors {
		if d.found(text) {
			out = append(out, d.reason)
		}
	}
	return out
}
