// Package tests holds vera's end-to-end tests that need the built binary:
// signals and graceful shutdown, exit codes and usage, `vera check`, kill -9,
// process restarts against the Qdrant stand-in, `vera curate` as a command
// and a peak-RSS check. Each starts the binary on 127.0.0.1:0 against a fake
// Ollama (ollama/ollamatest). The end-to-end tests that need no separate
// process run vera in-process through run, in package main (e2e_*_test.go).
package tests

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ollama/ollama/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/admin"
	"github.com/vera-proxy/vera/memory/embedded"
	"github.com/vera-proxy/vera/ollama/ollamatest"
)

// veraBin is the binary under test, built once by TestMain.
var veraBin string

var tracked sync.Once

// trackSources reads every Go source of the binary while the tests run, so
// that go test's cache, which records the files a test opens, runs these
// tests again when vera's code changes (TestMain's go build is invisible
// to it).
func trackSources() {
	tracked.Do(func() {
		_ = filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			if d.IsDir() && (d.Name() == "tests" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != ".." {
				return filepath.SkipDir
			}
			if !d.IsDir() && (strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") || d.Name() == "go.mod" || d.Name() == "go.sum") {
				_, _ = os.ReadFile(path)
			}
			return nil
		})
	})
}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "vera-e2e")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	veraBin = filepath.Join(dir, "vera")
	args := []string{"build", "-o", veraBin}
	if raceEnabled {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, "..")...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building vera:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// proc is a running vera.
type proc struct {
	cmd    *exec.Cmd
	addr   string
	mu     sync.Mutex
	stderr strings.Builder
	exited chan error
}

func (p *proc) logs() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

var listenRe = regexp.MustCompile(`msg=listening addr=(\S+)`)

// startVera runs `vera serve` with env (plus a private config dir and
// VERA_LISTEN=127.0.0.1:0) and waits until it listens.
func startVera(t *testing.T, env ...string) *proc {
	t.Helper()
	return launchVera(t, false, env...)
}

// launchVera is startVera, returning as soon as vera listens when noWait
// is set: its store may still be loading.
func launchVera(t *testing.T, noWait bool, env ...string) *proc {
	t.Helper()
	trackSources()
	cmd := exec.Command(veraBin, "serve")
	cmd.Env = append([]string{
		"PATH=" + os.Getenv("PATH"),
		"VERA_CONFIG_DIR=" + t.TempDir(),
		"VERA_DATA_DIR=" + t.TempDir(),
		"VERA_LISTEN=127.0.0.1:0",
	}, env...)
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	p := &proc{cmd: cmd, exited: make(chan error, 1)}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			p.stderr.WriteString(line + "\n")
			p.mu.Unlock()
			if m := listenRe.FindStringSubmatch(line); m != nil {
				addr <- m[1]
			}
		}
		p.exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		if t.Failed() {
			t.Logf("vera's log:\n%s", p.logs())
		}
	})
	select {
	case p.addr = <-addr:
	case err := <-p.exited:
		t.Fatalf("vera exited before listening: %v\n%s", err, p.logs())
	case <-time.After(30 * time.Second):
		t.Fatalf("vera did not start:\n%s", p.logs())
	}
	if !noWait {
		// vera listens at once; its store's index loads after.
		require.Eventually(t, func() bool {
			var h admin.Health
			return admin.GetJSON(context.Background(), http.DefaultClient, "http://"+p.addr+"/healthz", &h) == nil && h.Status != "loading"
		}, 60*time.Second, 5*time.Millisecond, "vera's store did not load:\n%s", p.logs())
	}
	return p
}

func (p *proc) client(t *testing.T) *api.Client {
	u, err := url.Parse("http://" + p.addr)
	require.NoError(t, err)
	return api.NewClient(u, &http.Client{Transport: &http.Transport{}})
}

func TestServeChatAndGracefulShutdown(t *testing.T) {
	up := ollamatest.New(t)
	up.Gate = make(chan struct{})
	p := startVera(t, "VERA_OLLAMA_URL="+up.URL)
	client := p.client(t)

	// A chat is held open upstream while vera is told to stop.
	var got strings.Builder
	chatErr := make(chan error, 1)
	done := false
	go func() {
		chatErr <- client.Chat(context.Background(), &api.ChatRequest{Model: "llama3.2",
			Messages: []api.Message{{Role: "user", Content: "hi"}}},
			func(r api.ChatResponse) error { got.WriteString(r.Message.Content); done = r.Done; return nil })
	}()
	select {
	case <-up.Started:
	case <-time.After(10 * time.Second):
		t.Fatal("the chat never reached the upstream")
	}
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	require.Eventually(t, func() bool { return strings.Contains(p.logs(), "shutting down") }, 10*time.Second, 10*time.Millisecond)

	// New connections are refused while the running stream goes on (the
	// log line comes just before the listener closes).
	require.Eventually(t, func() bool {
		res, err := http.Get("http://" + p.addr + "/healthz")
		if err == nil {
			res.Body.Close()
		}
		return err != nil
	}, 10*time.Second, 10*time.Millisecond, "vera stopped accepting")

	close(up.Gate)
	select {
	case err := <-chatErr:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("the running chat did not finish")
	}
	assert.Equal(t, "Hello from Ollama", got.String())
	assert.True(t, done, "the stream ended with done:true")

	select {
	case err := <-p.exited:
		require.NoError(t, err, "vera exits 0 after a graceful shutdown")
	case <-time.After(10 * time.Second):
		t.Fatal("vera did not exit")
	}
	logs := p.logs()
	assert.Contains(t, logs, "msg=request method=POST path=/api/chat status=200")
	assert.Regexp(t, `request_id=[0-9a-f]{16}`, logs)
	assert.Contains(t, logs, "msg=stopped")
}

func TestHealthzThroughBinary(t *testing.T) {
	up := ollamatest.New(t)
	p := startVera(t, "VERA_OLLAMA_URL="+up.URL)
	var h struct {
		Status  string `json:"status"`
		Version string `json:"version"`
		Ollama  struct {
			OK      bool   `json:"ok"`
			Version string `json:"version"`
		} `json:"ollama"`
		Store struct {
			OK      bool   `json:"ok"`
			Backend string `json:"backend"`
		} `json:"store"`
		Embedder struct {
			OK    bool   `json:"ok"`
			Model string `json:"model"`
			Dim   int    `json:"dim"`
		} `json:"embedder"`
	}
	// The embedder is probed in the background after start.
	require.Eventually(t, func() bool {
		res, err := http.Get("http://" + p.addr + "/healthz")
		require.NoError(t, err)
		defer res.Body.Close()
		require.Equal(t, http.StatusOK, res.StatusCode)
		require.NoError(t, json.NewDecoder(res.Body).Decode(&h))
		return h.Status == "ok"
	}, 10*time.Second, 20*time.Millisecond)
	assert.True(t, h.Store.OK)
	assert.Equal(t, "embedded", h.Store.Backend)
	assert.True(t, h.Embedder.OK)
	assert.Equal(t, "nomic-embed-text", h.Embedder.Model)
	assert.Equal(t, 256, h.Embedder.Dim, "probed from the model")
	assert.NotEmpty(t, h.Version)
	assert.True(t, h.Ollama.OK)
	assert.Equal(t, "0.12.3", h.Ollama.Version)

	// The container health check command reaches the same endpoint.
	code, out, _ := runVera(t, []string{"VERA_LISTEN=0.0.0.0:" + p.addr[strings.LastIndex(p.addr, ":")+1:]}, "healthcheck")
	assert.Equal(t, 0, code)
	assert.Contains(t, out, `"status":"ok"`)
	up.Close()
	p.cmd.Process.Kill()
	<-p.exited
	code, _, _ = runVera(t, []string{"VERA_LISTEN=" + p.addr}, "healthcheck")
	assert.Equal(t, 1, code, "nothing listens any more")
}

func TestVersionPassesThrough(t *testing.T) {
	up := ollamatest.New(t)
	p := startVera(t, "VERA_OLLAMA_URL="+up.URL)
	v, err := p.client(t).Version(context.Background())
	require.NoError(t, err)
	assert.Equal(t, "0.12.3", v, "/api/version is Ollama's, passed through")
}

// runVera runs a one-shot vera command and returns its exit code and output.
func runVera(t *testing.T, env []string, args ...string) (int, string, string) {
	trackSources()
	t.Helper()
	cmd := exec.Command(veraBin, args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "VERA_CONFIG_DIR=" + t.TempDir()}, env...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return code, stdout.String(), stderr.String()
}

func TestCommandLine(t *testing.T) {
	code, out, _ := runVera(t, nil, "--version")
	assert.Equal(t, 0, code)
	assert.Regexp(t, `^vera \S+\n$`, out)

	code, out, _ = runVera(t, nil, "help")
	assert.Equal(t, 0, code)
	assert.Contains(t, out, "vera check")

	code, _, errOut := runVera(t, nil, "frobnicate")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, `unknown command "frobnicate"`)
	assert.Contains(t, errOut, "Usage:")

	code, _, errOut = runVera(t, nil, "serve", "--no-such-flag")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "no-such-flag")

	// A config error names the key and line, and vera does not start.
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.toml"), []byte("[general]\n\nollama_hots = \"x\"\n"), 0o600))
	code, _, errOut = runVera(t, []string{"VERA_CONFIG_DIR=" + dir}, "serve")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, `unknown key "general.ollama_hots" at line 3`)
}

func TestCheck(t *testing.T) {
	up := ollamatest.New(t)
	data := t.TempDir()
	// The fake has llama3.2 for the curator; a free port to listen on (a
	// real Ollama or vera may hold 11434 on the machine running the tests).
	env := []string{"VERA_OLLAMA_URL=" + up.URL, "VERA_DATA_DIR=" + data, "VERA_LISTEN=127.0.0.1:0",
		configDir(t, "[curator]\ncurator_model = \"llama3.2\"\n")}
	code, out, _ := runVera(t, env, "check")
	assert.Equal(t, 0, code, out)
	assert.Contains(t, out, "ok   ollama: "+up.URL+", version 0.12.3")
	assert.Contains(t, out, "llama3.2:latest, nomic-embed-text:latest")
	assert.Contains(t, out, "ok   store: embedded, "+filepath.Join(data, "vera.db")+" (new: created when vera starts)")
	assert.NoFileExists(t, filepath.Join(data, "vera.db"), "a check changes nothing")
	assert.Contains(t, out, "ok   embedder: nomic-embed-text, 256 dimensions")

	// With a store: what it holds; while vera runs: that it is in use.
	p := startVera(t, env...)
	chat(t, p, "alice", false, user("remember me"))
	code, out, _ = runVera(t, env, "check")
	assert.Equal(t, 0, code, out)
	assert.Contains(t, out, "(open in a running vera)")
	stop(t, p)
	code, out, _ = runVera(t, env, "check")
	assert.Equal(t, 0, code, out)
	assert.Regexp(t, `ok   store: embedded, .*vera.db \(1 memories in 1 namespaces, 0 turns queued\)`, out)

	// The embedding model missing: a failure that says what to do.
	up.EmbedDown.Store(true)
	code, out, _ = runVera(t, env, "check")
	assert.Equal(t, 1, code, out)
	assert.Contains(t, out, "FAIL embedder:")
	assert.Contains(t, out, "ollama pull nomic-embed-text")
	up.EmbedDown.Store(false)

	off := filepath.Join(t.TempDir(), "config.toml")
	require.NoError(t, os.WriteFile(off, []byte("[memory]\nenabled = false\n"), 0o600))
	code, out, _ = runVera(t, env, "check", "--config", off)
	assert.Equal(t, 0, code, out)
	assert.Contains(t, out, "ok   memory: off")

	up.Close()
	code, out, _ = runVera(t, []string{"VERA_OLLAMA_URL=" + up.URL}, "check")
	assert.Equal(t, 1, code)
	assert.Contains(t, out, "FAIL ollama: "+up.URL+" unreachable")

	code, out, _ = runVera(t, []string{"VERA_LISTEN=nonsense"}, "check")
	assert.Equal(t, 1, code)
	assert.Contains(t, out, "FAIL config: server.listen")
}

// headerTransport, chat, user, systemOf and recallsEventually are
// ollamatest's client helpers, on this file's vera.
type headerTransport = ollamatest.HeaderTransport

func chat(t *testing.T, p *proc, ns string, off bool, msgs ...api.Message) string {
	t.Helper()
	return ollamatest.Chat(t, p.addr, ns, off, msgs...)
}

func user(s string) api.Message { return ollamatest.User(s) }

func systemOf(r api.ChatRequest) string { return ollamatest.SystemOf(r) }

func recallsEventually(t *testing.T, p *proc, up *ollamatest.Server, ns, question, want string) {
	t.Helper()
	up.RecallsEventually(t, p.addr, ns, question, want)
}

// stop ends vera with SIGTERM, as systemd or docker would.
func stop(t *testing.T, p *proc) {
	t.Helper()
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-p.exited:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("vera did not stop")
	}
}

func openStore(t *testing.T, dir string) *embedded.DB {
	t.Helper()
	db, err := embedded.Open(context.Background(), dir)
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	return db
}
