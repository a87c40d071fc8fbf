package proxy

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/golang-jwt/jwt/v5"

	"github.com/vera-proxy/vera/memory"
)

// Identity verifies who a chat is from (memory.jwt_secret): Open
// WebUI, with FORWARD_USER_INFO_HEADER_JWT_SECRET set, sends each request
// an HS256 token in X-OpenWebUI-User-Jwt whose "sub" is the user's id
// (claims sub, email, name, role, iss "open-webui", iat, exp; see
// open_webui/utils/headers.py). With a secret set, that token is the only
// source of the namespace: the plain user-id header can be forged by
// anyone who reaches vera.
type Identity struct {
	// Secret is the shared HS256 secret; empty: no verification.
	Secret []byte
	// Require refuses chats without a token (memory.require_identity).
	Require bool
	// Header names the token's header; empty: X-OpenWebUI-User-Jwt.
	Header string
}

// identityHeader is where Open WebUI sends the token by default
// (FORWARD_USER_INFO_HEADER_JWT).
const identityHeader = "X-OpenWebUI-User-Jwt"

// maxIdentityToken bounds a token before it is parsed: Open WebUI's are a
// few hundred bytes.
const maxIdentityToken = 8 << 10

// clockSkew is the leeway on exp, iat and nbf between Open WebUI's clock
// and vera's.
const clockSkew = 30 * time.Second

// openWebUIClaims are the claims of Open WebUI's token vera reads: the
// user id (sub) and, as labels for the namespace, name and email (Open
// WebUI sends no X-OpenWebUI-User-Name or -Email beside a token).
type openWebUIClaims struct {
	jwt.RegisteredClaims
	Name  string `json:"name"`
	Email string `json:"email"`
}

// verify checks the request's token and returns its claims: none when it
// carries no token and identity is not required.
func (id *Identity) verify(r *http.Request) (openWebUIClaims, error) {
	var none openWebUIClaims
	h := id.Header
	if h == "" {
		h = identityHeader
	}
	raw := strings.TrimSpace(r.Header.Get(h))
	if raw == "" {
		if id.Require {
			return none, unauthorized(fmt.Sprintf("header %s is required: this vera serves only chats whose user Open WebUI vouches for (memory.require_identity)", h))
		}
		return none, nil
	}
	if len(raw) > maxIdentityToken {
		return none, unauthorized(fmt.Sprintf("header %s: the token is %d bytes long; at most %d are allowed", h, len(raw), maxIdentityToken))
	}
	var claims openWebUIClaims
	_, err := jwt.ParseWithClaims(raw, &claims, func(t *jwt.Token) (any, error) {
		// Only HS256: a verifier that honours the token's own alg can be
		// told "none".
		if t.Method != jwt.SigningMethodHS256 {
			return nil, errNotHS256
		}
		return id.Secret, nil
	}, jwt.WithExpirationRequired(), jwt.WithIssuedAt(), jwt.WithLeeway(clockSkew))
	switch {
	case errors.Is(err, errNotHS256):
		return none, unauthorized(fmt.Sprintf("header %s: not a valid HS256 token from Open WebUI (signed with another algorithm)", h))
	case errors.Is(err, jwt.ErrTokenExpired):
		return none, unauthorized(fmt.Sprintf("header %s: the token has expired", h))
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		return none, unauthorized(fmt.Sprintf("header %s: the token's signature does not match memory.jwt_secret", h))
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		return none, unauthorized(fmt.Sprintf("header %s: the token has no expiry (exp)", h))
	case err != nil:
		return none, unauthorized(fmt.Sprintf("header %s: not a valid HS256 token from Open WebUI", h))
	}
	ns := strings.TrimSpace(claims.Subject)
	switch {
	case ns == "":
		return none, unauthorized(fmt.Sprintf("header %s: the token names no user (sub)", h))
	case !utf8.ValidString(ns) || len(ns) > maxNamespace:
		return none, unauthorized(fmt.Sprintf("header %s: the token's user id is not a valid namespace (UTF-8, at most %d bytes)", h, maxNamespace))
	}
	return claims, nil
}

var errNotHS256 = errors.New("not HS256")

func unauthorized(msg string) error { return httpError(http.StatusUnauthorized, msg, nil) }

// verified reports whether namespaces come from verified tokens.
func (id *Identity) verified() bool { return id != nil && len(id.Secret) > 0 }

// maxNamespace is the longest namespace accepted, in bytes.
const maxNamespace = 256

// naming tells whose a request is: the namespace that scopes its memory,
// and who that is (for the directory).
type naming struct {
	// header names the namespace header; "" means X-OpenWebUI-User-Id.
	header   string
	identity *Identity
}

// naming is how s tells whose a request is.
func (s *Server) naming() naming { return naming{header: s.NamespaceHeader, identity: s.Identity} }

// namespace scopes a request's memory (MCP's requests too).
func (s *Server) namespace(r *http.Request) (string, error) {
	ns, _, _, err := s.naming().person(r)
	return ns, err
}

// person returns a request's namespace, and the name and email of who it
// is: with memory.jwt_secret set, from the verified token alone (Open
// WebUI sends them only inside it then); else from the namespace header
// ("default" without it) and Open WebUI's user headers. A namespace that
// is not valid UTF-8 or is too long is refused: stores would otherwise
// change its bytes and merge namespaces.
func (n naming) person(r *http.Request) (ns, name, email string, err error) {
	if n.identity.verified() {
		// The plain header is ignored: anyone could send it.
		c, err := n.identity.verify(r)
		if err != nil {
			return "", "", "", err
		}
		if ns = strings.TrimSpace(c.Subject); ns == "" {
			ns = memory.DefaultNamespace
		}
		return ns, c.Name, c.Email, nil
	}
	h := n.header
	if h == "" {
		h = "X-OpenWebUI-User-Id"
	}
	ns = strings.TrimSpace(r.Header.Get(h))
	switch {
	case ns == "":
		ns = memory.DefaultNamespace
	case !utf8.ValidString(ns):
		return "", "", "", httpError(http.StatusBadRequest, fmt.Sprintf("header %s: the namespace must be valid UTF-8", h), nil)
	case len(ns) > maxNamespace:
		return "", "", "", httpError(http.StatusBadRequest, fmt.Sprintf("header %s: the namespace is %d bytes long; at most %d are allowed", h, len(ns), maxNamespace), nil)
	}
	return ns, r.Header.Get("X-OpenWebUI-User-Name"), r.Header.Get("X-OpenWebUI-User-Email"), nil
}
