package tests

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/vera-proxy/vera/config"
)

// The headers vera reads under fixed names (proxy's identity header and
// the user directory's name and email), beside the two that config names.
const (
	composeUserNameHeader  = "X-OpenWebUI-User-Name"
	composeUserEmailHeader = "X-OpenWebUI-User-Email"
	composeUserJWTHeader   = "X-OpenWebUI-User-Jwt"
)

// Open WebUI's image listens on 8080 and keeps its data in
// /app/backend/data; Ollama's listens on 11434 unless OLLAMA_HOST says
// otherwise.
const (
	composeWebUIPort    = "8080"
	composeWebUIDataDir = "/app/backend/data"
	composeOllamaPort   = "11434"
)

var (
	dockerfileListen      = regexp.MustCompile(`\bVERA_LISTEN=(\S+)`)
	dockerfileHealthcheck = regexp.MustCompile(`(?m)^\s*HEALTHCHECK\s+(\S+)`)
)

// composeProblems lists what keeps the compose file c from running Ollama,
// vera and (under the webui profile) Open WebUI wired together, given
// vera's Dockerfile and vera's built-in config; none when all is well.
func composeProblems(c composeFile, dockerfile string, def config.Config) []string {
	k := &composeCheck{c: c, dockerfile: dockerfile, def: def}
	if !k.findServices() {
		return k.problems
	}
	k.interpolate()
	k.checkProfiles()
	if !k.findVeraPort() {
		return k.problems
	}
	k.checkVeraToOllama()
	k.checkPublishedPorts()
	k.checkWebUIToVera()
	k.checkForwardedHeaders()
	k.checkSignedIdentity()
	k.checkWebUIData()
	return k.problems
}

// composeCheck is one run of composeProblems: the file, what is learnt of
// it phase by phase, and the problems found.
type composeCheck struct {
	c          composeFile
	dockerfile string
	def        config.Config
	problems   []string

	vera, ollama, webui string                       // service names
	env                 map[string]map[string]string // by service, interpolated
	veraPort            string                       // where vera listens in its container
}

func (k *composeCheck) bad(format string, args ...any) {
	k.problems = append(k.problems, fmt.Sprintf(format, args...))
}

func (k *composeCheck) svc(name string) composeService { return k.c.Services[name] }

// findServices finds vera (built from this repository), Ollama and Open
// WebUI by what they run, not by name: their names are the host names
// the others reach them by.
func (k *composeCheck) findServices() bool {
	one := func(what string, match func(composeService) bool) string {
		var names []string
		for name, s := range k.c.Services {
			if match(s) {
				names = append(names, name)
			}
		}
		if len(names) != 1 {
			k.bad("want exactly one service that is %s, found %v", what, names)
			return ""
		}
		return names[0]
	}
	k.vera = one("vera (built from this repository)", func(s composeService) bool { return s.buildContext() == "." })
	k.ollama = one("Ollama (image ollama/ollama)", func(s composeService) bool { return strings.HasPrefix(s.Image, "ollama/ollama") })
	k.webui = one("Open WebUI (image ghcr.io/open-webui/open-webui)", func(s composeService) bool {
		return strings.HasPrefix(s.Image, "ghcr.io/open-webui/open-webui:")
	})
	return k.vera != "" && k.ollama != "" && k.webui != ""
}

// interpolate gives each environment as the container gets it on a
// machine where none of the file's variables is set: the optional ones
// must stay optional.
func (k *composeCheck) interpolate() {
	unset := func(string) (string, bool) { return "", false }
	k.env = map[string]map[string]string{}
	for _, name := range []string{k.vera, k.ollama, k.webui} {
		k.env[name] = map[string]string{}
		for key, v := range k.svc(name).Environment {
			x, err := composeInterpolate(v, unset)
			if err != nil {
				k.bad("%s: %s: %v", name, key, err)
			}
			k.env[name][key] = x
		}
	}
}

// checkProfiles: Ollama and vera start with a plain `up` as with
// `--profile webui up`; Open WebUI with the latter only.
func (k *composeCheck) checkProfiles() {
	for _, name := range []string{k.ollama, k.vera} {
		if p := k.svc(name).Profiles; len(p) > 0 {
			k.bad("%s: under profiles %v, so `docker compose up` does not start it", name, p)
		}
	}
	if p := k.svc(k.webui).Profiles; !slices.Contains(p, "webui") {
		k.bad("%s: profiles %v lack webui", k.webui, p)
	}
}

// findVeraPort learns where vera listens inside its container (its
// compose environment, else the image's), which must be reachable from
// the other containers.
func (k *composeCheck) findVeraPort() bool {
	listen := k.env[k.vera]["VERA_LISTEN"]
	if listen == "" {
		if m := dockerfileListen.FindStringSubmatch(k.dockerfile); m != nil {
			listen = m[1]
		}
	}
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		k.bad("%s: listen address %q (VERA_LISTEN, compose or Dockerfile): %v", k.vera, listen, err)
		return false
	}
	if ip := net.ParseIP(host); host == "localhost" || ip != nil && ip.IsLoopback() {
		k.bad("%s: listens on %s, a loopback address: no other container can reach it", k.vera, listen)
	}
	k.veraPort = port
	return true
}

// checkURL wants the environment variable key of service svc to be
// http://host:port.
func (k *composeCheck) checkURL(svc, key, host, port string) {
	v := k.env[svc][key]
	u, err := url.Parse(v)
	switch {
	case v == "":
		k.bad("%s: %s is not set", svc, key)
	case err != nil:
		k.bad("%s: %s=%q: %v", svc, key, v, err)
	case u.Scheme != "http" || u.Hostname() != host || u.Port() != port:
		k.bad("%s: %s=%q, want http://%s:%s", svc, key, v, host, port)
	}
}

// checkVeraToOllama: vera forwards to Ollama, which only vera reaches.
func (k *composeCheck) checkVeraToOllama() {
	port := composeOllamaPort
	if h := k.env[k.ollama]["OLLAMA_HOST"]; h != "" {
		if _, p, err := net.SplitHostPort(h); err == nil {
			port = p
		}
	}
	k.checkURL(k.vera, "VERA_OLLAMA_URL", k.ollama, port)
	if _, ok := k.svc(k.vera).DependsOn[k.ollama]; !ok {
		k.bad("%s: does not depend on %s", k.vera, k.ollama)
	}
	if p := k.svc(k.ollama).Ports; len(p) > 0 {
		k.bad("%s: publishes %v: Ollama is reached only through vera", k.ollama, p)
	}
}

// checkPublishedPorts: vera and Open WebUI are published on the host's
// loopback only, each to the port it listens on.
func (k *composeCheck) checkPublishedPorts() {
	for _, p := range []struct{ svc, inside, what string }{
		{k.vera, k.veraPort, "where it listens"},
		{k.webui, composeWebUIPort, "where Open WebUI listens"},
	} {
		ports := k.svc(p.svc).Ports
		var inside []string
		for _, port := range ports {
			parts := strings.Split(strings.SplitN(port, "/", 2)[0], ":")
			if len(parts) != 3 || parts[0] != "127.0.0.1" {
				k.bad("%s: port %q is not published on 127.0.0.1 only (want 127.0.0.1:HOST:CONTAINER)", p.svc, port)
				continue
			}
			inside = append(inside, parts[2])
		}
		if !slices.Contains(inside, p.inside) {
			k.bad("%s: none of its ports %v reaches %s, %s", p.svc, ports, p.inside, p.what)
		}
	}
}

// checkWebUIToVera: Open WebUI's Ollama is vera, and it starts once vera
// answers.
func (k *composeCheck) checkWebUIToVera() {
	k.checkURL(k.webui, "OLLAMA_BASE_URL", k.vera, k.veraPort)
	wantHealthy := k.svc(k.vera).Healthcheck.Kind != 0
	if m := dockerfileHealthcheck.FindStringSubmatch(k.dockerfile); m != nil && m[1] != "NONE" {
		wantHealthy = true
	}
	switch cond, ok := k.svc(k.webui).DependsOn[k.vera]; {
	case !ok:
		k.bad("%s: does not depend on %s", k.webui, k.vera)
	case wantHealthy && cond != "service_healthy":
		k.bad("%s: waits for %s with %q, want service_healthy (vera's image has a health check)", k.webui, k.vera, cond)
	}
}

// checkForwardedHeaders: who is chatting and in which chat. Open WebUI
// reads its switch as the string "true" only, and each header name is
// set explicitly, to what vera reads.
func (k *composeCheck) checkForwardedHeaders() {
	env := k.env[k.webui]
	if v := env["ENABLE_FORWARD_USER_INFO_HEADERS"]; strings.ToLower(v) != "true" {
		k.bad("%s: ENABLE_FORWARD_USER_INFO_HEADERS=%q, want \"true\"", k.webui, v)
	}
	for _, h := range []struct{ key, want, why string }{
		{"FORWARD_USER_INFO_HEADER_USER_ID", k.def.Memory.NamespaceHeader, "memory.namespace_header"},
		{"FORWARD_SESSION_INFO_HEADER_CHAT_ID", k.def.Memory.ChatIDHeader, "memory.chat_id_header"},
		{"FORWARD_USER_INFO_HEADER_USER_NAME", composeUserNameHeader, "the user directory"},
		{"FORWARD_USER_INFO_HEADER_USER_EMAIL", composeUserEmailHeader, "the user directory"},
		{"FORWARD_USER_INFO_HEADER_JWT", composeUserJWTHeader, "memory.jwt_secret"},
	} {
		v, ok := env[h.key]
		switch {
		case !ok:
			k.bad("%s: %s is not set, so it rests on Open WebUI's default; want %q (%s)", k.webui, h.key, h.want, h.why)
		case !strings.EqualFold(v, h.want):
			k.bad("%s: %s=%q, but vera reads %q (%s)", k.webui, h.key, v, h.want, h.why)
		}
	}
}

// checkSignedIdentity: one secret for both sides, from one variable (its
// being optional is interpolate's check).
func (k *composeCheck) checkSignedIdentity() {
	veraSecret, veraHas := k.svc(k.vera).Environment["VERA_JWT_SECRET"]
	webuiSecret, webuiHas := k.svc(k.webui).Environment["FORWARD_USER_INFO_HEADER_JWT_SECRET"]
	if !veraHas || !webuiHas || veraSecret != webuiSecret {
		k.bad("%s VERA_JWT_SECRET=%q and %s FORWARD_USER_INFO_HEADER_JWT_SECRET=%q: want both, from the same variable",
			k.vera, veraSecret, k.webui, webuiSecret)
	}
}

// checkWebUIData: Open WebUI's accounts and settings outlive its
// container.
func (k *composeCheck) checkWebUIData() {
	for _, v := range k.svc(k.webui).Volumes {
		src, dst, _ := strings.Cut(v, ":")
		dst, _, _ = strings.Cut(dst, ":")
		if _, named := k.c.Volumes[src]; named && dst == composeWebUIDataDir {
			return
		}
	}
	k.bad("%s: no named volume (declared under volumes:) on %s", k.webui, composeWebUIDataDir)
}

func TestComposeWiresOpenWebUIToVera(t *testing.T) {
	c := loadCompose(t, filepath.Join("..", "docker-compose.yml"))
	problems := composeProblems(c, readDockerfile(t), config.Default())
	assert.Empty(t, problems, "docker-compose.yml:\n%s", strings.Join(problems, "\n"))
}

// TestComposeWiringCatchesBreakage breaks a copy of the compose file, one
// way at a time, and wants each break reported.
func TestComposeWiringCatchesBreakage(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "docker-compose.yml"))
	require.NoError(t, err)
	copyPath := filepath.Join(t.TempDir(), "docker-compose.yml")
	require.NoError(t, os.WriteFile(copyPath, raw, 0o644))
	dockerfile := readDockerfile(t)

	webui := func(f func(*composeService)) func(*composeFile) {
		return func(c *composeFile) { composeEdit(c, "open-webui", f) }
	}
	vera := func(f func(*composeService)) func(*composeFile) {
		return func(c *composeFile) { composeEdit(c, "vera", f) }
	}
	setEnv := func(k, v string) func(*composeService) {
		return func(s *composeService) { s.Environment[k] = v }
	}
	for _, tc := range []struct {
		name    string
		breakIt func(*composeFile)
		want    string
	}{
		{"chat id header renamed", webui(setEnv("FORWARD_SESSION_INFO_HEADER_CHAT_ID", "X-Chat-Id")), "FORWARD_SESSION_INFO_HEADER_CHAT_ID"},
		{"chat id header left to the default", webui(func(s *composeService) { delete(s.Environment, "FORWARD_SESSION_INFO_HEADER_CHAT_ID") }), "rests on Open WebUI's default"},
		{"user id header renamed", webui(setEnv("FORWARD_USER_INFO_HEADER_USER_ID", "X-User")), "memory.namespace_header"},
		{"jwt header renamed", webui(setEnv("FORWARD_USER_INFO_HEADER_JWT", "X-Token")), "FORWARD_USER_INFO_HEADER_JWT="},
		{"forwarding off", webui(setEnv("ENABLE_FORWARD_USER_INFO_HEADERS", "false")), "ENABLE_FORWARD_USER_INFO_HEADERS"},
		{"forwarding as 1, which Open WebUI reads as off", webui(setEnv("ENABLE_FORWARD_USER_INFO_HEADERS", "1")), "ENABLE_FORWARD_USER_INFO_HEADERS"},
		{"straight to Ollama", webui(setEnv("OLLAMA_BASE_URL", "http://ollama:11434")), "OLLAMA_BASE_URL"},
		{"vera's wrong port", webui(setEnv("OLLAMA_BASE_URL", "http://vera:8080")), "OLLAMA_BASE_URL"},
		{"no base url", webui(func(s *composeService) { delete(s.Environment, "OLLAMA_BASE_URL") }), "OLLAMA_BASE_URL is not set"},
		{"published on every interface", webui(func(s *composeService) { s.Ports = []string{"3000:8080"} }), "127.0.0.1 only"},
		{"published to the wrong container port", webui(func(s *composeService) { s.Ports = []string{"127.0.0.1:3000:3000"} }), "where Open WebUI listens"},
		{"no profile", webui(func(s *composeService) { s.Profiles = nil }), "lack webui"},
		{"does not wait for vera", webui(func(s *composeService) { s.DependsOn = nil }), "does not depend on vera"},
		{"waits only for vera's start", webui(func(s *composeService) { s.DependsOn = composeDependsOn{"vera": "service_started"} }), "service_healthy"},
		{"secret on one side only", webui(setEnv("FORWARD_USER_INFO_HEADER_JWT_SECRET", "${OPEN_WEBUI_SECRET:-}")), "from the same variable"},
		{"secret made required", func(c *composeFile) {
			composeEdit(c, "vera", setEnv("VERA_JWT_SECRET", "${VERA_JWT_SECRET:?set it}"))
			composeEdit(c, "open-webui", setEnv("FORWARD_USER_INFO_HEADER_JWT_SECRET", "${VERA_JWT_SECRET:?set it}"))
		}, "VERA_JWT_SECRET is required"},
		{"data on no volume", webui(func(s *composeService) { s.Volumes = nil }), composeWebUIDataDir},
		{"vera on loopback only", vera(setEnv("VERA_LISTEN", "127.0.0.1:11434")), "loopback address"},
		{"vera moved to another port", vera(setEnv("VERA_LISTEN", "0.0.0.0:8000")), "OLLAMA_BASE_URL"},
		{"vera published on every interface", vera(func(s *composeService) { s.Ports = []string{"11434:11434"} }), "127.0.0.1 only"},
		{"vera under a profile", vera(func(s *composeService) { s.Profiles = []string{"webui"} }), "does not start it"},
		{"vera not to ollama", vera(setEnv("VERA_OLLAMA_URL", "http://localhost:11434")), "VERA_OLLAMA_URL"},
		{"ollama published", func(c *composeFile) {
			composeEdit(c, "ollama", func(s *composeService) { s.Ports = []string{"127.0.0.1:11435:11434"} })
		}, "reached only through vera"},
		{"two Open WebUIs", func(c *composeFile) { c.Services["open-webui-2"] = c.Services["open-webui"] }, "exactly one service"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := loadCompose(t, copyPath)
			require.Empty(t, composeProblems(c, dockerfile, config.Default()), "the unbroken copy")
			tc.breakIt(&c)
			problems := composeProblems(c, dockerfile, config.Default())
			require.NotEmpty(t, problems)
			assert.Contains(t, strings.Join(problems, "\n"), tc.want)
		})
	}

	t.Run("a chat id header vera no longer defaults to", func(t *testing.T) {
		def := config.Default()
		def.Memory.ChatIDHeader = "X-Vera-Chat"
		problems := composeProblems(loadCompose(t, copyPath), dockerfile, def)
		assert.Contains(t, strings.Join(problems, "\n"), `vera reads "X-Vera-Chat"`)
	})
	t.Run("an image that listens on loopback", func(t *testing.T) {
		df := strings.Replace(dockerfile, "VERA_LISTEN=0.0.0.0:11434", "VERA_LISTEN=127.0.0.1:11434", 1)
		require.NotEqual(t, dockerfile, df, "the Dockerfile sets VERA_LISTEN=0.0.0.0:11434")
		problems := composeProblems(loadCompose(t, copyPath), df, config.Default())
		assert.Contains(t, strings.Join(problems, "\n"), "loopback address")
	})
}

// composeEdit applies f to the named service of c.
func composeEdit(c *composeFile, name string, f func(*composeService)) {
	s, ok := c.Services[name]
	if !ok {
		panic("compose file has no service " + name)
	}
	if s.Environment == nil {
		s.Environment = composeEnv{}
	}
	f(&s)
	c.Services[name] = s
}

func TestComposeInterpolate(t *testing.T) {
	env := map[string]string{"SET": "v", "EMPTY": ""}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	for _, tc := range []struct{ in, want, err string }{
		{in: "plain", want: "plain"},
		{in: "${SET}/$SET/$$SET", want: "v/v/$SET"},
		{in: "${UNSET:-}", want: ""},
		{in: "${UNSET:-d}|${EMPTY:-d}|${EMPTY-d}|${SET:-d}", want: "d|d||v"},
		{in: "${SET:+alt}|${EMPTY:+alt}|${EMPTY+alt}|${UNSET+alt}", want: "alt||alt|"},
		{in: "${SET:?m}", want: "v"},
		{in: "${EMPTY?m}", want: ""},
		{in: "${EMPTY:?m}", err: "EMPTY is required"},
		{in: "${UNSET?m}", err: "UNSET is required"},
		{in: "${UNCLOSED", err: "without }"},
		{in: "cost: 5$", want: "cost: 5$"},
	} {
		got, err := composeInterpolate(tc.in, lookup)
		if tc.err != "" {
			assert.ErrorContains(t, err, tc.err, tc.in)
			continue
		}
		require.NoError(t, err, tc.in)
		assert.Equal(t, tc.want, got, tc.in)
	}
}

func TestComposeEnvironmentAndDependsOnForms(t *testing.T) {
	var asMaps, asLists composeService
	require.NoError(t, yaml.Unmarshal([]byte(`
environment:
  A: x=y
  B:
  C: true
depends_on:
  v:
    condition: service_started
  w:
    condition: service_healthy
`), &asMaps))
	require.NoError(t, yaml.Unmarshal([]byte(`
environment:
  - A=x=y
  - B
  - C=true
depends_on: [v, w]
`), &asLists))
	assert.Equal(t, composeEnv{"A": "x=y", "B": "", "C": "true"}, asMaps.Environment)
	assert.Equal(t, asMaps.Environment, asLists.Environment)
	assert.Equal(t, composeDependsOn{"v": "service_started", "w": "service_healthy"}, asMaps.DependsOn)
	assert.Equal(t, composeDependsOn{"v": "service_started", "w": "service_started"}, asLists.DependsOn)
}
