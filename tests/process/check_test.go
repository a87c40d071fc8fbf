package process

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/ollama/ollamatest"
	"github.com/vera-proxy/vera/tests/veratest"
)

// tagsOllama is an Ollama that has exactly the given models: /api/tags
// lists them and /api/embed answers only for them, with embedStatus when
// the model is missing. It refuses browser origins as an Ollama without
// OLLAMA_ORIGINS does.
func tagsOllama(t *testing.T, embedStatus int, models ...string) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/version", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"version":"0.12.3"}`)
	})
	mux.HandleFunc("GET /api/tags", func(w http.ResponseWriter, r *http.Request) {
		list := []map[string]string{}
		for _, m := range models {
			list = append(list, map[string]string{"name": m, "model": m})
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"models": list})
	})
	mux.HandleFunc("POST /api/embed", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Model string `json:"model"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		if !slices.Contains(models, req.Model) && !slices.Contains(models, req.Model+":latest") {
			w.WriteHeader(embedStatus)
			fmt.Fprintf(w, `{"error":"model %q not found"}`, req.Model)
			return
		}
		io.WriteString(w, `{"embeddings":[[0.1,0.2,0.3]]}`)
	})
	srv := httptest.NewServer(ollamatest.RefuseOrigins(mux, nil))
	t.Cleanup(srv.Close)
	return srv
}

// checkEnv is what `vera check` needs to pass against up, on a free port.
func checkEnv(t *testing.T, upstream string) []string {
	return []string{"VERA_OLLAMA_URL=" + upstream, "VERA_DATA_DIR=" + t.TempDir(), "VERA_LISTEN=127.0.0.1:0",
		"VERA_PROMPTS_DIR=" + t.TempDir()}
}

func TestCheckCuratorModel(t *testing.T) {
	tests := []struct {
		name, curator string
		models        []string
		ok            bool
	}{
		{"default model missing", "", []string{"llama3.2:latest", "nomic-embed-text:latest"}, false},
		{"present", "llama3.1:8b", []string{"llama3.1:8b", "nomic-embed-text:latest"}, true},
		{"no tag means latest", "llama3.2", []string{"llama3.2:latest", "nomic-embed-text:latest"}, true},
		{"latest matches no tag", "llama3.2:latest", []string{"llama3.2", "nomic-embed-text"}, true},
		{"another tag", "llama3.2:1b", []string{"llama3.2:latest", "nomic-embed-text:latest"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up := tagsOllama(t, http.StatusNotFound, tt.models...)
			env := checkEnv(t, up.URL)
			want := "llama3.1:8b" // the default
			if tt.curator != "" {
				want = tt.curator
				env = append(env, veratest.ConfigDir(t, fmt.Sprintf("[curator]\ncurator_model = %q\n", tt.curator)))
			}
			code, out, _ := veratest.RunCommand(t, env, "check")
			if tt.ok {
				assert.Equal(t, 0, code, out)
				assert.Contains(t, out, "ok   curator model: "+want)
				assert.Contains(t, out, "all checks passed")
				return
			}
			// Chats and memory work without it: a warning that names the
			// nightly job, and exit 0.
			assert.Equal(t, 0, code, out)
			assert.Contains(t, out, "warn curator model: "+want+" is not on Ollama")
			assert.Contains(t, out, "the nightly curator (daily at 02:00)")
			assert.Contains(t, out, "ollama pull "+want)
			assert.Contains(t, out, "all checks passed: vera serves chats; 1 warnings")
		})
	}

	// With memory off there is no curator to run.
	up := tagsOllama(t, http.StatusNotFound, "llama3.2:latest")
	code, out, _ := veratest.RunCommand(t, append(checkEnv(t, up.URL), veratest.ConfigDir(t, "[memory]\nenabled = false\n")), "check")
	assert.Equal(t, 0, code, out)
	assert.NotContains(t, out, "curator model")
}

func TestCheckEmbeddingModelMissingSaysHowToPullIt(t *testing.T) {
	// Ollama versions differ in the status they give for a missing model;
	// the hint must not depend on it.
	for _, status := range []int{http.StatusNotFound, http.StatusBadRequest, http.StatusInternalServerError} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			up := tagsOllama(t, status, "llama3.1:8b")
			code, out, _ := veratest.RunCommand(t, checkEnv(t, up.URL), "check")
			assert.Equal(t, 0, code, out, "recall by words still works")
			assert.Contains(t, out, "warn embedder:")
			assert.Contains(t, out, "ollama pull nomic-embed-text")
			assert.Equal(t, 1, strings.Count(out, "ollama pull nomic-embed-text"), "one hint:\n%s", out)
		})
	}
}

func TestCheckListenAddress(t *testing.T) {
	up := tagsOllama(t, http.StatusNotFound, "llama3.1:8b", "nomic-embed-text:latest")
	withListen := func(addr string) []string {
		return append(checkEnv(t, up.URL), "VERA_LISTEN="+addr)
	}

	t.Run("free", func(t *testing.T) {
		code, out, _ := veratest.RunCommand(t, checkEnv(t, up.URL), "check")
		assert.Equal(t, 0, code, out)
		assert.Contains(t, out, "ok   listen: 127.0.0.1:0\n")
	})

	t.Run("a running vera", func(t *testing.T) {
		p := veratest.Launch(t, "VERA_OLLAMA_URL="+up.URL)
		code, out, _ := veratest.RunCommand(t, withListen(p.Addr), "check")
		assert.Equal(t, 0, code, out)
		assert.Contains(t, out, "ok   listen: "+p.Addr+" (a running vera answers there)")
	})

	t.Run("a running vera behind a reverse proxy on this host", func(t *testing.T) {
		p := veratest.Launch(t, "VERA_OLLAMA_URL="+up.URL, "VERA_API_KEYS=k1")
		req, _ := http.NewRequest(http.MethodGet, "http://"+p.Addr+"/api/tags", nil)
		req.Header.Set("X-Forwarded-For", "203.0.113.7")
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		res.Body.Close()
		assert.Equal(t, http.StatusUnauthorized, res.StatusCode, "forwarded: not trusted as local")
		require.Eventually(t, func() bool { return strings.Contains(p.Logs(), "reverse proxy on this host") }, 10*time.Second, 10*time.Millisecond,
			"the warning reaches the log (read by another goroutine)")
		code, out, _ := veratest.RunCommand(t, withListen(p.Addr), "check")
		assert.Equal(t, 0, code, out)
		assert.Contains(t, out, "warn access: 1 requests came from loopback with X-Forwarded-For")
		assert.Contains(t, out, "server.trust_loopback = false")
	})

	t.Run("Ollama itself", func(t *testing.T) {
		// Ollama still on the address vera should take over.
		addr := strings.TrimPrefix(up.URL, "http://")
		code, out, _ := veratest.RunCommand(t, withListen(addr), "check")
		assert.Equal(t, 1, code, out)
		assert.Contains(t, out, "FAIL listen: "+addr+" is taken by Ollama")
		assert.Contains(t, out, "OLLAMA_HOST=127.0.0.1:11435 ollama serve")
		assert.Contains(t, out, "VERA_LISTEN")
	})

	t.Run("another program", func(t *testing.T) {
		other := httptest.NewServer(http.NotFoundHandler())
		t.Cleanup(other.Close)
		addr := strings.TrimPrefix(other.URL, "http://")
		code, out, _ := veratest.RunCommand(t, withListen(addr), "check")
		assert.Equal(t, 1, code, out)
		assert.Contains(t, out, "FAIL listen: "+addr+": address in use")

		// Not even HTTP.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
		code, out, _ = veratest.RunCommand(t, withListen(ln.Addr().String()), "check")
		assert.Equal(t, 1, code, out)
		assert.Contains(t, out, "FAIL listen: "+ln.Addr().String()+": address in use")
	})
}

const exposedWarning = "anyone who can reach it can pick any namespace with a header"

func TestWarnsWhenListeningBeyondLoopbackWithoutIdentity(t *testing.T) {
	up := tagsOllama(t, http.StatusNotFound, "llama3.1:8b", "nomic-embed-text:latest")
	tests := []struct {
		listen string
		extra  []string
		warn   bool
	}{
		{"127.0.0.1:0", nil, false},
		{"localhost:0", nil, false},
		{"[::1]:0", nil, false},
		{"0.0.0.0:0", nil, true},
		{":0", nil, true},
		// API keys or a JWT secret: no warning.
		{"0.0.0.0:0", []string{"VERA_API_KEYS=k1,k2"}, false},
		{"0.0.0.0:0", []string{"VERA_JWT_SECRET=shh"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.listen+strings.Join(tt.extra, ","), func(t *testing.T) {
			if tt.listen == "[::1]:0" {
				if ln, err := net.Listen("tcp", tt.listen); err != nil {
					t.Skip("no IPv6 loopback here")
				} else {
					ln.Close()
				}
			}
			env := append(append(checkEnv(t, up.URL), "VERA_LISTEN="+tt.listen), tt.extra...)
			code, out, _ := veratest.RunCommand(t, env, "check")
			assert.Equal(t, 0, code, "a warning is not a failure:\n%s", out)
			if tt.warn {
				assert.Contains(t, out, "warn listen: "+tt.listen+": vera listens beyond loopback")
				assert.Contains(t, out, exposedWarning)
				assert.Contains(t, out, "server.api_keys", "the remedies are named")
				assert.Contains(t, out, "memory.jwt_secret")
			} else {
				assert.NotContains(t, out, exposedWarning)
			}

			p := veratest.Launch(t, env...)
			if tt.warn {
				assert.Contains(t, p.Logs(), exposedWarning)
				assert.Contains(t, p.Logs(), "level=WARN")
			} else {
				assert.NotContains(t, p.Logs(), exposedWarning)
			}
		})
	}
}

func TestWarnsOfRulesLeftInTheSystemPrompt(t *testing.T) {
	up := tagsOllama(t, http.StatusNotFound, "llama3.1:8b", "nomic-embed-text:latest")
	const warning = "earlier versions of vera's curator appended one user's rules there"
	tests := []struct {
		name, text string
		lines      int
	}{
		{"rules appended by an old curator", "You are a helpful assistant.\n\n- Call the user Captain.\n- Answer in French.\n", 2},
		{"no rules", "You are a helpful assistant.\nBe brief.\n", 0},
		{"the file's default", "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prompts := t.TempDir()
			if tt.text != "" {
				require.NoError(t, os.WriteFile(filepath.Join(prompts, "systemprompt.md"), []byte(tt.text), 0o600))
			}
			env := append(checkEnv(t, up.URL), "VERA_PROMPTS_DIR="+prompts)
			code, out, _ := veratest.RunCommand(t, env, "check")
			assert.Equal(t, 0, code, "a warning is not a failure:\n%s", out)
			p := veratest.Launch(t, env...)
			if tt.lines == 0 {
				assert.NotContains(t, out, warning)
				assert.NotContains(t, p.Logs(), warning)
				return
			}
			assert.Contains(t, out, `warn prompts: systemprompt.md holds "- " lines: `+warning)
			assert.Contains(t, out, fmt.Sprintf("(%s, %d lines)", filepath.Join(prompts, "systemprompt.md"), tt.lines))
			assert.Contains(t, out, "move them elsewhere or delete them")
			logs := p.Logs()
			assert.Contains(t, logs, "level=WARN")
			assert.Contains(t, logs, warning)
			assert.Contains(t, logs, fmt.Sprintf("lines=%d", tt.lines))
		})
	}
}

func TestSecretsInTheOllamaURLStayHidden(t *testing.T) {
	up := ollamatest.New(t)
	host := strings.TrimPrefix(up.URL, "http://")
	withSecrets := "http://user:s3cret@" + host + "?api_key=k3y-secret"
	shown := "http://user:xxxxx@" + host + "?api_key=xxxxx"
	hidden := func(t *testing.T, what, text string) {
		t.Helper()
		assert.NotContains(t, text, "s3cret", what)
		assert.NotContains(t, text, "k3y-secret", what)
	}

	t.Run("check", func(t *testing.T) {
		code, out, _ := veratest.RunCommand(t, checkEnv(t, withSecrets), "check")
		hidden(t, "vera check", out)
		assert.Contains(t, out, "ok   ollama: "+shown+", version 0.12.3")
		_ = code // the curator model is missing here; only what is shown matters

		dead := ollamatest.DeadAddr(t)
		code, out, _ = veratest.RunCommand(t, checkEnv(t, "http://user:s3cret@"+dead+"?api_key=k3y-secret"), "check")
		assert.Equal(t, 1, code)
		hidden(t, "vera check, Ollama down", out)
		assert.Contains(t, out, "FAIL ollama: http://user:xxxxx@"+dead+"?api_key=xxxxx unreachable")
	})

	t.Run("serve", func(t *testing.T) {
		p := veratest.Launch(t, "VERA_OLLAMA_URL="+withSecrets)
		veratest.Chat(t, p, "alice", false, veratest.User("hello"))
		res, err := http.Get("http://" + p.Addr + "/healthz")
		require.NoError(t, err)
		body, err := io.ReadAll(res.Body)
		res.Body.Close()
		require.NoError(t, err)
		hidden(t, "/healthz", string(body))
		assert.Contains(t, string(body), `"url":"`+shown+`"`)

		_, out, _ := veratest.RunCommand(t, []string{"VERA_LISTEN=" + p.Addr}, "healthcheck")
		hidden(t, "vera healthcheck", out)
		p.Stop(t)
		logs := p.Logs()
		hidden(t, "the log", logs)
		assert.Contains(t, logs, "msg=listening")
		assert.Contains(t, logs, `ollama="`+shown+`"`)
	})

	t.Run("qdrant", func(t *testing.T) {
		// A port Qdrant's client refuses, so the URL is quoted back.
		qdrantURL := "VERA_QDRANT_URL=http://user:s3cret@127.0.0.1:99999?api_key=k3y-secret"
		code, out, _ := veratest.RunCommand(t, append(checkEnv(t, up.URL), qdrantURL), "check")
		assert.Equal(t, 1, code, out)
		assert.Contains(t, out, "FAIL store: ")
		assert.Contains(t, out, "user:xxxxx@127.0.0.1:99999")
		hidden(t, "vera check", out)
		code, _, errOut := veratest.RunCommand(t, append(checkEnv(t, up.URL), qdrantURL), "serve")
		assert.Equal(t, 1, code)
		assert.Contains(t, errOut, "bad port")
		hidden(t, "the error", errOut)
	})

	t.Run("a URL vera refuses", func(t *testing.T) {
		code, _, errOut := veratest.RunCommand(t, []string{"VERA_OLLAMA_URL=ftp://user:s3cret@" + host}, "serve")
		assert.Equal(t, 1, code)
		assert.Contains(t, errOut, "general.ollama_host")
		hidden(t, "the error", errOut)
		code, out, _ := veratest.RunCommand(t, []string{"VERA_OLLAMA_URL=ftp://user:s3cret@" + host}, "check")
		assert.Equal(t, 1, code)
		assert.Contains(t, out, "FAIL config: general.ollama_host")
		hidden(t, "vera check", out)
	})
}

func TestHealthcheckEndsWithANewline(t *testing.T) {
	up := ollamatest.New(t)
	p := veratest.Launch(t, "VERA_OLLAMA_URL="+up.URL)
	code, out, _ := veratest.RunCommand(t, []string{"VERA_LISTEN=" + p.Addr}, "healthcheck")
	assert.Equal(t, 0, code, out)
	assert.True(t, strings.HasPrefix(out, "{"), out)
	assert.True(t, strings.HasSuffix(out, "}\n"), "%q", out)
}

// vera check says whether the cloud's key is set, never what it is, and
// whether the provider's /models answers with it.
func TestCheckCloud(t *testing.T) {
	const key = "sk-check-0123456789"
	var auth atomic.Value
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth.Store(r.Header.Get("Authorization"))
		if r.Header.Get("Authorization") != "Bearer "+key {
			w.WriteHeader(http.StatusUnauthorized)
			io.WriteString(w, `{"error":{"message":"No auth credentials found"}}`)
			return
		}
		io.WriteString(w, `{"data":[{"id":"openai/gpt-big","context_length":200000}]}`)
	}))
	t.Cleanup(provider.Close)
	up := tagsOllama(t, http.StatusNotFound, "llama3.1:8b", "nomic-embed-text:latest")
	conf := veratest.ConfigDir(t, fmt.Sprintf("[cloud]\nenabled = true\napi_base = %q\napi_key_env = \"CHECK_KEY\"\n[cloud.models]\n\"gpt-big\" = \"openai/gpt-big\"\n\"gone\" = \"vendor/gone\"\n", provider.URL+"/v1"))

	code, out, _ := veratest.RunCommand(t, append(checkEnv(t, up.URL), conf, "CHECK_KEY="+key), "check")
	assert.Equal(t, 0, code, out)
	assert.Contains(t, out, "ok   cloud key: set (from CHECK_KEY)")
	assert.Contains(t, out, "lists 1 models")
	assert.Contains(t, out, "gone = vendor/gone: the provider does not list vendor/gone")
	assert.NotContains(t, out, key)
	assert.Equal(t, "Bearer "+key, auth.Load())

	code, out, _ = veratest.RunCommand(t, append(checkEnv(t, up.URL), conf), "check")
	assert.Equal(t, 1, code, out)
	assert.Contains(t, out, "the variable CHECK_KEY (cloud.api_key_env) is not set")
	assert.Contains(t, out, "answered 401 to /models: No auth credentials found")
}

// vera check asks Ollama which of a few origins (browser extensions, web
// sites) it serves: a page Ollama served through OLLAMA_ORIGINS would be
// refused by vera, which checks origins in its place, unless vera allows
// it too.
func TestCheckWarnsOfOriginsOllamaServesAndVeraRefuses(t *testing.T) {
	const (
		ok = "ok   origins: Ollama serves none of the origins vera asked about that vera refuses " +
			"(an OLLAMA_ORIGINS naming particular sites cannot be seen from here: if Ollama has one, copy it into server.allowed_origins)\n"
		everything = "warn origins: Ollama serves pages of every origin vera asked about (OLLAMA_ORIGINS=*, or something in front of Ollama ignores Origin); " +
			"vera refuses "
		warning = "warn origins: Ollama serves browser pages that vera refuses (it answered "
		remedy  = "): OLLAMA_ORIGINS is set for Ollama. vera is the one that checks origins now: " +
			"copy that value into server.allowed_origins (or OLLAMA_ORIGINS in vera's environment)\n"
		all = "chrome-extension://vera-check-probe, moz-extension://vera-check-probe, safari-web-extension://vera-check-probe, " +
			"https://vera-check-probe.example, http://vera-check-probe.example"
	)
	// The fake's models: the curator's is llama3.2, so that check passes.
	const curator = "[curator]\ncurator_model = \"llama3.2\"\n"
	tests := []struct {
		name   string
		ollama []string // Ollama's OLLAMA_ORIGINS
		toml   string   // vera's [server] section
		env    []string // vera's environment
		lost   string   // the origins named; "" for no warning
	}{
		{name: "Ollama's defaults"},
		{name: "an extension allowed by Ollama", ollama: []string{"chrome-extension://*"}, lost: "chrome-extension://vera-check-probe"},
		{name: "the extension allowed by vera's config too", ollama: []string{"chrome-extension://*"},
			toml: "[server]\nallowed_origins = [\"chrome-extension://*\"]\n"},
		{name: "the extension allowed by vera's OLLAMA_ORIGINS too", ollama: []string{"chrome-extension://*"},
			env: []string{"OLLAMA_ORIGINS=chrome-extension://*"}},
		{name: "another extension allowed by vera", ollama: []string{"chrome-extension://*"},
			toml: "[server]\nallowed_origins = [\"moz-extension://*\"]\n", lost: "chrome-extension://vera-check-probe"},
		{name: "every origin allowed by Ollama", ollama: []string{"*"}, lost: all},
		{name: "every origin allowed by Ollama, extensions by vera", ollama: []string{"*"},
			toml: "[server]\nallowed_origins = [\"chrome-extension://*\", \"moz-extension://*\", \"safari-web-extension://*\"]\n",
			lost: "https://vera-check-probe.example, http://vera-check-probe.example"},
		{name: "every origin allowed by both", ollama: []string{"*"}, env: []string{"OLLAMA_ORIGINS=*"}},
		{name: "a web site allowed by Ollama", ollama: []string{"https://*.example"}, lost: "https://vera-check-probe.example"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up := ollamatest.New(t)
			up.Origins = tt.ollama
			env := append(append(checkEnv(t, up.URL), veratest.ConfigDir(t, curator+tt.toml)), tt.env...)
			code, out, _ := veratest.RunCommand(t, env, "check")
			assert.Equal(t, 0, code, "a warning is not a failure:\n%s", out)
			assert.Contains(t, out, "all checks passed")
			everyPage := slices.Contains(tt.env, "OLLAMA_ORIGINS=*")
			assert.Equal(t, everyPage, strings.Contains(out, "warn browsers: server.allowed_origins (or OLLAMA_ORIGINS, which vera takes when it is unset) allows every origin: "+
				"any web page you visit can chat through vera"), "vera itself open to every page is worth a warning:\n%s", out)
			if tt.lost == "" {
				assert.Contains(t, out, ok)
				assert.NotContains(t, out, "warn origins")
				return
			}
			if len(tt.ollama) == 1 && tt.ollama[0] == "*" {
				// Copying "*" would open vera to every page: check
				// asks for the apps' own origins instead.
				assert.Contains(t, out, everything+tt.lost+". If browser apps")
				assert.Contains(t, out, `("*" would let every web page you visit use vera`)
			} else {
				assert.Contains(t, out, warning+tt.lost+remedy)
			}
			assert.Equal(t, 1, strings.Count(out, "origins:"), "one line:\n%s", out)
		})
	}

	t.Run("an Ollama without OLLAMA_ORIGINS", func(t *testing.T) {
		up := tagsOllama(t, http.StatusNotFound, "llama3.1:8b", "nomic-embed-text:latest")
		code, out, _ := veratest.RunCommand(t, checkEnv(t, up.URL), "check")
		assert.Equal(t, 0, code, out)
		assert.Contains(t, out, ok)
		assert.NotContains(t, out, "warn origins")
	})

	t.Run("an answer that is neither 403 nor 2xx", func(t *testing.T) {
		// A reverse proxy in front of Ollama that fails requests with
		// an Origin: the question has no answer, and check says so.
		up := tagsOllama(t, http.StatusNotFound, "llama3.1:8b", "nomic-embed-text:latest")
		odd := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Origin") != "" {
				http.Error(w, "bad gateway", http.StatusBadGateway)
				return
			}
			up.Config.Handler.ServeHTTP(w, r)
		}))
		t.Cleanup(odd.Close)
		code, out, _ := veratest.RunCommand(t, checkEnv(t, odd.URL), "check")
		assert.Equal(t, 0, code, "a warning is not a failure:\n%s", out)
		assert.Contains(t, out, "warn origins: could not ask Ollama which browser origins it allows: ")
		assert.Contains(t, out, "502")
		assert.NotContains(t, out, "ok   origins")
	})
}

// With server.trust_loopback = false and no admin token nobody can use the
// admin routes or the UI: check says so and names the remedy.
func TestCheckWarnsWhenNobodyMayAdminister(t *testing.T) {
	up := tagsOllama(t, http.StatusNotFound, "llama3.1:8b", "nomic-embed-text:latest")
	const warning = "warn access: server.trust_loopback is false and no admin token is set: "
	tests := []struct {
		name string
		env  []string
		warn bool
	}{
		{"loopback trusted (the default)", nil, false},
		{"loopback not trusted, no admin token", []string{veratest.ConfigDir(t, "[server]\ntrust_loopback = false\n")}, true},
		{"loopback not trusted, an API key but no admin token", []string{veratest.ConfigDir(t, "[server]\ntrust_loopback = false\n"), "VERA_API_KEYS=k1"}, true},
		{"loopback not trusted, an admin token", []string{veratest.ConfigDir(t, "[server]\ntrust_loopback = false\n"), "VERA_ADMIN_TOKEN=adm1n-t0ken"}, false},
		{"loopback not trusted, an admin token in the config", []string{veratest.ConfigDir(t, "[server]\ntrust_loopback = false\nadmin_token = \"adm1n-t0ken\"\n")}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, _ := veratest.RunCommand(t, append(checkEnv(t, up.URL), tt.env...), "check")
			assert.Equal(t, 0, code, "a warning is not a failure:\n%s", out)
			assert.NotContains(t, out, "adm1n-t0ken", "the token is never shown")
			if !tt.warn {
				assert.NotContains(t, out, "warn access")
				return
			}
			require.Contains(t, out, warning)
			line := out[strings.Index(out, warning):]
			line = line[:strings.IndexByte(line, '\n')]
			assert.Contains(t, line, "answer 403 to everyone")
			assert.Contains(t, line, "set VERA_ADMIN_TOKEN (server.admin_token)")
		})
	}
}

func TestCheck(t *testing.T) {
	up := ollamatest.New(t)
	data := t.TempDir()
	// The fake has llama3.2 for the curator; a free port to listen on (a
	// real Ollama or vera may hold 11434 on the machine running the tests).
	env := []string{"VERA_OLLAMA_URL=" + up.URL, "VERA_DATA_DIR=" + data, "VERA_LISTEN=127.0.0.1:0",
		veratest.ConfigDir(t, "[curator]\ncurator_model = \"llama3.2\"\n")}
	code, out, _ := veratest.RunCommand(t, env, "check")
	assert.Equal(t, 0, code, out)
	assert.Contains(t, out, "ok   ollama: "+up.URL+", version 0.12.3")
	assert.Contains(t, out, "llama3.2:latest, nomic-embed-text:latest")
	assert.Contains(t, out, "ok   store: embedded, "+filepath.Join(data, "vera.db")+" (new: created when vera starts)")
	assert.NoFileExists(t, filepath.Join(data, "vera.db"), "a check changes nothing")
	assert.Contains(t, out, "ok   embedder: nomic-embed-text, 256 dimensions")

	// With a store: what it holds; while vera runs: that it is in use.
	p := veratest.Launch(t, env...)
	veratest.Chat(t, p, "alice", false, veratest.User("remember me"))
	code, out, _ = veratest.RunCommand(t, env, "check")
	assert.Equal(t, 0, code, out)
	assert.Contains(t, out, "(open in a running vera)")
	p.Stop(t)
	code, out, _ = veratest.RunCommand(t, env, "check")
	assert.Equal(t, 0, code, out)
	assert.Regexp(t, `ok   store: embedded, .*vera.db \(1 memories in 1 namespaces, 0 turns queued\)`, out)

	// The embedding model missing: a warning that says what to do
	// (recall by words still works).
	up.EmbedDown.Store(true)
	code, out, _ = veratest.RunCommand(t, env, "check")
	assert.Equal(t, 0, code, out)
	assert.Contains(t, out, "warn embedder:")
	assert.Contains(t, out, "ollama pull nomic-embed-text")
	up.EmbedDown.Store(false)

	off := filepath.Join(t.TempDir(), "config.toml")
	require.NoError(t, os.WriteFile(off, []byte("[memory]\nenabled = false\n"), 0o600))
	code, out, _ = veratest.RunCommand(t, env, "check", "--config", off)
	assert.Equal(t, 0, code, out)
	assert.Contains(t, out, "ok   memory: off")

	up.Close()
	code, out, _ = veratest.RunCommand(t, []string{"VERA_OLLAMA_URL=" + up.URL}, "check")
	assert.Equal(t, 1, code)
	assert.Contains(t, out, "FAIL ollama: "+up.URL+" unreachable")

	code, out, _ = veratest.RunCommand(t, []string{"VERA_LISTEN=nonsense"}, "check")
	assert.Equal(t, 1, code)
	assert.Contains(t, out, "FAIL config: server.listen")
}
