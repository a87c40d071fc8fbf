package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"time"

	"github.com/vera-proxy/vera/admin"
	"github.com/vera-proxy/vera/ollama"
)

// holder is what listens on the address vera should have.
type holder struct {
	// vera: a running vera answers there, with its /healthz.
	vera   bool
	health map[string]json.RawMessage
	// ollama is the version of the Ollama that answers there; "" when
	// it is not Ollama.
	ollama string
}

// whoHolds asks what listens on addr: a running vera, Ollama itself (the
// usual first-run mistake: Ollama's default address is vera's), or
// another program.
func whoHolds(ctx context.Context, addr string, transport http.RoundTripper) holder {
	base := &url.URL{Scheme: "http", Host: admin.DialAddr(addr)}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var health map[string]json.RawMessage
	if admin.GetJSON(ctx, &http.Client{Transport: transport}, base.JoinPath("/healthz").String(), &health) == nil &&
		health["status"] != nil && health["version"] != nil && health["ollama"] != nil {
		return holder{vera: true, health: health}
	}
	if version, err := ollama.New(base, transport).Version(ctx); err == nil && version != "" {
		return holder{ollama: version}
	}
	return holder{}
}

// listen binds addr, or says what holds it and what to do.
func listen(ctx context.Context, addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err == nil || !errors.Is(err, syscall.EADDRINUSE) {
		if err != nil {
			err = fmt.Errorf("listen on %s: %w", addr, err)
		}
		return ln, err
	}
	h := whoHolds(ctx, addr, ollama.NewTransport(2*time.Second))
	switch {
	case h.ollama != "":
		return nil, errors.New(ollamaHolds(addr, h.ollama) + "\n" + ollamaRemedy)
	case h.vera:
		var version string
		_ = json.Unmarshal(h.health["version"], &version)
		return nil, fmt.Errorf("%s is taken by a running vera (version %s): stop it first, or set VERA_LISTEN (--listen) to another address", addr, version)
	}
	return nil, fmt.Errorf("%s is taken by another program: stop it, or set VERA_LISTEN (--listen) to another address", addr)
}

// ollamaHolds is the one line that says Ollama sits where vera should.
func ollamaHolds(addr, version string) string {
	return fmt.Sprintf("%s is taken by Ollama %s itself, where vera should listen: move Ollama to 127.0.0.1:11435 "+
		"(OLLAMA_HOST=127.0.0.1:11435 ollama serve; vera's default VERA_OLLAMA_URL is http://127.0.0.1:11435) "+
		"or set VERA_LISTEN to another address", addr, version)
}

// ollamaRemedy moves Ollama to 11435 where it runs as a service.
var ollamaRemedy = strings.Join([]string{
	"  Linux (systemd):",
	"    sudo mkdir -p /etc/systemd/system/ollama.service.d",
	`    printf '[Service]\nEnvironment="OLLAMA_HOST=127.0.0.1:11435"\n' | sudo tee /etc/systemd/system/ollama.service.d/vera.conf`,
	"    sudo systemctl daemon-reload && sudo systemctl restart ollama",
	"  macOS (the Ollama app):",
	"    launchctl setenv OLLAMA_HOST 127.0.0.1:11435   (then quit Ollama from the menu bar and open it again)",
	"  Docker:",
	"    publish Ollama on 11435 instead: docker run -d -v ollama:/root/.ollama -p 127.0.0.1:11435:11434 --name ollama ollama/ollama",
	"    (or run both with this repository's docker-compose.yml)",
	"  Then start vera again; `vera check` tells whether everything is in place.",
}, "\n")
