package ollamatest

import (
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"
)

// OpenWebUIToken makes the token Open WebUI sends in X-OpenWebUI-User-Jwt
// when FORWARD_USER_INFO_HEADER_JWT_SECRET is set: the claims and signing
// of open_webui/utils/headers.py (_mint_forward_user_jwt), for user id sub,
// expiring after exp (negative: already expired).
func OpenWebUIToken(t testing.TB, secret, sub string, exp time.Duration) string {
	t.Helper()
	now := time.Now()
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
		"sub": sub, "email": sub + "@example.com", "name": sub, "role": "user",
		"iss": "open-webui", "iat": now.Unix(), "exp": now.Add(exp).Unix(),
	}).SignedString([]byte(secret))
	require.NoError(t, err)
	return tok
}
