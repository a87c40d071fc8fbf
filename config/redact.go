package config

import (
	"net/url"
	"regexp"
	"strings"
)

// masked stands where a secret was, as url.URL.Redacted writes it.
const masked = "xxxxx"

// secretParams are query parameters whose values are taken for secrets
// (matched case-insensitively): services behind a gateway often take their
// key in the URL.
var secretParams = map[string]bool{
	"key": true, "api_key": true, "apikey": true, "token": true,
	"access_token": true, "password": true, "secret": true,
}

// Redact shows u with its password and the values of secret-looking query
// parameters masked: the form of a URL that may appear in a log line, an
// error body, /healthz or `vera check`. The user name stays, as
// url.URL.Redacted leaves it.
func Redact(u *url.URL) string {
	if u == nil {
		return ""
	}
	c := *u
	if c.RawQuery != "" {
		c.RawQuery = redactQuery(c.RawQuery)
	}
	return c.Redacted()
}

// RedactURL is Redact for a URL held as text, with or without a scheme
// ("user:pass@host:port" is how a Qdrant address may be written). Text that
// does not parse as a URL is masked with RedactText.
func RedactURL(raw string) string {
	if !strings.Contains(raw, "://") {
		if u, err := url.Parse("//" + raw); err == nil && u.Host != "" {
			return strings.TrimPrefix(Redact(u), "//")
		}
		return RedactText(raw)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return RedactText(raw)
	}
	return Redact(u)
}

// redactQuery masks the values of secret parameters in a raw query, keeping
// every other parameter as it was written and in its place.
func redactQuery(raw string) string {
	parts := strings.Split(raw, "&")
	for i, p := range parts {
		name, _, hasValue := strings.Cut(p, "=")
		if n, err := url.QueryUnescape(name); err == nil {
			name = n
		}
		if hasValue && secretParams[strings.ToLower(name)] {
			parts[i] = p[:strings.IndexByte(p, '=')+1] + masked
		}
	}
	return strings.Join(parts, "&")
}

var (
	// userinfoRe finds the credentials of a URL inside text: scheme, then
	// everything up to the last @ before the host (a password may hold @).
	userinfoRe = regexp.MustCompile(`([a-zA-Z][a-zA-Z0-9+.\-]*://)([^/?#\s"'<>` + "`" + `]*)@`)
	// queryRe finds secret query parameters inside text.
	queryRe = regexp.MustCompile(`(?i)([?&;](?:key|api_key|apikey|token|access_token|password|secret)=)[^&#\s"'<>` + "`" + `]*`)
)

// RedactText masks the passwords of URLs written in s and the values of
// their secret query parameters. It is meant for text vera did not write
// itself, such as Go's errors, which quote the URL they failed on.
func RedactText(s string) string {
	if strings.Contains(s, "://") {
		s = userinfoRe.ReplaceAllStringFunc(s, func(m string) string {
			sub := userinfoRe.FindStringSubmatch(m)
			user, _, hasPassword := strings.Cut(sub[2], ":")
			if !hasPassword {
				return m
			}
			return sub[1] + user + ":" + masked + "@"
		})
	}
	if strings.Contains(s, "=") {
		s = queryRe.ReplaceAllStringFunc(s, func(m string) string {
			name, value, _ := strings.Cut(m, "=")
			// Punctuation that ends a sentence after the URL is kept.
			rest := value[len(strings.TrimRight(value, ",.;:)]")):]
			return name + "=" + masked + rest
		})
	}
	return s
}

// RedactIn masks the secrets of u wherever they appear in s: the URL as a
// whole, and its password and secret query values on their own (an error
// may quote them apart from the URL, or escaped). Secrets shorter than 4
// bytes are only masked inside URLs, as masking every "1" of a message would
// garble it.
func RedactIn(s string, u *url.URL) string {
	if u == nil {
		return RedactText(s)
	}
	if full := u.String(); full != "" {
		s = strings.ReplaceAll(s, full, Redact(u))
	}
	var secrets []string
	if p, ok := u.User.Password(); ok {
		secrets = append(secrets, p)
	}
	for name, values := range u.Query() {
		if secretParams[strings.ToLower(name)] {
			secrets = append(secrets, values...)
		}
	}
	s = RedactText(s)
	for _, v := range secrets {
		if len(v) < 4 {
			continue
		}
		for _, form := range []string{v, url.QueryEscape(v), url.PathEscape(v)} {
			s = strings.ReplaceAll(s, form, masked)
		}
	}
	return s
}
