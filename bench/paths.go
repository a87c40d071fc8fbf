package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
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
	done    chan struct{}
}

// startVera runs `vera serve` against upstream with its data in dataDir and
// waits until it listens.
func startVera(bin, upstream, dataDir string, env ...string) (*veraProc, error) {
	cmd := exec.Command(bin, "serve")
	cmd.Env = append(os.Environ(), "VERA_LISTEN=127.0.0.1:0", "VERA_OLLAMA_URL="+upstream, "VERA_DATA_DIR="+dataDir,
		"VERA_CONFIG_DIR="+dataDir, "VERA_PROMPTS_DIR="+filepath.Join(dataDir, "prompts"), "VERA_LOG_DIR="+filepath.Join(dataDir, "logs"))
	cmd.Env = append(cmd.Env, env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &veraProc{cmd: cmd, done: make(chan struct{})}
	addr := make(chan string, 1)
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			if m := listening.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case addr <- m[1]:
				default:
				}
			}
		}
		io.Copy(io.Discard, stderr)
	}()
	select {
	case a := <-addr:
		p.base, p.startup = "http://"+a, time.Since(start)
		return p, nil
	case <-p.done:
		cmd.Wait()
		return nil, fmt.Errorf("vera exited before listening")
	case <-time.After(2 * time.Minute):
		cmd.Process.Kill()
		return nil, fmt.Errorf("vera did not start within 2 minutes")
	}
}

// stop ends vera the way a service manager does, and waits.
func (p *veraProc) stop() {
	p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		p.cmd.Process.Kill()
	}
	p.cmd.Wait()
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
