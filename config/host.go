package config

import (
	"fmt"
	"net"
	"net/http"
	"strings"
)

// LoopbackHost reports whether a Host header names this machine:
// localhost (or a name under it), or a loopback address. A name that
// resolves here only by DNS rebinding is none of these.
func LoopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Forwarded reports whether a reverse proxy forwarded r: it carries
// Forwarded, X-Forwarded-For or X-Real-IP. Such a request's client is not
// the peer vera sees.
func Forwarded(r *http.Request) bool {
	h := r.Header
	return h.Get("Forwarded") != "" || h.Get("X-Forwarded-For") != "" || h.Get("X-Real-Ip") != ""
}

// LoopbackPeer reports whether a connection's remote address (host:port)
// is a loopback address.
func LoopbackPeer(remoteAddr string) bool {
	host, _, err := net.SplitHostPort(remoteAddr)
	ip := net.ParseIP(host)
	return err == nil && ip != nil && ip.IsLoopback()
}

// checkOrigins refuses an origin pattern that cannot match as Ollama
// matches (gin-contrib/cors allows one * per pattern).
func checkOrigins(patterns []string) error {
	for _, p := range patterns {
		if strings.Count(p, "*") > 1 {
			return fmt.Errorf("server.allowed_origins (or OLLAMA_ORIGINS when it is unset): %q has more than one *; write one pattern per variant", p)
		}
		if strings.ContainsAny(p, " \t") {
			return fmt.Errorf("server.allowed_origins (or OLLAMA_ORIGINS when it is unset): %q holds a space; separate patterns with commas", p)
		}
	}
	return nil
}
