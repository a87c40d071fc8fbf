package proxy

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/ollama/ollamatest"
)

func TestIdentity(t *testing.T) {
	const secret = "owui-secret"
	req := func(token string, more ...string) *http.Request {
		r := httptest.NewRequest(http.MethodPost, "/api/chat", nil)
		if token != "" {
			r.Header.Set("X-OpenWebUI-User-Jwt", token)
		}
		for i := 0; i+1 < len(more); i += 2 {
			r.Header.Set(more[i], more[i+1])
		}
		return r
	}
	s := &Server{Identity: &Identity{Secret: []byte(secret)}}

	ns, err := s.namespace(req(ollamatest.OpenWebUIToken(t, secret, "user-123", 5*time.Minute), "X-OpenWebUI-User-Id", "someone-else"))
	require.NoError(t, err)
	assert.Equal(t, "user-123", ns, "the token decides; the plain header is ignored")

	ns, err = s.namespace(req("", "X-OpenWebUI-User-Id", "alice"))
	require.NoError(t, err)
	assert.Equal(t, "default", ns, "without a token, a forged plain header gets nothing")

	noneTok, err := jwt.NewWithClaims(jwt.SigningMethodNone, jwt.MapClaims{"sub": "alice", "exp": time.Now().Add(time.Hour).Unix()}).SignedString(jwt.UnsafeAllowNoneSignatureType)
	require.NoError(t, err)
	hs512, err := jwt.NewWithClaims(jwt.SigningMethodHS512, jwt.MapClaims{"sub": "alice", "exp": time.Now().Add(time.Hour).Unix()}).SignedString([]byte(secret))
	require.NoError(t, err)
	noExp, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": "alice"}).SignedString([]byte(secret))
	require.NoError(t, err)
	noSub, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"exp": time.Now().Add(time.Hour).Unix()}).SignedString([]byte(secret))
	require.NoError(t, err)
	for name, tc := range map[string]struct{ token, msg string }{
		"expired":         {ollamatest.OpenWebUIToken(t, secret, "alice", -time.Hour), "expired"},
		"wrong signature": {ollamatest.OpenWebUIToken(t, "another-secret", "alice", time.Hour), "signature"},
		"alg none":        {noneTok, "not a valid HS256 token"},
		"HS512":           {hs512, "not a valid HS256 token"},
		"no expiry":       {noExp, "no expiry"},
		"no user":         {noSub, "names no user"},
		"garbage":         {"not.a.token", "not a valid HS256 token"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := s.namespace(req(tc.token))
			require.Error(t, err)
			assert.Equal(t, http.StatusUnauthorized, statusOf(err))
			assert.Contains(t, err.Error(), tc.msg)
			assert.NotContains(t, err.Error(), secret)
		})
	}

	// Within the clock skew, an expiry just passed is still accepted.
	ns, err = s.namespace(req(ollamatest.OpenWebUIToken(t, secret, "bob", -10*time.Second)))
	require.NoError(t, err)
	assert.Equal(t, "bob", ns)

	s.Identity.Require = true
	_, err = s.namespace(req("", "X-OpenWebUI-User-Id", "alice"))
	require.Error(t, err)
	assert.Equal(t, http.StatusUnauthorized, statusOf(err))
	assert.Contains(t, err.Error(), "require_identity")
	ns, err = s.namespace(req(ollamatest.OpenWebUIToken(t, secret, "carol", time.Minute)))
	require.NoError(t, err)
	assert.Equal(t, "carol", ns)
}

func TestNamespaceMustBeUTF8AndShort(t *testing.T) {
	up := newFakeOllama(t)
	rec := &recorder{}
	base := startVera(t, up.srv.URL, func(s *Server) { s.Recorder = rec })
	for name, ns := range map[string]string{"invalid UTF-8": "alice\xff", "257 bytes": strings.Repeat("a", 257)} {
		t.Run(name, func(t *testing.T) {
			res, body := postChat(t, base, "/api/chat", hiChat, "X-OpenWebUI-User-Id", ns)
			assert.Equal(t, http.StatusBadRequest, res.StatusCode)
			assert.Contains(t, body, "X-OpenWebUI-User-Id")
		})
	}
	res, _ := postChat(t, base, "/api/chat", hiChat, "X-OpenWebUI-User-Id", strings.Repeat("é", 128))
	assert.Equal(t, http.StatusOK, res.StatusCode, "256 bytes of UTF-8 are fine")
	assert.Len(t, rec.all(), 1)
}
