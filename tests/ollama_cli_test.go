package tests

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/ollama/ollamatest"
	"github.com/vera-proxy/vera/tests/veratest"
)

// realOllamaCLI is the ollama binary named by VERA_TEST_OLLAMA_BIN; the
// test is skipped without it (CI never has it).
func realOllamaCLI(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("VERA_TEST_OLLAMA_BIN")
	if bin == "" {
		t.Skip("set VERA_TEST_OLLAMA_BIN to a real ollama binary to run this test (only its CLI is used: no server, no model). " +
			"To build one: git clone --depth 1 --branch v0.24.0 https://github.com/ollama/ollama && cd ollama && " +
			`go build -ldflags "-X github.com/ollama/ollama/version.Version=0.24.0" -o /tmp/realollama/ollama . ` +
			"then VERA_TEST_OLLAMA_BIN=/tmp/realollama/ollama go test -run TestRealCLI -v .")
	}
	info, err := os.Stat(bin)
	require.NoError(t, err, "VERA_TEST_OLLAMA_BIN")
	require.False(t, info.IsDir(), "VERA_TEST_OLLAMA_BIN is a directory: %s", bin)
	return bin
}

// ollamaCLI runs the ollama CLI against host (OLLAMA_HOST) with its own
// HOME and no other OLLAMA_ variable, stdin empty, and returns its stdout
// and stderr together and how it exited.
func ollamaCLI(t *testing.T, bin, host string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	env := []string{"OLLAMA_HOST=" + host, "HOME=" + t.TempDir(), "NO_COLOR=1"}
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); !strings.HasPrefix(k, "OLLAMA_") && k != "HOME" {
			env = append(env, kv)
		}
	}
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	require.NoError(t, ctx.Err(), "ollama %s did not finish:\n%s", strings.Join(args, " "), out)
	t.Logf("OLLAMA_HOST=%s ollama %s\n%s", host, strings.Join(args, " "), out)
	return string(out), err
}

// bodilessHeartbeat stands in front of vera and answers the CLI's
// heartbeat (HEAD /) as vera did before the fix: 502 with no body. The
// rest goes on to vera.
func bodilessHeartbeat(t *testing.T, veraAddr string) string {
	t.Helper()
	target := veratest.MustParse(t, "http://"+veraAddr)
	rp := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(target) }}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodHead && r.URL.Path == "/" {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// With Ollama down, the real ollama CLI pointed at vera prints vera's
// reason ("ollama unreachable at ...") for each command that needs Ollama,
// not the "something went wrong" it prints for a failed heartbeat. The
// heartbeat (HEAD /) passes while vera runs; the command's own call gets
// vera's 502 with its JSON error, which the CLI prints as "Error: <reason>".
//
// Each command is also run with vera's heartbeat answered by a bodiless
// 502, as before the fix: the CLI then stops at the heartbeat and prints
// "something went wrong", which shows that the assertions above tell the
// two apart with this very binary (a later CLI that no longer stops on the
// heartbeat fails that half, and the test no longer guards the fix).
func TestRealCLIShowsWhyOllamaIsUnreachable(t *testing.T) {
	bin := realOllamaCLI(t)
	dead := "http://" + ollamatest.DeadAddr(t)
	p := veratest.Start(t, "VERA_OLLAMA_URL="+dead)
	before := bodilessHeartbeat(t, p.Addr)

	tests := []struct {
		name string
		args []string
	}{
		{"list", []string{"list"}},                           // GET /api/tags
		{"ps", []string{"ps"}},                               // GET /api/ps
		{"show", []string{"show", "tiny"}},                   // POST /api/show
		{"run with a prompt", []string{"run", "tiny", "hi"}}, // POST /api/show, which fails before any chat
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := ollamaCLI(t, bin, "http://"+p.Addr, tt.args...)
			var exit *exec.ExitError
			require.ErrorAs(t, err, &exit, "the command fails:\n%s", out)
			assert.Equal(t, 1, exit.ExitCode())
			assert.Contains(t, out, "Error: ollama unreachable at "+dead)
			assert.Contains(t, out, "connection refused")
			assert.NotContains(t, out, "something went wrong")
		})
		t.Run(tt.name+" with a bodiless 502 heartbeat", func(t *testing.T) {
			out, err := ollamaCLI(t, bin, before, tt.args...)
			var exit *exec.ExitError
			require.ErrorAs(t, err, &exit, "the command fails:\n%s", out)
			assert.Contains(t, out, "something went wrong")
			assert.NotContains(t, out, "ollama unreachable")
		})
	}
}
