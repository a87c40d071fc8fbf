package private

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// tcase is a text and the reasons Detect must return for it, exactly.
type tcase struct {
	text string
	want []string
}

// none is what a text without private data gives.
var none []string

func r(reasons ...string) []string { return reasons }

// Fake keys of each vendor's shape (none is real).
const (
	openAIProj = "sk-proj-Xq7v2LmN9pR4sT8wZ1cY6bH3kJ5fG0dA-QeUiOaS_2x"
	openAI     = "sk-Xq7v2LmN9pR4sT8wZ1cY6bH3kJ5fG0dAQeUiOaS2xPl0Mn"
	anthropic  = "sk-ant-api03-Xq7v2LmN9pR4sT8wZ1cY6bH3kJ5fG0dAQeUiOaS2x-Pl0MnBvCx7AA"
	githubPAT  = "ghp_Xq7v2LmN9pR4sT8wZ1cY6bH3kJ5fG0dAQeUi"
	githubFine = "github_pat_11ABCDEFG0abcdefghijkl_Xq7v2LmN9pR4sT8wZ1cY6bH3kJ5fG0dAQeUiOaS2xPl0MnBvCx7"
	gitlab     = "glpat-Xq7v2LmN9pR4sT8wZ1cY"
	slack      = "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx"
	slackApp   = "xapp-1-A0123BCDEF4-1234567890123-abcdef0123456789"
	awsKey     = "AKIAIOSFODNN7EXAMPLE"
	awsTemp    = "ASIAY34FZKBOKMUTVV7A"
	googleKey  = "AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY"
	stripe     = "sk_live_51HxYzAbCdEfGhIjKlMnOpQr"
	stripePub  = "pk_live_51HxYzAbCdEfGhIjKlMnOpQr"
	hfToken    = "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"
	jwt        = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)

var emailCases = []tcase{
	{"write to john.doe@example.com please", r(Email)},
	{"mailto:ivan.petrov+news@mail.ru", r(Email)},
	{"Contact: a_b-c@sub.domain.co.uk.", r(Email)},
	{"пишите на иван@пример.рф", r(Email)},
	{"JANE@EXAMPLE.ORG", r(Email)},
	{"my address is anna@startup.io, thanks", r(Email)},
	// near-misses
	{"thanks @john for the review, cc @anna.smith", none},
	{"ssh root@localhost and then admin@intranet", none},
	{"use logo@2x.png and icon@3x.webp", none},
	{"assets: button@hover.svg, theme@dark.css", none},
	{"npm install lodash@4.17.21 react@latest", none},
	{"go get golang.org/x/tools@v0.1.0", none},
	{"git clone git@github.com:vera-proxy/vera.git", none},
	{"email me at john@ or at @", none},
	{"x@y.z and a..b@example.com", none},
}

var phoneCases = []tcase{
	{"call +44 20 7946 0958 tomorrow", r(Phone)},
	{"мой номер +7 (912) 345-67-89", r(Phone)},
	{"US office: +1-415-555-2671.", r(Phone)},
	{"(415) 555-2671", r(Phone)},
	{"звоните 8 912 345-67-89", r(Phone)},
	{"8 (800) 555-35-35 — бесплатно", r(Phone)},
	{"London: 020 7946 0958", r(Phone)},
	{"Berlin 030 1234567", r(Phone)},
	{"Paris 06 12 34 56 78", r(Phone)},
	{"415-555-2671 or 415.555.2671", r(Phone)},
	{"+14155552671", r(Phone)},
	{"tel:+79123456789", r(Phone)},
	{"call me at 4155552671", r(Phone)},
	{"телефон 89123456789", r(Phone)},
	{"on 2026-11-28 ring 020 7946 0958", r(Phone)},
	{"0044 20 7946 0958", r(Phone)},
	{"+7(912)345-67-89", r(Phone)},
	// near-misses
	{"the release is on 2026-11-28 at 12:30:45", none},
	{"встреча 28.11.2026 в 14:00", none},
	{"upgrade to 1.24.0 or 10.0.19041.1234", none},
	{"Order #123456789 shipped", none},
	{"total $1,234,567.89 and 1 234 567 ₽", none},
	{"we shipped 4155552671 units", none},
	{"server 192.168.1.1, gateway 10.0.0.1", none},
	{"ISBN 978-3-16-148410-0 and ISBN 0-306-40615-2", none},
	{"+1 (800) 123-4567", none}, // phone-shaped, but no valid number
	{"продано 8 500 000 штук за 80 000 000 рублей", none},
	{"unix time 1764288000 and 20261128143000", none},
	{"rooms 101 102 103 104", none},
	{"2026-11-28 14:30", none},
	{"555-1234", none},
}

var cardCases = []tcase{
	{"card 4111 1111 1111 1111", r(Card)},
	{"4111-1111-1111-1111", r(Card)},
	{"mastercard 5555555555554444", r(Card)},
	{"Amex 3782 822463 10005", r(Card)},
	{"card 4111 1111 1111 1111 exp 12 28", r(Card)},
	{"visa: 4539 5787 6362 1486.", r(Card)},
	{"JCB 3530 1113 3330 0000", r(Card)},
	{"Mir 2200 0000 0000 0004", r(Card)},
	// near-misses
	{"card 4111 1111 1111 1112", none}, // Luhn-invalid
	{"4111111111111112", none},
	{"Order #123456789", none},
	{"Order #4111111111111111", none},
	{"ticket 1764288000000000000", none}, // no network starts with 1
	{"1234 5678 9012 3456", none},
	{"price 4111.11 or 4,111,111,111", none},
}

var ibanCases = []tcase{
	{"IBAN GB82 WEST 1234 5698 7654 32", r(IBAN)},
	{"DE89370400440532013000", r(IBAN)},
	{"pay to fr14 2004 1010 0505 0001 3m02 606 today", r(IBAN)},
	{"NL91ABNA0417164300", r(IBAN)},
	{"CH93 0076 2011 6238 5295 7", r(IBAN)},
	{"Norway NO93 8601 1117 947", r(IBAN)},
	{"RU02 0445 2560 0407 0281 0412 3456 7890 1", r(IBAN)},
	// near-misses
	{"IBAN GB82 WEST 1234 5698 7654 33", none}, // checksum
	{"NL91ABNA0417164301", none},
	{"XX12 3456 7890 1234 56", none},                     // no such country
	{"NL91ABNA041716430012", none},                       // too long for NL
	{"NL58ABNA041716430 and DE863704004405320130", none}, // valid checksums, short for NL (18) and DE (22)
	{"GB82WEST12345698765432XYZ", none},                  // glued to a word
}

var secretCases = []tcase{
	{"key: " + openAIProj, r(Secret)},
	{"OPENAI_API_KEY=" + openAI, r(Secret)},
	{"use " + anthropic + " for claude", r(Secret)},
	{githubPAT, r(Secret)},
	{"token " + githubFine, r(Secret)},
	{"GitLab " + gitlab, r(Secret)},
	{"slack " + slack, r(Secret)},
	{"app token " + slackApp, r(Secret)},
	{"aws " + awsKey + " / " + awsTemp, r(Secret)},
	{"maps " + googleKey, r(Secret)},
	{"stripe " + stripe, r(Secret)},
	{"stripe " + stripePub, r(Secret)},
	{"hf " + hfToken, r(Secret)},
	{"Cookie: session=" + jwt, r(Secret)},
	{"-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAA\n-----END OPENSSH PRIVATE KEY-----", r(Secret)},
	{"-----BEGIN RSA PRIVATE KEY-----", r(Secret)},
	{"-----BEGIN PGP PRIVATE KEY BLOCK-----", r(Secret)},
	{"DATABASE_URL=postgres://admin:s3cr3tP4ss@db.internal:5432/app", r(Secret)},
	{"redis://:hunter2@cache:6379/0", r(Secret)},
	{"git remote https://bot:abc123@github.com/x/y.git", r(Secret)},
	{"aws_secret_access_key wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", r(Secret)},
	{"the key Zx9Qm2LpT7vR4sW8yB1nK5cH3jF6gD0a opens it", r(Secret)},
	{`api_key = "a1b2c3d4e5f6a7b8"`, r(Secret)},
	{`{"apiKey": "9f86d081884c7d659a2feaa0c55ad015"}`, r(Secret)},
	{"Authorization: Bearer abc123DEF456", r(Secret)},
	{"client_secret=Gx7k2Lq9Vw", r(Secret)},
	{"Basic dXNlcjpwYXNzd29yZDEyMzQ1Njc4OTA=", r(Secret)},
	// near-misses
	{"pseudopseudohypoparathyroidism and Donaudampfschifffahrtsgesellschaftskapitän", none},
	{"request 123e4567-e89b-12d3-a456-426614174000 failed", none},
	{"fixed in commit 9fceb02d0ae598e95dc970b74767f19372d61af8", none},
	{"sha256 e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", none},
	{"see /home/ivan/Projects/Vera2/memory/private/private_test.go", none},
	{"src/main/java/com/Example2/controllers/UserAccountController2.java", none},
	{"https://github.com/vera-proxy/vera/pull/123?tab=files#diff-2a", none},
	{"https://user@example.com/path and http://localhost:8080/x", none},
	{"SGVsbG8sIHdvcmxkISBIb3cgYXJlIHlvdSB0b2RheT8=", none}, // base64 of a sentence
	{"pip install sk-learn-pipeline-estimators", none},
	{"task-1234567890abcdefghijklm", none},
	{"TestDetectPhoneNumbersRegression2026", none},
	{"max_tokens: 4096, token: expired", none},
	{"GITHUB_TOKEN=${{ secrets.GITHUB_TOKEN }}", none},
	{"api_key = os.environ.get", none},
	{"-----BEGIN PUBLIC KEY----- and -----BEGIN CERTIFICATE-----", none},
	{"postgres://user:${DB_PASSWORD}@db/app", none},
	{"integrity sha384-oqVuAfXRKap7fdgcCY5uykM6+R9GqQ8K/uxy9rx7HNQlGYl1kPzQho1wx4JwY8wC", none},
	{"the bearer is a person; the secret is patience", none},
}

var passwordCases = []tcase{
	{"my password is hunter2", r(Password)},
	{"password: Tr0ub4dor&3", r(Password)},
	{"pw = swordfish42", r(Password)},
	{"the wifi password is CoffeeShop2024", r(Password)},
	{"the password for the office router is hunter22", r(Password)},
	{"my PIN is 4417", r(Password)},
	{"PIN code 1234", r(Password)},
	{"my passcode: 908172", r(Password)},
	{"password \"correct horse battery staple\"", r(Password)},
	{"password is now hunter3", r(Password)},
	{"Password:\nhunter2", r(Password)},
	{"DB_PASSWORD=hunter2", r(Password)},
	{"mysql -u root --password hunter2", r(Password)},
	{"пароль: qwerty123", r(Password)},
	{"мой пароль — Лето2024", r(Password)},
	{"Пароль от почты: solnce", r(Password)},
	{"с паролем qwerty123", r(Password)},
	{"пин-код 1234", r(Password)},
	{"ПИН 4417", r(Password)},
	{"код от домофона 1234", r(Password)},
	{"код доступа: 4417#", r(Password)},
	{"door code is 8842", r(Password)},
	{"Das Passwort ist Sommer2024", r(Password)},
	{"mot de passe : soleil42", r(Password)},
	{"la contraseña: gato1234", r(Password)},
	// near-misses
	{"I forgot my password", none},
	{"click the password reset link", none},
	{"what is a PIN?", none},
	{"reset your пароль", none},
	{"the password is wrong", none},
	{"Password: required", none},
	{"password: ********", none},
	{"пароль неверный", none},
	{"Enter your password:", none},
	{"password = cfg.Password", none},
	{"password: string", none},
	{"password: <your password>", none},
	{"password_hash = bcrypt", none},
	{"set pin 13 high", none},
	{"pin the tab", none},
	{"passwords are stored hashed", none},
	{"password-protected archive", none},
	{"the password is too short", none},
	{"Passwort vergessen?", none},
	{"код ошибки 404", none},
	{"error code 404", none},
}

// everydayCases are ordinary chat, code and log lines that come close to
// one kind or another, and the phrasings found while tuning.
var everydayCases = []tcase{
	{"Meeting moved to 14:30 on Nov 28; bring the Q3 report (pages 12-18).", none},
	{"Встреча перенесена на 28 ноября в 14:30, аудитория 305.", none},
	{"The population of Tokyo is 37,400,068 and of Moscow 12 655 050 people.", none},
	{"I ran `go test ./... -count=1 -race` and got 3 failures in 2.31s", none},
	{"Error: listen tcp 127.0.0.1:8080: bind: address already in use", none},
	{"docker run -p 11434:11434 -v /data/ollama:/root/.ollama ollama/ollama:0.5.7", none},
	{"version v1.2.3-rc.1+build.20261128", none},
	{"coordinates 55.7558, 37.6173; Pi is 3.14159265358979", none},
	{"Flight SU 1234 departs at 06:45, seat 12A, booking ref XKCD42", none},
	{"Model llama3.1:8b-instruct-q4_K_M uses 4.9 GB", none},
	{"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl user@host", none},
	{"const apiUrl = 'https://api.example.com/v1/users?page=2&limit=50'", none},
	{"See RFC 7519, section 4.1; ISO 8601 dates like 2026-11-28T14:30:00Z", none},
	{"my phone died yesterday, need a new one for 30000 rubles; call me tomorrow at 10", none},
	{"The password policy requires 12 characters.", none},
	{"Change your password at https://example.com/reset", none},
	{"PIN: the part that holds the hinge", none},
	{"password: the one we agreed on", none},
	{"Telegram: @ivan_petrov", none},
	{"The pin 2048 of the connector", none},
	{"price: 1 299,00 €; qty 3; EAN 4006381333931", none},
	{"order 2026112800001234 confirmed, tracking 1Z999AA10123456784", none},
	{"the password manager 1Password is great", none},
	{"Use passphrases rather than passwords.", none},
	{"SELECT * FROM users WHERE password = $1", none},
	{"if password == confirm_password {", none},
	{"token_type: bearer, expires_in: 3600", none},
	{"<img src=\"data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==\">", none},
	{"OAuth flow: client_id=vera-desktop&redirect_uri=http://localhost:3000/callback", none},
	{"The function getUserByEmailAddress(email string) returns *User", none},
	{"CSS: .btn-primary:hover { color: #0d6efd; }", none},
	{"In 2025 we sold 8 912 345 units; room 8 912 is on floor 3", none},
	{"Kubernetes pod nginx-deployment-66b6c48dd5-4jw2m restarted", none},
	{"AWS ARN arn:aws:iam::123456789012:role/MyRole", none},
	{"npm i @vera/sdk@2.1.0; go get github.com/nyaruka/phonenumbers@v1.8.1", none},
	{"The ticket JIRA-12345 and PR #6789; git rev-parse HEAD gives 9fceb02", none},
	{"hash: $2b$12$KIXQJd9pJ8b1vJ3v5w6YeO8kPqzYqXq5mF6tq3Jg3mWm0XcJ4kQ2y", r(Secret)}, // a bcrypt hash can be cracked offline
	{"wg genkey output: yAnz5TF+lXXJte14tji3zlMNq+hd2rYUIgJBgB3fBmk=", r(Secret)},
	{"my email: Ivan.Petrov@Gmail.COM", r(Email)},
	{"<anna@example.org>", r(Email)},
	{"Phone: +49 (0) 30 1234567", r(Phone)},
	{"+44 (0)20 7946 0958", r(Phone)},
	{"моб. 8-912-345-67-89", r(Phone)},
	{"+91 98765 43210 or +86 138 0013 8000", r(Phone)},
	{"+1 (415) 555-2671 ext. 12", r(Phone)},
	{"call 1-800-555-0199", r(Phone)},
	{"(495) 123-45-67", r(Phone)},
	{"8(912)345-67-89", r(Phone)},
	{"4000 0566 5566 5556", r(Card)},
	{"IBAN: ES91 2100 0418 4502 0005 1332", r(IBAN)},
	{"iban it60x0542811101000000123456", r(IBAN)},
	{"UA21 3223 1300 0002 6007 2335 6600 1", r(IBAN)},
	{"wifi: HomeNet / pass: sunshine99", r(Password)},
	{"login: root, pass: toor", r(Password)},
	{"логин admin пароль admin123", r(Password)},
	{"пароль от wifi — 12345678", r(Password)},
	{"пароль: \"мой секрет\"", r(Password)},
	{"PIN-код карты 0000", r(Password)},
	{"Mein Passwort lautet Sommer2024!", r(Password)},
	{"Le mot de passe est soleil42", r(Password)},
	{"Mi contraseña es gato1234", r(Password)},
	{"user=admin password=admin", r(Password)},
	{"пароль 12345", r(Password)},
	{"mongodb+srv://app:Sup3rS3cret@cluster0.abcd.mongodb.net/db", r(Secret)},
	{"SECRET_KEY = 'django-insecure-8f$k2!x@z#q1w3e5r7t9y'", r(Secret)},
	{"token: 4f9c2a7e8b1d3f5a6c0e9b2d4f7a1c3e", r(Secret)},
}

var mixedCases = []tcase{
	{"Hi, I'm Anna (anna@example.org, +7 912 345-67-89). Card 4111 1111 1111 1111, " +
		"IBAN DE89 3704 0044 0532 0130 00, key " + openAIProj + ", wifi password is CoffeeShop2024",
		r(Email, Phone, Card, IBAN, Secret, Password)},
	{"password: hunter2 and mail me at a@b.io", r(Email, Password)},
	{"", none},
	{"Nothing to see here: a plain sentence about the weather in 2026.", none},
}

func allCases() map[string][]tcase {
	return map[string][]tcase{
		"email": emailCases, "phone": phoneCases, "card": cardCases, "iban": ibanCases,
		"secret": secretCases, "password": passwordCases, "everyday": everydayCases,
		"mixed": mixedCases,
	}
}

func TestDetect(t *testing.T) {
	for kind, cases := range allCases() {
		t.Run(kind, func(t *testing.T) {
			for _, c := range cases {
				got := Detect(c.text)
				if !slices.Equal(got, c.want) || (c.want == nil) != (got == nil) {
					t.Errorf("Detect(%q) = %#v, want %#v", c.text, got, c.want)
				}
			}
		})
	}
}

// TestRandomTokenEntropy measures the two sides of minEntropy: random keys
// of 24 to 64 characters (base62, base64, base64url) must nearly all be
// found, and identifiers, slugs and paths that pass the other tests of
// randomToken must not.
func TestRandomTokenEntropy(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	alphabets := []string{
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789",
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/",
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_",
	}
	const n = 3000
	found, lowest := 0, 10.0
	for i := range n {
		alpha := alphabets[i%len(alphabets)]
		b := make([]byte, 24+rng.IntN(41))
		for j := range b {
			b[j] = alpha[rng.IntN(len(alpha))]
		}
		if hasSecret(" " + string(b) + " ") {
			found++
		}
		lowest = min(lowest, entropy(string(b)))
	}
	t.Logf("random keys found: %d/%d (lowest entropy %.2f bits/char)", found, n, lowest)
	if found < n*97/100 {
		t.Errorf("found %d of %d random keys, want at least 97%%", found, n)
	}
	notKeys := []string{
		"TestDetectPhoneNumbersRegression2026",
		"getUserAccountSettingsHandler2",
		"ProjectVeraMemoryPrivateDetector1",
		"ApplicationConfigurationManagerV2",
		"MyVeryLongPasswordManagerExport2024",
		"HTTPServerTimeoutConfiguration30s",
		"Windows10ProfessionalEditionSetup",
		"InternationalizationTestCase1234",
		"RecommendationEngineV3ModelWeights",
	}
	for _, s := range notKeys {
		if hasSecret(s) {
			t.Errorf("hasSecret(%q) = true (entropy %.2f), want false", s, entropy(s))
		}
	}
}

func TestLuhnAndMod97(t *testing.T) {
	digits := func(s string) []byte {
		var d []byte
		for _, c := range s {
			d = append(d, byte(c-'0'))
		}
		return d
	}
	for s, want := range map[string]bool{
		"79927398713": true, "79927398710": false, "4111111111111111": true,
		"378282246310005": true, "6011111111111117": true, "4111111111111112": false,
	} {
		if got := luhn(digits(s)); got != want {
			t.Errorf("luhn(%s) = %v, want %v", s, got, want)
		}
	}
	for s, want := range map[string]bool{"gb82west12345698765432": true, "gb82west12345698765433": false, "de89370400440532013000": true} {
		if got := mod97([]byte(s)) == 1; got != want {
			t.Errorf("mod97(%s) == 1 is %v, want %v", s, got, want)
		}
	}
}

// TestDetectConcurrent runs Detect from many goroutines: with -race it
// shows there is no shared mutable state.
func TestDetectConcurrent(t *testing.T) {
	texts := []string{mixedCases[0].text, typicalTurn, privateTurn}
	done := make(chan bool)
	for g := range 8 {
		go func() {
			for i := range 50 {
				Detect(texts[(g+i)%len(texts)])
			}
			done <- true
		}()
	}
	for range 8 {
		<-done
	}
}

// TestPhoneBudget: a text full of phone-shaped numbers that are no valid
// number stops asking libphonenumber after maxPhoneParses, and is taken
// to hold one.
func TestPhoneBudget(t *testing.T) {
	if got := Detect(adversarialTurn); !slices.Equal(got, r(Phone)) {
		t.Errorf("Detect(adversarial) = %v, want [phone]", got)
	}
	if got := Detect("(000) 000 00 00 00"); got != nil {
		t.Errorf("Detect of one invalid candidate = %v, want nil", got)
	}
}

func FuzzDetect(f *testing.F) {
	for _, cases := range allCases() {
		for _, c := range cases {
			f.Add(c.text)
		}
	}
	f.Add(typicalTurn)
	f.Add(privateTurn)
	order := []string{Email, Phone, Card, IBAN, Secret, Password}
	f.Fuzz(func(t *testing.T, text string) {
		got := Detect(text)
		if again := Detect(text); !slices.Equal(got, again) {
			t.Fatalf("Detect(%q) = %v, then %v", text, got, again)
		}
		if got != nil && len(got) == 0 {
			t.Fatalf("Detect(%q) = empty, not nil", text)
		}
		last := -1
		for _, reason := range got {
			k := slices.Index(order, reason)
			if k < 0 {
				t.Fatalf("Detect(%q): unknown reason %q", text, reason)
			}
			if k <= last {
				t.Fatalf("Detect(%q) = %v: not each once in order", text, got)
			}
			last = k
		}
	})
}

// typicalTurn is a chat turn of about 1.5 KB with nothing private, but
// with the numbers, names and strings that come close: dates, times,
// versions, amounts, ids, a UUID, a commit, paths, URLs, @mentions.
var typicalTurn = strings.Repeat(`Thanks, that helps! I upgraded the service to Go 1.24.0 on 2026-11-28 at 14:30 and
the build on 10.0.0.12 went from 48.5s to 31.2s. @anna asked whether we should also bump
golang.org/x/tools@v0.28.0; see https://github.com/vera-proxy/vera/pull/1234?tab=files and the
notes in /home/ivan/Projects/vera/memory/recall.go. The failing request had id
123e4567-e89b-12d3-a456-426614174000 and was fixed in commit 9fceb02d0ae598e95dc970b74767f19372d61af8.
Order #123456789 (total $1,234.56, 3 items) shipped on 28.11.2026; we sold 4155552671 units last year.
I forgot my password for the staging dashboard, so I used the password reset link instead.
Can you summarise the TestRecallRanking failures and suggest a fix for the flaky test?
`, 2)

// privateTurn is a chat turn of about 1.5 KB with several kinds.
var privateTurn = strings.Repeat(`Here are my details for the booking: Anna Petrova, anna.petrova@example.org,
mobile +7 (912) 345-67-89 or the office (415) 555-2671. Pay with 4111 1111 1111 1111 or transfer to
DE89 3704 0044 0532 0130 00. The deploy key is `+githubPAT+` and the wifi password is CoffeeShop2024.
I upgraded the service to Go 1.24.0 on 2026-11-28 at 14:30; see https://github.com/vera-proxy/vera/pull/1234.
The failing request had id 123e4567-e89b-12d3-a456-426614174000, commit 9fceb02d0ae598e95dc970b74767f19372d61af8.
`, 2)

// adversarialTurn is 2 KB of phone-shaped groups that form no valid
// number: the worst case of the write path (see maxPhoneParses).
var adversarialTurn = strings.Repeat("(000) 000 00 00 00 00 00 00 00 00 ", 60)

func BenchmarkDetect(b *testing.B) {
	for _, bc := range []struct{ name, text string }{
		{"clean", typicalTurn},
		{"private", privateTurn},
		{"adversarial", adversarialTurn},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(bc.text)))
			for b.Loop() {
				Detect(bc.text)
			}
		})
	}
}
