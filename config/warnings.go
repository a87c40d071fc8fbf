package config

import (
	"net"
	"strings"
)

// The warnings about the config that serve logs at start and check
// reports.

// ExposedWarning says why listening beyond loopback without a way to
// identify users is risky, and names the remedies.
const ExposedWarning = "vera listens beyond loopback: anyone who can reach it can pick any namespace with a header. " +
	"Set server.api_keys (VERA_API_KEYS) so that every client needs a key, " +
	"and/or memory.jwt_secret (VERA_JWT_SECRET, Open WebUI's FORWARD_USER_INFO_HEADER_JWT_SECRET) so that namespaces come only from Open WebUI's signed user token; " +
	"or listen on 127.0.0.1"

// EveryOriginWarning says why an allow-list that matches every origin
// (often OLLAMA_ORIGINS=*, inherited) is risky, and what to do.
const EveryOriginWarning = "server.allowed_origins (or OLLAMA_ORIGINS, which vera takes when it is unset) allows every origin: " +
	"any web page you visit can chat through vera, read what it recalls, and plant or erase memories with \"remember that\" and \"forget that\". " +
	"List the origins of the browser apps you use instead"

// ExposedWithoutIdentity reports whether vera listens where other hosts can
// reach it (any address but a loopback one; an empty host, 0.0.0.0 and ::
// mean every interface) with nothing that ties a request to a user: no api
// keys and no JWT secret.
func (cfg Config) ExposedWithoutIdentity() bool {
	host, _, err := net.SplitHostPort(cfg.Server.Listen)
	if err != nil {
		return false // not an address: Validate has said so
	}
	if strings.EqualFold(host, "localhost") {
		return false
	}
	ip := net.ParseIP(host)
	return (ip == nil || !ip.IsLoopback()) && len(cfg.Server.APIKeys) == 0 && cfg.Memory.JWTSecret == ""
}
