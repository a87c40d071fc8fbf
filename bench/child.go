package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/vera-proxy/vera/memory/qdrant/qdranttest"
)

// The fake Ollama and the bare proxy run as processes of their own, as
// Ollama and a proxy in front of it would: were they goroutines of the
// harness, the paths through them would skip the cross-process wake-ups
// that vera's path pays, and the comparison would not be fair.

// childEnv selects the child's role: "fake" or "bare".
const childEnv = "VERA_BENCH_CHILD"

// runChild serves the role named by the environment and prints its URL on
// stdout; it returns false when the process is not a child.
func runChild() bool {
	role := os.Getenv(childEnv)
	if role == "" {
		return false
	}
	ctx := context.Background()
	var base string
	var err error
	switch role {
	case "fake":
		chunks, _ := strconv.Atoi(os.Getenv("VERA_BENCH_CHUNKS"))
		gap, _ := time.ParseDuration(os.Getenv("VERA_BENCH_GAP"))
		base, err = serve(ctx, &fakeOllama{chunks: chunks, gap: gap})
	case "bare":
		base, err = bareProxy(ctx, os.Getenv("VERA_BENCH_UPSTREAM"))
	case "qdrant":
		var q *qdranttest.Server
		if q, err = qdranttest.Start("127.0.0.1:0"); err == nil {
			base = q.URL()
		}
	default:
		err = fmt.Errorf("unknown role %q", role)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench child:", err)
		os.Exit(1)
	}
	fmt.Println(base)
	io.Copy(io.Discard, os.Stdin) // until the harness goes
	os.Exit(0)
	return true
}

// child is a running child process.
type child struct {
	cmd  *exec.Cmd
	base string
}

// startChild runs this program again in a role, with env.
func startChild(role string, env ...string) (*child, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe)
	cmd.Env = append(append(os.Environ(), childEnv+"="+role), env...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	_ = stdin // closed by stop: the child then exits
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		cmd.Process.Kill()
		return nil, fmt.Errorf("bench child %s: %w", role, err)
	}
	return &child{cmd: cmd, base: strings.TrimSpace(line)}, nil
}

func (c *child) stop() {
	c.cmd.Process.Kill()
	c.cmd.Wait()
}

// fakeChild starts a fake Ollama process.
func fakeChild(chunks int, gap time.Duration) (*child, error) {
	return startChild("fake", "VERA_BENCH_CHUNKS="+strconv.Itoa(chunks), "VERA_BENCH_GAP="+gap.String())
}

// bareChild starts a bare reverse proxy process in front of upstream.
func bareChild(upstream string) (*child, error) {
	return startChild("bare", "VERA_BENCH_UPSTREAM="+upstream)
}
