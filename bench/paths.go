package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/vera-proxy/vera/admin"
)

// serve serves h on a loopback port until ctx ends; it returns the base
// URL.
func serve(ctx context.Context, h http.Handler) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	go func() { <-ctx.Done(); srv.Close() }()
	return "http://" + ln.Addr().String(), nil
}

// bareProxy is the baseline: Go's httputil.ReverseProxy in front of
// upstream, flushing every write, as a proxy that does nothing else.
func bareProxy(ctx context.Context, upstream string) (string, error) {
	u, err := url.Parse(upstream)
	if err != nil {
		return "", err
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.FlushInterval = -1
	return serve(ctx, rp)
}

// buildVera builds the binary under test into dir.
func buildVera(dir string) (string, error) {
	bin := filepath.Join(dir, "vera")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("building vera: %w", err)
	}
	return bin, nil
}

var listening = regexp.MustCompile(`msg=listening addr=(\S+)`)

// veraProc is a running vera.
type veraProc struct {
	cmd     *exec.Cmd
	base    string
	startup time.Duration // from exec to listening
	started time.Time
	done    chan struct{}
}

// ready waits until vera's store has loaded its index (/healthz no longer
// says loading: chats get memory), and returns the time since exec.
func (p *veraProc) ready() (time.Duration, error) {
	deadline := time.Now().Add(10 * time.Minute)
	for time.Now().Before(deadline) {
		var h struct{ Status string }
		if err := admin.GetJSON(context.Background(), client, p.base+"/healthz", &h); err == nil && h.Status != "loading" {
			return time.Since(p.started), nil
		}
		select {
		case <-p.done:
			return 0, fmt.Errorf("vera exited while loading")
		case <-time.After(5 * time.Millisecond):
		}
	}
	return 0, fmt.Errorf("vera's store did not load in 10 minutes")
}

// startVera runs `vera serve` against upstream with its data in dataDir and
// waits until it listens. Its log goes to a file (dataDir/vera.log), as to
// a service manager's journal: a pipe read by the harness would wake the
// harness, which is also the client being timed, at every request line.
func startVera(bin, upstream, dataDir string, env ...string) (*veraProc, error) {
	cmd := exec.Command(bin, "serve")
	cmd.Env = append(os.Environ(), "VERA_LISTEN=127.0.0.1:0", "VERA_OLLAMA_URL="+upstream, "VERA_DATA_DIR="+dataDir,
		"VERA_CONFIG_DIR="+dataDir, "VERA_PROMPTS_DIR="+filepath.Join(dataDir, "prompts"), "VERA_LOG_DIR="+filepath.Join(dataDir, "logs"))
	cmd.Env = append(cmd.Env, env...)
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return nil, err
	}
	logPath := filepath.Join(dataDir, "vera.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logFile.Close() // the child has its own descriptor
	cmd.Stderr = logFile
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &veraProc{cmd: cmd, started: start, done: make(chan struct{})}
	go func() { cmd.Wait(); close(p.done) }()
	deadline := time.After(5 * time.Minute)
	for {
		b, _ := os.ReadFile(logPath)
		if m := listening.FindSubmatch(b); m != nil {
			p.base, p.startup = "http://"+string(m[1]), time.Since(start)
			return p, nil
		}
		select {
		case <-p.done:
			return nil, fmt.Errorf("vera exited before listening: %s", lastLines(b, 5))
		case <-deadline:
			cmd.Process.Kill()
			return nil, fmt.Errorf("vera did not start within 5 minutes")
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// lastLines returns the last n lines of a log.
func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// stop ends vera the way a service manager does, and waits.
func (p *veraProc) stop() {
	p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
	}
}

// rssMB is the process's resident set (VmRSS), in MiB; 0 where /proc is
// not there.
func (p *veraProc) rssMB() float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	return 0
}
