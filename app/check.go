package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/vera-proxy/vera/admin"
	"github.com/vera-proxy/vera/config"
	"github.com/vera-proxy/vera/memory"
	"github.com/vera-proxy/vera/memory/embedded"
	"github.com/vera-proxy/vera/ollama"
	"github.com/vera-proxy/vera/prompts"
	"github.com/vera-proxy/vera/proxy"
)

// report writes `vera check`'s lines ("ok   topic: ...", "warn ...",
// "FAIL ...") and remembers whether anything failed. Every line is shown
// with the URLs in it redacted: errors quote the URLs they failed on.
type report struct {
	out    io.Writer
	failed bool
	warned int
}

func (r *report) line(label, topic, format string, args ...any) {
	fmt.Fprintf(r.out, "%-4s %s: %s\n", label, topic, config.RedactText(fmt.Sprintf(format, args...)))
}

func (r *report) ok(topic, format string, args ...any) { r.line("ok", topic, format, args...) }
func (r *report) warn(topic, format string, args ...any) {
	r.warned++
	r.line("warn", topic, format, args...)
}
func (r *report) fail(topic, format string, args ...any) {
	r.failed = true
	r.line("FAIL", topic, format, args...)
}

// result ends the report. A FAIL line is something vera cannot serve
// chats without (exit 1); a warn line a feature that works less well, or
// not at all, until it is fixed (exit 0).
func (r *report) result() error {
	switch {
	case r.failed:
		return errors.New("check failed: vera cannot serve chats until each FAIL above is fixed")
	case r.warned > 0:
		fmt.Fprintf(r.out, "all checks passed: vera serves chats; %d warnings name what works less well until fixed\n", r.warned)
	default:
		fmt.Fprintln(r.out, "all checks passed")
	}
	return nil
}

// check validates the configuration and reaches Ollama, printing a report a
// person can read. It fails (FAIL, exit 1) when vera cannot serve chats:
// the config, the listen address, Ollama, the store. What only degrades a
// feature (the curator's model, the embedder) is a warning.
func check(ctx context.Context, cfg config.Config, loadErr error, out io.Writer) error {
	r := &report{out: out}
	if loadErr != nil {
		r.fail("config", "%v", loadErr)
		return r.result()
	}
	checkConfig(cfg, r)

	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	// check waits briefly for each answer; it logs nothing (its report
	// is the output), and opens a store only to look at it.
	cfg.General.ResponseHeaderTimeout.Duration = 5 * time.Second
	a, err := newApp(ctx, cfg, slog.New(slog.DiscardHandler), appOptions{})
	if err != nil {
		r.fail("config", "%v", err)
		return r.result()
	}
	defer a.Close()
	checkListen(ctx, cfg, a.transport, r)
	checkAccess(cfg, r)
	if a.cloud != nil {
		checkCloud(ctx, cfg, a, r)
	}
	models, ok := checkOllama(ctx, cfg, a.ollama, r)
	if !ok {
		return r.result()
	}
	if !cfg.Memory.Enabled {
		r.ok("memory", "off (memory.enabled = false)")
		return r.result()
	}
	checkCuratorModel(cfg, models, r)
	checkMemory(ctx, a, models, r)
	return r.result()
}

// checkConfig reports where the config comes from, and its warnings.
func checkConfig(cfg config.Config, r *report) {
	src := "built-in defaults (no config file)"
	if cfg.Path != "" {
		src = cfg.Path
	}
	r.ok("config", "%s", src)
	for _, w := range cfg.Warnings {
		r.warn("config", "%s", w)
	}
}

// checkAccess warns of what the config leaves open, or closed to
// everyone, and of rules in the place of an older version.
func checkAccess(cfg config.Config, r *report) {
	if cfg.ExposedWithoutIdentity() {
		r.warn("listen", "%s: %s", cfg.Server.Listen, config.ExposedWarning)
	}
	if proxy.AllowsEveryOrigin(cfg.Server.AllowedOrigins) {
		r.warn("browsers", "%s", config.EveryOriginWarning)
	}
	if !cfg.Server.TrustLoopback && cfg.Server.AdminToken == "" {
		r.warn("access", "server.trust_loopback is false and no admin token is set: the admin routes (/memories, /curator) "+
			"answer 403 to everyone, the page at /ui/ included; set VERA_ADMIN_TOKEN (server.admin_token) to manage memories")
	}
	if cfg.Memory.Enabled {
		if path, n := prompts.LegacyRules(cfg.Prompts.Dir); n > 0 {
			r.warn("prompts", "%s (%s, %d lines)", prompts.LegacyRulesWarning, path, n)
		}
	}
}

// checkOllama reaches Ollama, asks which browser origins it serves, and
// lists its models; false when vera cannot serve chats with it.
func checkOllama(ctx context.Context, cfg config.Config, oc *ollama.Client, r *report) ([]string, bool) {
	h := admin.ProbeOllama(ctx, oc)
	if !h.OK {
		r.fail("ollama", "%s unreachable: %s", h.URL, h.Error)
		return nil, false
	}
	r.ok("ollama", "%s, version %s (%.1f ms)", h.URL, h.Version, h.LatencyMS)
	checkOrigins(ctx, cfg, oc, r)

	models, err := listModels(ctx, oc)
	if err != nil {
		r.fail("ollama models", "%v", err)
		return nil, false
	}
	if len(models) == 0 {
		r.warn("ollama models", "none installed (ollama pull <model>)")
	} else {
		r.ok(fmt.Sprintf("ollama models (%d)", len(models)), "%s", strings.Join(models, ", "))
	}
	return models, true
}

// checkCuratorModel reports whether Ollama has the curator's model.
func checkCuratorModel(cfg config.Config, models []string, r *report) {
	m := cfg.Curator.CuratorModel
	if hasModel(models, m) {
		r.ok("curator model", "%s", m)
		return
	}
	when := "daily at " + cfg.Curator.RunTime
	if cfg.Curator.Schedule != "" {
		when = "on the schedule " + cfg.Curator.Schedule
	}
	r.warn("curator model", "%s is not on Ollama (curator.curator_model): chats and memory work, but the nightly curator (%s) "+
		"cannot distil raw turns into memories, rules and profiles until it is; fix: ollama pull %s", m, when, m)
}

// checkListen binds the listen address to see that vera can. When it is
// taken, it tells a running vera (fine) from Ollama itself still listening
// on the address vera should have (the usual mistake when vera takes
// Ollama's place).
func checkListen(ctx context.Context, cfg config.Config, transport http.RoundTripper, r *report) {
	addr := cfg.Server.Listen
	ln, err := net.Listen("tcp", addr)
	if err == nil {
		ln.Close()
		r.ok("listen", "%s", addr)
		return
	}
	if !errors.Is(err, syscall.EADDRINUSE) {
		r.fail("listen", "%v", err)
		return
	}
	h := whoHolds(ctx, addr, transport)
	switch {
	case h.vera:
		r.ok("listen", "%s (a running vera answers there)", addr)
		var access admin.AccessHealth
		if json.Unmarshal(h.health["access"], &access) == nil && access.TrustLoopback && access.ForwardedLoopback > 0 {
			r.warn("access", "%d requests came from loopback with X-Forwarded-For, Forwarded or X-Real-IP: a reverse proxy on this host "+
				"makes every client look local. Set server.trust_loopback = false, and server.api_keys (VERA_API_KEYS) or memory.jwt_secret, "+
				"so that its clients are not trusted as this machine's", access.ForwardedLoopback)
		}
	case h.ollama != "":
		r.fail("listen", "%s\n%s", ollamaHolds(addr, h.ollama), ollamaRemedy)
	default:
		r.fail("listen", "%s: address in use by another program", addr)
	}
}

// originProbes stand for the origins people let reach Ollama with
// OLLAMA_ORIGINS (browser extensions, a web app, "*") and that vera does
// not allow by default.
var originProbes = []string{
	"chrome-extension://vera-check-probe", "moz-extension://vera-check-probe", "safari-web-extension://vera-check-probe",
	"https://vera-check-probe.example", "http://vera-check-probe.example",
}

// checkOrigins asks Ollama whether it serves browser pages of origins vera
// refuses: such a page used Ollama directly (OLLAMA_ORIGINS in Ollama's
// environment), and would be refused by vera in its place.
func checkOrigins(ctx context.Context, cfg config.Config, oc *ollama.Client, r *report) {
	mine := proxy.NewOrigins(cfg.Server.AllowedOrigins)
	var lost []string
	served := 0
	for _, o := range originProbes {
		ok, err := oc.AllowsOrigin(ctx, o)
		if err != nil {
			r.warn("origins", "could not ask Ollama which browser origins it allows: %v", err)
			return
		}
		if ok {
			served++
		}
		if ok && !mine.Allowed(o) {
			lost = append(lost, o)
		}
	}
	switch {
	case len(lost) > 0 && served == len(originProbes):
		r.warn("origins", "Ollama serves pages of every origin vera asked about (OLLAMA_ORIGINS=*, or something in front of Ollama ignores Origin); "+
			"vera refuses %s. If browser apps or extensions used Ollama, name their origins in server.allowed_origins "+
			"(\"*\" would let every web page you visit use vera and its memory)", strings.Join(lost, ", "))
	case len(lost) > 0:
		r.warn("origins", "Ollama serves browser pages that vera refuses (it answered %s): OLLAMA_ORIGINS is set for Ollama. "+
			"vera is the one that checks origins now: copy that value into server.allowed_origins (or OLLAMA_ORIGINS in vera's environment)",
			strings.Join(lost, ", "))
	default:
		r.ok("origins", "Ollama serves none of the origins vera asked about that vera refuses "+
			"(an OLLAMA_ORIGINS naming particular sites cannot be seen from here: if Ollama has one, copy it into server.allowed_origins)")
	}
}

// hasModel reports whether want is among Ollama's model names; a name
// without a tag means :latest, as in Ollama.
func hasModel(names []string, want string) bool {
	for _, n := range names {
		if strings.EqualFold(withTag(n), withTag(want)) {
			return true
		}
	}
	return false
}

func withTag(name string) string {
	if strings.Contains(name[strings.LastIndex(name, "/")+1:], ":") {
		return name
	}
	return name + ":latest"
}

// checkMemory opens the store and embeds a probe text, reporting both.
// It closes the store before the probe: a vera starting meanwhile must
// not find its file taken.
func checkMemory(ctx context.Context, a *app, models []string, r *report) {
	cfg := a.cfg
	if cfg.QdrantURL != nil {
		checkQdrant(ctx, a, r)
	} else if path := filepath.Join(cfg.Memory.DataDir, embedded.FileName); !exists(path) {
		r.ok("store", "embedded, %s (new: created when vera starts)", path)
	} else if err := a.openLocal(ctx, false); errors.Is(err, embedded.ErrInUse) {
		r.ok("store", "embedded, %s (open in a running vera)", path)
	} else if err != nil {
		r.fail("store", "%v", err)
	} else {
		db := a.local
		spaces, _ := db.Namespaces(ctx)
		total := 0
		for _, ns := range spaces {
			n, _ := db.Count(ctx, memory.Filter{Namespace: ns})
			total += n
		}
		pending, _ := db.Len(ctx)
		r.ok("store", "embedded, %s (%d memories in %d namespaces, %d turns queued)", db.Path(), total, len(spaces), pending)
	}
	_ = a.closeStores() // check only looked

	model := cfg.General.EmbeddingModel
	dim, err := memory.Probe(ctx, a.embedder)
	if err != nil {
		hint := ""
		if !hasModel(models, model) && !strings.Contains(err.Error(), "ollama pull") {
			hint = "; fix: ollama pull " + model
		}
		r.warn("embedder", "%v (chats and memory work, but recall is by words only, not by meaning, until it is)%s", err, hint)
		return
	}
	r.ok("embedder", "%s, %d dimensions", model, dim)
}

// listModels returns the names of the models Ollama has pulled, sorted.
func listModels(ctx context.Context, oc *ollama.Client) ([]string, error) {
	tags, err := oc.Tags(ctx)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(tags))
	for _, t := range tags {
		names = append(names, t.Name)
	}
	return names, nil
}

// healthcheck asks the vera listening on server.listen for /healthz and
// fails unless it answers 200 (ok or degraded). Container images have no
// curl, so the binary checks itself.
func healthcheck(ctx context.Context, cfg config.Config, out io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+admin.DialAddr(cfg.Server.Listen)+"/healthz", nil)
	if err != nil {
		return err
	}
	res, err := (&http.Client{Transport: ollama.NewTransport(5 * time.Second)}).Do(req)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
	if len(body) > 0 && body[len(body)-1] != '\n' {
		body = append(body, '\n') // a shell prompt then starts on its own line
	}
	out.Write(body)
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("healthcheck: %s", res.Status)
	}
	return nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// checkQdrant reaches Qdrant and reports the collection.
func checkQdrant(ctx context.Context, a *app, r *report) {
	if err := a.openQdrant(ctx); err != nil {
		r.fail("store", "%v", err)
		return
	}
	q := a.qdrant
	if err := q.Ping(ctx); err != nil {
		r.fail("store", "%v", err)
		return
	}
	spaces, err := q.Namespaces(ctx)
	if err != nil {
		r.fail("store", "%v", err)
		return
	}
	total := 0
	for _, ns := range spaces {
		n, err := q.Count(ctx, memory.Filter{Namespace: ns})
		if err != nil {
			r.fail("store", "%v", err)
			return
		}
		total += n
	}
	r.ok("store", "qdrant, %s, collection %q (%d memories in %d namespaces)", q.Addr(), q.Collection(), total, len(spaces))
}

// checkCloud says whether the cloud's key is set (never what it is) and
// whether the provider's /models answers with it.
func checkCloud(ctx context.Context, cfg config.Config, a *app, r *report) {
	host := a.cloud.Host()
	if cfg.CloudKey == "" {
		r.warn("cloud", "%s: no API key: the variable %s (cloud.api_key_env) is not set", host, cfg.Cloud.APIKeyEnv)
	} else {
		r.ok("cloud key", "set (from %s)", cfg.Cloud.APIKeyEnv)
	}
	n, err := a.cloud.Check(ctx)
	if err != nil {
		r.fail("cloud", "%v", err)
		return
	}
	r.ok("cloud", "%s lists %d models; serving %s", host, n, strings.Join(a.cloud.Names(), ", "))
	for _, name := range a.cloud.Names() {
		id, _ := a.cloud.Model(name)
		if n > 0 && !a.cloud.Listed(ctx, name) {
			r.warn("cloud models", "%s = %s: the provider does not list %s", name, id, id)
		}
	}
}
