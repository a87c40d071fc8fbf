package process

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/vera-proxy/vera/tests/veratest"
)

// The usual first run: Ollama still listens on 11434, where vera should.
// vera says so in its first line, with the commands that move Ollama, and
// exits 1 having created nothing: no data dir, no embedder warning.
func TestServeWhereOllamaListens(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/version" {
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"version":"0.24.0"}`))
			return
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(up.Close)
	addr := strings.TrimPrefix(up.URL, "http://")
	data := filepath.Join(t.TempDir(), "data")
	logs := filepath.Join(t.TempDir(), "logs")

	code, out, errOut := veratest.RunCommand(t, []string{"VERA_LISTEN=" + addr, "VERA_OLLAMA_URL=" + up.URL, "VERA_DATA_DIR=" + data,
		"VERA_LOG_DIR=" + logs, "VERA_PROMPTS_DIR=" + t.TempDir()}, "serve")
	assert.Equal(t, 1, code, errOut)
	assert.Empty(t, out)
	first, rest, _ := strings.Cut(errOut, "\n")
	assert.Equal(t, "vera: "+addr+" is taken by Ollama 0.24.0 itself, where vera should listen: move Ollama to 127.0.0.1:11435 "+
		"(OLLAMA_HOST=127.0.0.1:11435 ollama serve; vera's default VERA_OLLAMA_URL is http://127.0.0.1:11435) "+
		"or set VERA_LISTEN to another address", first)
	for _, want := range []string{"Environment=\"OLLAMA_HOST=127.0.0.1:11435\"", "sudo systemctl restart ollama",
		"launchctl setenv OLLAMA_HOST 127.0.0.1:11435", "-p 127.0.0.1:11435:11434"} {
		assert.Contains(t, rest, want)
	}
	assert.NotContains(t, errOut, "level=", "no log lines, only what to do")
	assert.NoDirExists(t, data, "nothing created")
	_, err := os.Stat(logs)
	assert.True(t, os.IsNotExist(err))

	// On every interface, as for Open WebUI in a container: the warning
	// about who may reach vera waits until vera runs.
	_, port, _ := strings.Cut(addr, ":")
	code, _, errOut = veratest.RunCommand(t, []string{"VERA_LISTEN=0.0.0.0:" + port, "VERA_DATA_DIR=" + data}, "serve")
	assert.Equal(t, 1, code, errOut)
	assert.True(t, strings.HasPrefix(errOut, "vera: 0.0.0.0:"+port+" is taken by Ollama 0.24.0 itself"), errOut)
	assert.NotContains(t, errOut, "level=")
}

// Another program, and a running vera, are told apart from Ollama.
func TestServeWhereAnotherProgramListens(t *testing.T) {
	other := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(other.Close)
	addr := strings.TrimPrefix(other.URL, "http://")
	data := filepath.Join(t.TempDir(), "data")
	code, _, errOut := veratest.RunCommand(t, []string{"VERA_LISTEN=" + addr, "VERA_DATA_DIR=" + data}, "serve")
	assert.Equal(t, 1, code)
	assert.Equal(t, "vera: "+addr+" is taken by another program: stop it, or set VERA_LISTEN (--listen) to another address\n", errOut)
	assert.NoDirExists(t, data)

	up := tagsOllama(t, http.StatusNotFound, "llama3.1:8b")
	p := veratest.Launch(t, "VERA_OLLAMA_URL="+up.URL)
	code, _, errOut = veratest.RunCommand(t, []string{"VERA_LISTEN=" + p.Addr, "VERA_DATA_DIR=" + data}, "serve")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "vera: "+p.Addr+" is taken by a running vera (version ")
	assert.NoDirExists(t, data)
}

// A fresh install's log reads as a start, not as an error.
func TestFreshInstallLogsNoError(t *testing.T) {
	up := tagsOllama(t, http.StatusNotFound, "llama3.1:8b")
	p := veratest.Launch(t, "VERA_OLLAMA_URL="+up.URL)
	assert.Eventually(t, func() bool { return strings.Contains(p.Logs(), "memory index loaded") }, 10*time.Second, 10*time.Millisecond)
	logs := p.Logs()
	assert.Contains(t, logs, "no snapshot yet")
	assert.NotContains(t, logs, "no such file or directory")
}
