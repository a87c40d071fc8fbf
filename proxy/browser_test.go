package proxy

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// Origins match as Ollama's gin-contrib/cors matches them: its defaults,
// then the extra patterns (one * each, or "*" for all); null never.
func TestOriginsMatchAsOllamas(t *testing.T) {
	def := NewOrigins(nil)
	extra := NewOrigins([]string{"https://app.example", "chrome-extension://*", "https://*.tools.example", " HTTPS://Upper.Example "})
	all := NewOrigins([]string{"*"})
	for _, tc := range []struct {
		origin          string
		def, extra, all bool
	}{
		{"http://localhost", true, true, true},
		{"http://localhost:3000", true, true, true},
		{"https://127.0.0.1:8443", true, true, true},
		{"http://0.0.0.0:8080", true, true, true},
		{"app://obsidian.md", true, true, true},
		{"file://", true, true, true},
		{"tauri://localhost", true, true, true},
		{"vscode-webview://abc", true, true, true},
		{"vscode-file://vscode-app", true, true, true},
		{"http://localhost.evil.example", false, false, true},
		{"http://127.0.0.1.nip.io", false, false, true},
		{"https://evil.example", false, false, true},
		{"https://app.example", false, true, true},
		{"https://app.example.evil", false, false, true},
		{"https://upper.example", false, true, true},
		{"chrome-extension://abcdef", false, true, true},
		{"moz-extension://abcdef", false, false, true},
		{"https://chat.tools.example", false, true, true},
		{"https://tools.example", false, false, true},
		{"null", false, false, false},
		{"", false, false, true},
	} {
		assert.Equal(t, tc.def, def.Allowed(tc.origin), "default %q", tc.origin)
		assert.Equal(t, tc.extra, extra.Allowed(tc.origin), "extra %q", tc.origin)
		assert.Equal(t, tc.all, all.Allowed(tc.origin), "all %q", tc.origin)
	}
}

// Hosts are accepted as Ollama's allowedHostsMiddleware accepts them.
func TestHostsAsOllamas(t *testing.T) {
	h := hosts{hostname: "desk-7"}
	for host, want := range map[string]bool{
		"":                           true,
		"localhost":                  true,
		"LOCALHOST:11434":            true,
		"127.0.0.1:11434":            true,
		"127.9.9.9":                  true,
		"[::1]:11434":                true,
		"[::1]":                      true,
		"0.0.0.0:11434":              true,
		"[::]:11434":                 true,
		"192.168.1.20:11434":         true,
		"10.1.2.3":                   true,
		"172.16.0.9":                 true,
		"[fd00::1]:11434":            true,
		"host.docker.internal:11434": true,
		"printer.local":              true,
		"app.localhost:3000":         true,
		"desk-7:11434":               true,
		"DESK-7":                     true,
		"evil.example:11434":         false,
		"localhost.evil.example":     false,
		"internal.evil.example":      false,
		"8.8.8.8:11434":              false,
		"desk-7.evil.example":        false,
	} {
		assert.Equal(t, want, h.allowed(host), "%q", host)
	}
}

func FuzzHosts(f *testing.F) {
	for _, s := range []string{"localhost:11434", "[::1]:1", "evil.example", "192.168.0.1", "a.local", "[", ":", "x:y:z"} {
		f.Add(s)
	}
	h := hosts{hostname: "desk-7"}
	f.Fuzz(func(t *testing.T, host string) {
		got := h.allowed(host)
		if !strings.ContainsAny(host, "[]:") {
			// The port never matters, nor does case.
			assert.Equal(t, got, h.allowed(host+":11434"), "%q", host)
			assert.Equal(t, got, h.allowed(strings.ToUpper(host)), "%q", host)
		}
	})
}

func FuzzOrigins(f *testing.F) {
	for _, s := range []string{"http://localhost:3000", "null", "https://evil.example", "app://x", ""} {
		f.Add(s)
	}
	o := NewOrigins([]string{"https://*.tools.example"})
	f.Fuzz(func(t *testing.T, origin string) {
		if o.Allowed(origin) {
			assert.NotEqual(t, "null", origin)
		}
	})
}
