package proxy

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/vera-proxy/vera/dialect"
)

// A web page the user visits can make the browser send "simple" requests
// (a POST with text/plain, no preflight) to 127.0.0.1:11434, and a page
// whose DNS name is rebound to 127.0.0.1 looks same-origin to the browser.
// Ollama guards against both (gin-contrib/cors with its
// envconfig.AllowedOrigins, and its allowedHostsMiddleware); since vera
// answers memory commands and recalls memory before Ollama sees the
// request, and rewrites Host when it forwards, vera makes both checks
// itself, on every route, before anything is read. It is then the one CORS
// authority: it answers preflights and removes Origin before forwarding,
// so that Ollama's own list, kept in Ollama's service environment, cannot
// disagree with vera's.

// ollamaOrigins are the origins Ollama allows without OLLAMA_ORIGINS
// (envconfig.AllowedOrigins).
var ollamaOrigins = []string{
	"http://localhost", "https://localhost", "http://localhost:*", "https://localhost:*",
	"http://127.0.0.1", "https://127.0.0.1", "http://127.0.0.1:*", "https://127.0.0.1:*",
	"http://0.0.0.0", "https://0.0.0.0", "http://0.0.0.0:*", "https://0.0.0.0:*",
	"app://*", "file://*", "tauri://*", "vscode-webview://*", "vscode-file://*",
}

// exposedHeaders lists every X-Vera-* header vera sends, so browser
// clients may read them.
const exposedHeaders = "X-Vera-Context, X-Vera-Memories, X-Vera-Tier, X-Vera-Fallback, X-Vera-Forgot, X-Vera-VRAM"

// corsHeaders are the request headers a browser app may send: Ollama's list
// (its OpenAI SDK headers included), then vera's own, Anthropic's and
// MCP's. The identity headers configured are added by allowedHeaders.
var corsHeaders = []string{
	"Authorization", "Content-Type", "User-Agent", "Accept", "X-Requested-With",
	"OpenAI-Beta", "X-Stainless-Arch", "X-Stainless-Async", "X-Stainless-Custom-Poll-Interval",
	"X-Stainless-Helper-Method", "X-Stainless-Lang", "X-Stainless-Os", "X-Stainless-Package-Version",
	"X-Stainless-Poll-Helper", "X-Stainless-Retry-Count", "X-Stainless-Runtime",
	"X-Stainless-Runtime-Version", "X-Stainless-Timeout",
	"X-Api-Key", "Anthropic-Version", "Anthropic-Beta", "Anthropic-Dangerous-Direct-Browser-Access",
	"X-Vera-Memory", "X-Vera-Task", "X-OpenWebUI-Task", "X-OpenWebUI-User-Id", "X-OpenWebUI-User-Name",
	"X-OpenWebUI-User-Email", "X-OpenWebUI-User-Jwt", "X-OpenWebUI-Chat-Id",
	"Mcp-Protocol-Version", "Mcp-Session-Id", "Last-Event-Id",
}

// Origins is an allow-list of browser origins, matched as gin-contrib/cors
// matches Ollama's: "*" allows every origin; a pattern with one * matches
// by the prefix before it and the suffix after it; any other is compared
// whole (in lower case, as the browser serialises an origin).
type Origins struct {
	all   bool
	exact map[string]bool
	wild  [][2]string
}

// NewOrigins returns Ollama's default origins plus extra.
func NewOrigins(extra []string) *Origins {
	o := &Origins{exact: map[string]bool{}}
	for _, p := range append(extra[:len(extra):len(extra)], ollamaOrigins...) {
		p = strings.TrimSpace(p)
		switch i := strings.IndexByte(p, '*'); {
		case p == "*":
			o.all = true
		case i >= 0:
			o.wild = append(o.wild, [2]string{p[:i], p[i+1:]})
		case p != "":
			o.exact[strings.ToLower(p)] = true
		}
	}
	return o
}

// Allowed reports whether a page of origin may use vera. "null" (sandboxed
// frames, file pages in some browsers, redirects) is never allowed: any
// page can make itself null.
func (o *Origins) Allowed(origin string) bool {
	switch {
	case origin == "null":
		return false
	case o.all, o.exact[origin]:
		return true
	}
	for _, w := range o.wild {
		if strings.HasPrefix(origin, w[0]) && strings.HasSuffix(origin, w[1]) && len(origin) >= len(w[0])+len(w[1]) {
			return true
		}
	}
	return false
}

// hosts decides which Host headers vera serves while it listens on
// loopback, as Ollama's allowedHostsMiddleware does: a name that resolves
// to 127.0.0.1 only by DNS rebinding is none of them.
type hosts struct {
	hostname string // this machine's, lower case
}

func newHosts() hosts {
	name, _ := os.Hostname()
	return hosts{hostname: strings.ToLower(name)}
}

// allowed reports whether Host (port ignored) names this machine: empty,
// localhost or a name under .localhost, .local or .internal, the machine's
// hostname, or an IP that is loopback, private, unspecified or one of this
// machine's.
func (h hosts) allowed(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = strings.TrimSuffix(strings.TrimPrefix(hostport, "["), "]")
	}
	// Names first: a failed ParseAddr costs an allocation, and localhost
	// is what most clients send.
	name := strings.ToLower(host)
	switch {
	case name == "", name == "localhost", name == h.hostname:
		return true
	}
	for _, tld := range []string{".localhost", ".local", ".internal"} {
		if strings.HasSuffix(name, tld) {
			return true
		}
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return ip.IsLoopback() || ip.IsPrivate() || ip.IsUnspecified() || localIP(ip)
	}
	return false
}

// localIP reports whether ip is an address of one of this machine's
// interfaces (a public address it holds). Looked up each time: addresses
// change, and only a Host that is a public IP gets here.
func localIP(ip netip.Addr) bool {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return false
	}
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil && p.Addr().Unmap() == ip.Unmap() {
			return true
		}
	}
	return false
}

// guardBrowser refuses, before anything is read, a request from a browser
// page that may not use vera: a Host that is not this machine's while vera
// listens on loopback (DNS rebinding), or an Origin that is not allowed.
// It answers an allowed origin's preflight and sets the CORS headers of
// its requests. Requests without Origin (CLIs, SDKs, Open WebUI's backend)
// pass unchanged.
func (s *Server) guardBrowser(c *gin.Context) {
	r := c.Request
	if s.checkHost && !s.hosts.allowed(r.Host) {
		s.refuse(c, fmt.Sprintf("vera does not serve the host name %q: while it listens on loopback it answers only to this machine's names "+
			"(localhost, its IPs, its hostname, .local and .internal names), as Ollama does; a reverse proxy should send Host: localhost", r.Host))
		return
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return // no browser, or a browser's same-origin GET
	}
	h := c.Writer.Header()
	h.Add("Vary", "Origin") // the answer depends on it, whatever it is
	if (origin == "http://"+r.Host || origin == "https://"+r.Host) && (s.hosts.allowed(r.Host) || len(s.APIKeys) > 0) {
		// A page vera serves. Under a name that is not this machine's it
		// may be a rebound one, which only the Host check stops, and that
		// check is off while vera listens beyond loopback (in Docker too):
		// such a page is judged by its origin, unless keys guard vera.
		return
	}
	if !s.origins.Allowed(origin) {
		s.refuse(c, fmt.Sprintf("origin %q is not allowed to use vera: add it to server.allowed_origins (as OLLAMA_ORIGINS is for Ollama)", origin))
		return
	}
	h.Set("Access-Control-Allow-Origin", origin)
	if r.Method == http.MethodOptions {
		h.Add("Vary", "Access-Control-Request-Method")
		h.Add("Vary", "Access-Control-Request-Headers")
		h.Set("Access-Control-Allow-Methods", "GET,POST,PUT,PATCH,DELETE,HEAD,OPTIONS")
		h.Set("Access-Control-Allow-Headers", s.allowHeaders)
		h.Set("Access-Control-Max-Age", "43200")
		c.AbortWithStatus(http.StatusNoContent)
		return
	}
	h.Set("Access-Control-Expose-Headers", exposedHeaders)
}

// upstreamCORS are the CORS headers an upstream may send: vera's are the
// ones that count, and a second Access-Control-Allow-Origin would make the
// browser refuse the answer.
var upstreamCORS = []string{
	"Access-Control-Allow-Origin", "Access-Control-Allow-Credentials", "Access-Control-Allow-Headers",
	"Access-Control-Allow-Methods", "Access-Control-Expose-Headers", "Access-Control-Max-Age",
}

// dropCORS takes an upstream's CORS headers out of its answer.
func dropCORS(h http.Header) {
	for _, k := range upstreamCORS {
		h.Del(k)
	}
}

// AllowsEveryOrigin reports whether patterns (server.allowed_origins)
// let every web page use vera: OLLAMA_ORIGINS=* is common for Ollama, and
// vera inherits it when the key is unset. Worth a warning.
func AllowsEveryOrigin(patterns []string) bool {
	o := NewOrigins(patterns)
	return o.Allowed("https://vera-any-site.example") || o.Allowed("http://vera-any-site.example")
}

// refuse answers 403 in the request's dialect and stops it.
func (s *Server) refuse(c *gin.Context, msg string) {
	writeError(c.Writer, c.Request.Context(), dialect.Of(c.Request.URL.Path), httpError(http.StatusForbidden, msg, nil))
	c.Abort()
}

// allowedHeaders is the preflight's Access-Control-Allow-Headers: the
// common list plus the identity headers this vera is configured to read.
func allowedHeaders(extra ...string) string {
	seen := map[string]bool{}
	var out []string
	for _, h := range append(corsHeaders[:len(corsHeaders):len(corsHeaders)], extra...) {
		if k := http.CanonicalHeaderKey(strings.TrimSpace(h)); k != "" && !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	return strings.Join(out, ",")
}
