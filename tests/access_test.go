package tests

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ollama/ollama/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/ollama/ollamatest"
	"github.com/vera-proxy/vera/tests/veratest"
)

// server.api_keys: every route needs a key (Ollama's included), as Bearer
// or x-api-key, except /healthz; loopback clients need none while
// trust_loopback is on.
func TestAPIKeys(t *testing.T) {
	up := ollamatest.NewDialects(t)
	conf := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(conf, "config.toml"), []byte("[server]\ntrust_loopback = false\n"), 0o644))
	p := veratest.Start(t, "VERA_OLLAMA_URL="+up.URL, "VERA_CONFIG_DIR="+conf, "VERA_API_KEYS=k-one,k-two", "VERA_ADMIN_TOKEN=admin-t")
	call := func(path, header, value, body string) int {
		req, _ := http.NewRequest(http.MethodPost, "http://"+p.Addr+path, strings.NewReader(body))
		if body == "" {
			req.Method = http.MethodGet
		}
		if header != "" {
			req.Header.Set(header, value)
		}
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res.StatusCode
	}
	chatBody := `{"model":"llama3.2","stream":false,"messages":[{"role":"user","content":"hi"}]}`
	assert.Equal(t, http.StatusUnauthorized, call("/api/chat", "", "", chatBody))
	assert.Equal(t, http.StatusUnauthorized, call("/api/tags", "", "", ""), "Ollama's own routes too")
	assert.Equal(t, http.StatusUnauthorized, call("/api/chat", "Authorization", "Bearer wrong", chatBody))
	assert.Equal(t, http.StatusOK, call("/api/chat", "Authorization", "bearer k-one", chatBody))
	assert.Equal(t, http.StatusOK, call("/v1/messages", "X-Api-Key", "k-two", `{"model":"llama3.2","max_tokens":9,"messages":[{"role":"user","content":"hi"}]}`))
	assert.Equal(t, http.StatusOK, call("/api/tags", "Authorization", "Bearer admin-t", ""), "the admin token passes")
	assert.Equal(t, http.StatusOK, call("/healthz", "", "", ""))
	assert.Equal(t, http.StatusOK, call("/ui/", "", "", ""), "the static admin page opens; its API calls need the token")
	assert.Equal(t, http.StatusUnauthorized, call("/memories?namespace=default", "", "", ""))

	// The official client with its key.
	c := veratest.OllamaClientWith(t, p, http.Header{"Authorization": {"Bearer k-two"}})
	_, err := c.List(context.Background())
	require.NoError(t, err)

	// trust_loopback on (the default): the local ollama CLI needs no key;
	// a request a reverse proxy on this host forwarded does.
	p2 := veratest.Start(t, "VERA_OLLAMA_URL="+up.URL, "VERA_API_KEYS=k-one")
	res, err := http.Get("http://" + p2.Addr + "/api/tags")
	require.NoError(t, err)
	res.Body.Close()
	assert.Equal(t, http.StatusOK, res.StatusCode)
	for _, h := range []string{"X-Forwarded-For", "Forwarded", "X-Real-Ip"} {
		req, _ := http.NewRequest(http.MethodGet, "http://"+p2.Addr+"/api/tags", nil)
		req.Header.Set(h, "for=203.0.113.7")
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		res.Body.Close()
		assert.Equal(t, http.StatusUnauthorized, res.StatusCode, h)
	}
	var health struct {
		Access struct {
			ForwardedLoopbackRequests int64 `json:"forwarded_loopback_requests"`
		}
	}
	require.Equal(t, http.StatusOK, veratest.AdminCall(t, p2, "", "GET", "/healthz", "", &health))
	assert.EqualValues(t, 3, health.Access.ForwardedLoopbackRequests)

	// No admin token: admin routes answer loopback clients, never one a
	// reverse proxy forwarded.
	req, _ := http.NewRequest(http.MethodGet, "http://"+p2.Addr+"/memories?namespace=default", nil)
	req.Header.Set("Authorization", "Bearer k-one")
	req.Header.Set("X-Forwarded-For", "203.0.113.7")
	res, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	res.Body.Close()
	assert.Equal(t, http.StatusForbidden, res.StatusCode)
}

// memory.jwt_secret: the namespace comes from Open WebUI's signed token
// alone, through the official client; a forged plain header gets the
// default namespace; a bad token gets 401; require_identity refuses chats
// without one.
func TestVerifiedIdentity(t *testing.T) {
	up := ollamatest.New(t)
	const secret = "shared-with-open-webui"
	p := veratest.Start(t, "VERA_OLLAMA_URL="+up.URL, "VERA_JWT_SECRET="+secret)
	require.Equal(t, http.StatusCreated, veratest.AdminCall(t, p, "", "POST", "/memories", `{"namespace":"alice","text":"Alice keeps her bike in the blue shed."}`, nil))

	chatWith := func(p *veratest.InProcess, h http.Header) error {
		c := veratest.OllamaClientWith(t, p, h)
		stream := false
		return c.Chat(context.Background(), &api.ChatRequest{Model: "llama3.2", Stream: &stream,
			Messages: []api.Message{veratest.User("Where is my bike?")}}, func(api.ChatResponse) error { return nil })
	}
	require.NoError(t, chatWith(p, http.Header{"X-Openwebui-User-Jwt": {ollamatest.OpenWebUIToken(t, secret, "alice", 5*time.Minute)}}))
	assert.Contains(t, veratest.SystemOf(up.LastChat(t)), "blue shed", "the token's user gets her memories")
	// Open WebUI sends the user's name and email only in the token then.
	require.Eventually(t, func() bool {
		var got struct {
			Namespaces []struct{ Namespace, Name, Email string }
		}
		veratest.AdminCall(t, p, "", "GET", "/namespaces", "", &got)
		for _, n := range got.Namespaces {
			if n.Namespace == "alice" {
				return n.Name == "alice" && n.Email == "alice@example.com"
			}
		}
		return false
	}, 10*time.Second, 20*time.Millisecond, "the token's name and email label the namespace")

	require.NoError(t, chatWith(p, http.Header{"X-Openwebui-User-Id": {"alice"}}))
	assert.NotContains(t, veratest.SystemOf(up.LastChat(t)), "blue shed", "a plain header is not an identity once a secret is set")

	for name, tok := range map[string]string{
		"expired":         ollamatest.OpenWebUIToken(t, secret, "alice", -time.Hour),
		"wrong signature": ollamatest.OpenWebUIToken(t, "guessed", "alice", time.Hour),
	} {
		err := chatWith(p, http.Header{"X-Openwebui-User-Jwt": {tok}})
		var ae api.AuthorizationError // the client's shape for a 401
		require.ErrorAs(t, err, &ae, name)
		assert.Equal(t, http.StatusUnauthorized, ae.StatusCode, name)
	}
	n := up.ChatCount()

	conf := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(conf, "config.toml"), []byte("[memory]\nrequire_identity = true\n"), 0o644))
	strict := veratest.Start(t, "VERA_OLLAMA_URL="+up.URL, "VERA_JWT_SECRET="+secret, "VERA_CONFIG_DIR="+conf)
	require.Equal(t, http.StatusCreated, veratest.AdminCall(t, strict, "", "POST", "/memories", `{"namespace":"alice","text":"Alice keeps her bike in the blue shed."}`, nil))
	var ae api.AuthorizationError
	require.ErrorAs(t, chatWith(strict, http.Header{"X-Openwebui-User-Id": {"alice"}}), &ae)
	assert.Equal(t, http.StatusUnauthorized, ae.StatusCode)
	res, err := http.Post("http://"+strict.Addr+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"llama3.2","messages":[{"role":"user","content":"hi"}]}`))
	require.NoError(t, err)
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	assert.Equal(t, http.StatusUnauthorized, res.StatusCode)
	assert.Contains(t, string(b), "require_identity", "the error says what is missing, in the dialect's shape")
	assert.Equal(t, n, up.ChatCount(), "refused chats never reach Ollama")
	require.NoError(t, chatWith(strict, http.Header{"X-Openwebui-User-Jwt": {ollamatest.OpenWebUIToken(t, secret, "alice", time.Minute)}}))
	assert.Contains(t, veratest.SystemOf(up.LastChat(t)), "blue shed")
}
