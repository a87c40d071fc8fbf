package private

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// cases are texts and the reasons Detect must give: what must be found,
// and the near-misses that must not.
var cases = []struct {
	text string
	want []string
}{
	// email
	{"Write to alice.smith+vera@example.co.uk tomorrow.", []string{Email}},
	{"ping @alice on slack", nil},
	{"the icon is logo@2x.png", nil},
	// phone
	{"Call me on +44 20 7946 0958.", []string{Phone}},
	{"My number is +7 (912) 345-67-89", []string{Phone}},
	{"office: +1-415-555-2671", []string{Phone}},
	{"call (415) 555-2671 after six", []string{Phone}},
	{"звони 8 912 345-67-89", []string{Phone}},
	{"the shop is on 020 7946 0958", []string{Phone}},
	{"+14155552671", []string{Phone}},
	{"We met on 2026-11-28 at 10:30.", nil},
	{"It was 28.11.2026.", nil},
	{"Upgrade to 1.24.0 first.", nil},
	{"Order #123456789 shipped.", nil},
	{"It cost $1,234,567.89 in total.", nil},
	{"The server is at 192.168.10.254.", nil},
	{"ISBN 978-3-16-148410-0 is the book.", nil},
	{"room 12 of 40, floor 3", nil},
	// card
	{"My card is 4111 1111 1111 1111.", []string{Card}},
	{"card 5500-0000-0000-0004 expires soon", []string{Card}},
	{"4111111111111112 is not valid", nil},
	{"tracking 1Z999AA10123456784", nil},
	// iban
	{"Pay to DE89 3704 0044 0532 0130 00 please", []string{IBAN}},
	{"IBAN GB82WEST12345698765432.", []string{IBAN}},
	{"DE89 3704 0044 0532 0130 01 is mistyped", nil},
	// secret
	{"my key is sk-proj-4f9aB2cD8eF0gH1iJ2kL3mN4oP5qR6sT", []string{Secret}},
	{"token ghp_1234567890abcdefghijABCDEFGHIJ123456", []string{Secret}},
	{"AKIAIOSFODNN7EXAMPLE is the access key", []string{Secret}},
	{"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.dBjftJeZ4CVPmB92K27uhbUJU1p1r_wW1gFWFOEjXk", []string{Secret}},
	{"-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAA", []string{Secret}},
	{"postgres://vera:S3cretPass@db.lan:5432/vera", []string{Secret}},
	{"the secret is Xk9mQ2vL7pR4tZ8wB3nH6jF1", []string{Secret}},
	{"commit 9fceb02d0ae598e95dc970b74767f19372d61af8 fixed it", nil},
	{"id 550e8400-e29b-41d4-a716-446655440000", nil},
	{"see https://github.com/vera-proxy/vera/blob/main/README.md", nil},
	{"file internationalization-configuration-guide.md", nil},
	// password
	{"my password is hunter2", []string{Password}},
	{"password: Tr0ub4dor&3", []string{Password}},
	{"the wifi password is cats-and-dogs", []string{Password}},
	{"My PIN is 4417", []string{Password}},
	{"PIN code 1234 for the door", []string{Password}},
	{"пароль: qwerty123", []string{Password}},
	{"мой пароль — котик2020", []string{Password}},
	{"пин-код 1234", []string{Password}},
	{"ПИН 4417", []string{Password}},
	{"Das Passwort ist Sonne123", []string{Password}},
	{"mot de passe : soleil42", []string{Password}},
	{"contraseña: gato1234", []string{Password}},
	{"I forgot my password again", nil},
	{"click the password reset link", nil},
	{"what is a PIN?", nil},
	{"the password is wrong", nil},
	// several
	{"Email bob@example.org, PIN 9921.", []string{Email, Password}},
	// nothing
	{"My sister Ana lives in Lisbon and loves hiking.", nil},
}

func TestDetect(t *testing.T) {
	for _, c := range cases {
		assert.Equal(t, c.want, Detect(c.text), c.text)
	}
}

// FuzzDetect: no panic, the same answer twice, known reasons in order.
func FuzzDetect(f *testing.F) {
	for _, c := range cases {
		f.Add(c.text)
	}
	order := []string{Email, Phone, Card, IBAN, Secret, Password}
	f.Fuzz(func(t *testing.T, text string) {
		got := Detect(text)
		if !slices.Equal(got, Detect(text)) {
			t.Fatalf("not deterministic on %q", text)
		}
		last := -1
		for _, r := range got {
			i := slices.Index(order, r)
			if i <= last {
				t.Fatalf("reasons %v out of order or unknown", got)
			}
			last = i
		}
	})
}

// BenchmarkDetect is the detectors' cost on the write path: a 2 KB turn
// with nothing private, and one with several kinds.
func BenchmarkDetect(b *testing.B) {
	plain := strings.Repeat("User: what should I cook tonight with rice, beans and 3 tomatoes?\nAssistant: Try a quick chili: fry onions, add the beans, simmer 20 minutes. ", 16)[:2048]
	mixed := plain[:1800] + " Call +44 20 7946 0958, card 4111 1111 1111 1111, password: hunter2."
	for _, c := range []struct{ name, text string }{{"plain-2KB", plain}, {"mixed-2KB", mixed}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(c.text)))
			for b.Loop() {
				Detect(c.text)
			}
		})
	}
}
