package veratest

import (
	"bufio"
	"errors"
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
	"github.com/stretchr/testify/require"
)

// binary is the vera under test, built once, from the module's root.
var binary struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// Main runs a package's tests (from its TestMain): it builds the binary
// first, so that the build does not count against the tests' timeout,
// and removes it after.
func Main(m *testing.M) {
	binary.once.Do(build)
	if binary.err != nil {
		fmt.Fprintln(os.Stderr, "building vera:", binary.err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(binary.dir)
	os.Exit(code)
}

// Command is the built vera, to run with args.
func Command(t testing.TB, args ...string) *exec.Cmd {
	t.Helper()
	binary.once.Do(build)
	if binary.err != nil {
		t.Fatalf("building vera: %v", binary.err)
	}
	trackSources()
	return exec.Command(binary.path, args...)
}

// build builds vera, with the race detector when the tests themselves run
// with it.
func build() {
	root, err := moduleRoot()
	if err != nil {
		binary.err = err
		return
	}
	if binary.dir, binary.err = os.MkdirTemp("", "vera-e2e"); binary.err != nil {
		return
	}
	binary.path = filepath.Join(binary.dir, "vera")
	args := []string{"build", "-o", binary.path}
	if Race {
		args = append(args, "-race")
	}
	cmd := exec.Command("go", append(args, ".")...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		binary.err = fmt.Errorf("%w\n%s", err, out)
	}
}

// moduleRoot is the directory of vera's go.mod, above the test's.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above " + dir)
		}
		dir = parent
	}
}

var tracked sync.Once

// trackSources reads every Go source of the binary while the tests run, so
// that go test's cache, which records the files a test opens, runs these
// tests again when vera's code changes (the go build of the binary is
// invisible to it).
func trackSources() {
	tracked.Do(func() {
		root, err := moduleRoot()
		if err != nil {
			return
		}
		_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			if d.IsDir() && (d.Name() == "tests" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != root {
				return filepath.SkipDir
			}
			if !d.IsDir() && (strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") || d.Name() == "go.mod" || d.Name() == "go.sum") {
				_, _ = os.ReadFile(path)
			}
			return nil
		})
	})
}

// Proc is a vera running as the built binary.
type Proc struct {
	Cmd    *exec.Cmd
	Addr   string     // host:port
	Exited chan error // the process's end, once
	mu     sync.Mutex
	stderr strings.Builder
}

// Address is where vera listens.
func (p *Proc) Address() string { return p.Addr }

// Logs is what vera has logged so far.
func (p *Proc) Logs() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

var listenRe = regexp.MustCompile(`msg=listening addr=(\S+)`)

// Launch runs `vera serve` with env (plus a private config dir and
// VERA_LISTEN=127.0.0.1:0) and waits until it listens and its store has
// loaded. The cleanup kills it.
func Launch(t *testing.T, env ...string) *Proc {
	t.Helper()
	p := LaunchLoading(t, env...)
	WaitLoaded(t, p)
	return p
}

// LaunchLoading is Launch, returning as soon as vera listens: its store
// may still be loading.
func LaunchLoading(t *testing.T, env ...string) *Proc {
	t.Helper()
	cmd := Command(t, "serve")
	cmd.Env = append([]string{
		"PATH=" + os.Getenv("PATH"),
		"VERA_CONFIG_DIR=" + t.TempDir(),
		"VERA_DATA_DIR=" + t.TempDir(),
		"VERA_LISTEN=127.0.0.1:0",
	}, env...)
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	p := &Proc{Cmd: cmd, Exited: make(chan error, 1)}
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
		p.Exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		if t.Failed() {
			t.Logf("vera's log:\n%s", p.Logs())
		}
	})
	select {
	case p.Addr = <-addr:
	case err := <-p.Exited:
		t.Fatalf("vera exited before listening: %v\n%s", err, p.Logs())
	case <-time.After(30 * time.Second):
		t.Fatalf("vera did not start:\n%s", p.Logs())
	}
	return p
}

// Client is the official Ollama client on vera.
func (p *Proc) Client(t *testing.T) *api.Client {
	u, err := url.Parse("http://" + p.Addr)
	require.NoError(t, err)
	return api.NewClient(u, &http.Client{Transport: &http.Transport{}})
}

// Stop ends vera with SIGTERM, as systemd or docker would, and requires
// it to exit 0.
func (p *Proc) Stop(t *testing.T) {
	t.Helper()
	require.NoError(t, p.Cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-p.Exited:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("vera did not stop")
	}
}

// RunCommand runs a one-shot vera command with env (after PATH and a
// private config dir) and returns its exit code and output.
func RunCommand(t *testing.T, env []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := Command(t, args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "VERA_CONFIG_DIR=" + t.TempDir()}, env...)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return code, out.String(), errOut.String()
}
