package process

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vera-proxy/vera/memory/embedded"
	"github.com/vera-proxy/vera/tests/veratest"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/ollama/ollamatest"
)

// stdioMCP starts `vera mcp ARGS` and connects the official Go SDK's
// client to it over stdio.
func stdioMCP(t *testing.T, env []string, args ...string) *sdk.ClientSession {
	t.Helper()
	cmd := veratest.Command(t, append([]string{"mcp"}, args...)...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	s, err := sdk.NewClient(&sdk.Implementation{Name: "vera-test", Version: "1"}, nil).Connect(context.Background(), &sdk.CommandTransport{Command: cmd}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

// freeAddr is a loopback address nothing listens on now, for a vera
// started later to listen on.
func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// `vera mcp --url` follows no redirect: its API key is added inside the
// transport, where net/http's rule of dropping credentials on a redirect
// to another host never applies, so a server at --url that answered 307
// to another host used to get VERA_API_KEY sent there. Now the other host
// hears nothing, and vera mcp says which server redirected where: at the
// start (the health probe or the first request to /mcp) or at a tool call.
func TestMCPBridgeFollowsNoRedirect(t *testing.T) {
	up := ollamatest.New(t)
	p := veratest.Start(t, "VERA_OLLAMA_URL="+up.URL, "VERA_API_KEYS=k-one", "VERA_CONFIG_DIR="+veratest.WriteConfig(t, "[server]\ntrust_loopback = false\n"))
	vera := httputil.NewSingleHostReverseProxy(veratest.MustParse(t, "http://"+p.Addr))

	tests := []struct {
		name string
		// redirect tells whether the front answers this request with a
		// 307 to the other host; otherwise it passes it on to vera.
		redirect func(r *http.Request, body []byte) bool
		atStart  bool // vera mcp fails at once; else the tool call fails
	}{
		{"every request", func(*http.Request, []byte) bool { return true }, true},
		{"/mcp", func(r *http.Request, _ []byte) bool { return r.URL.Path == "/mcp" }, true},
		{"a tool call", func(_ *http.Request, body []byte) bool { return bytes.Contains(body, []byte(`"tools/call"`)) }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var heard atomic.Int64
			var creds sync.Map
			elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				heard.Add(1)
				for _, h := range []string{"Authorization", "X-Api-Key"} {
					if v := r.Header.Get(h); v != "" {
						creds.Store(h, v)
					}
				}
				w.WriteHeader(http.StatusTeapot)
			}))
			defer elsewhere.Close()
			front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				r.Body = io.NopCloser(bytes.NewReader(body))
				if tt.redirect(r, body) {
					http.Redirect(w, r, elsewhere.URL+r.URL.Path, http.StatusTemporaryRedirect)
					return
				}
				vera.ServeHTTP(w, r)
			}))
			defer front.Close()

			// vera mcp, the built binary, over its stdin and stdout.
			cmd := veratest.Command(t, "mcp", "--url", front.URL, "--namespace", "alice")
			cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "VERA_CONFIG_DIR=" + t.TempDir(), "VERA_API_KEY=k-one"}
			var stderr veratest.SyncBuffer
			cmd.Stderr = &stderr
			stdin, err := cmd.StdinPipe()
			require.NoError(t, err)
			stdout, err := cmd.StdoutPipe()
			require.NoError(t, err)
			require.NoError(t, cmd.Start())
			t.Cleanup(func() { _ = cmd.Process.Kill() })
			// exited waits for vera mcp to end, once its output is read.
			exited := func() error {
				done := make(chan error, 1)
				go func() { done <- cmd.Wait() }()
				select {
				case err := <-done:
					return err
				case <-time.After(30 * time.Second):
					t.Fatalf("vera mcp did not exit:\n%s", stderr.String())
					return nil
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			s, err := sdk.NewClient(&sdk.Implementation{Name: "agent", Version: "1"}, nil).Connect(ctx, &sdk.IOTransport{Reader: stdout, Writer: stdin}, nil)
			if tt.atStart {
				require.Error(t, err, "vera mcp does not start")
				require.Error(t, exited(), "vera mcp fails")
				t.Logf("vera mcp: %s", stderr.String())
				assert.Contains(t, stderr.String(), "redirected to "+elsewhere.URL)
				assert.Contains(t, stderr.String(), "follows no redirect")
			} else {
				require.NoError(t, err, stderr.String())
				res, err := s.CallTool(ctx, &sdk.CallToolParams{Name: "add_memory", Arguments: map[string]any{"content": "Alice plays the cello."}})
				if err == nil {
					require.True(t, res.IsError, "the call fails")
					err = errors.New(veratest.ToolText(res))
				}
				t.Logf("the call: %v", err)
				assert.Contains(t, err.Error(), "redirected to "+elsewhere.URL)
				s.Close() // vera mcp's stdin ends: it exits
				exited()
			}
			assert.Zero(t, heard.Load(), "the other host hears nothing")
			creds.Range(func(k, v any) bool {
				t.Errorf("the other host got %s: %s", k, v)
				return true
			})
		})
	}
}

// `vera mcp` over stdio: with no vera running it works on the embedded
// store, opened for each call, so `vera serve` starts while it runs; with
// vera running it bridges to its /mcp, as its namespace.
func TestMCPOverStdio(t *testing.T) {
	up := ollamatest.New(t)
	data := t.TempDir()
	env := []string{"VERA_OLLAMA_URL=" + up.URL, "VERA_DATA_DIR=" + data, "VERA_CONFIG_DIR=" + t.TempDir(), "VERA_LISTEN=" + freeAddr(t)}

	// No vera and no store: vera mcp makes none (an agent may start it
	// in any directory), and says what to do.
	cmd := veratest.Command(t, "mcp", "--namespace", "alice")
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	out, err := cmd.CombinedOutput()
	assert.Error(t, err)
	assert.Contains(t, string(out), "no store at "+filepath.Join(data, "vera.db"))
	assert.Contains(t, string(out), "VERA_DATA_DIR")
	assert.NoFileExists(t, filepath.Join(data, "vera.db"))

	db, err := embedded.Open(context.Background(), data) // a vera ran here once
	require.NoError(t, err)
	require.NoError(t, db.Close())
	offline := stdioMCP(t, env, "--namespace", "alice")
	tools, err := offline.ListTools(context.Background(), nil)
	require.NoError(t, err)
	assert.Len(t, tools.Tools, 5)
	var added struct{ ID string }
	veratest.CallOK(t, offline, "add_memory", map[string]any{"content": "Alice's dog is called Biscuit."}, &added)
	require.NotEmpty(t, added.ID)

	// vera serve starts on the same data dir while vera mcp runs.
	p := veratest.Launch(t, env...) // at the address vera mcp knows
	veratest.Chat(t, p, "alice", false, veratest.User("What is my dog called?"))
	assert.Contains(t, veratest.SystemOf(up.LastChat(t)), "Biscuit", "written by vera mcp, recalled by vera")

	// With vera running, vera mcp goes through its /mcp.
	online := stdioMCP(t, env[:3:3], "--url", "http://"+p.Addr, "--namespace", "bob")
	veratest.CallOK(t, online, "add_memory", map[string]any{"content": "Bob rides a red bike."}, nil)
	veratest.Chat(t, p, "bob", false, veratest.User("What colour is my bike?"))
	assert.Contains(t, veratest.SystemOf(up.LastChat(t)), "red bike")
	veratest.Chat(t, p, "alice", false, veratest.User("What colour is my bike?"))
	assert.NotContains(t, veratest.SystemOf(up.LastChat(t)), "red bike", "namespaces never cross")
	var found struct{ Memories []struct{ Text string } }
	veratest.CallOK(t, online, "search_memories", map[string]any{"query": "bike"}, &found)
	require.NotEmpty(t, found.Memories)
	assert.Contains(t, found.Memories[0].Text, "red bike")

	// Bad arguments, on both backends: tool errors naming the argument.
	// The offline server, started before vera, now goes through it.
	for _, s := range []*sdk.ClientSession{offline, online} {
		for tool, args := range map[string]map[string]any{
			"search_memories": {"query": "x", "limit": 0.5},
			"add_memory":      {"content": " "},
			"update_memory":   {"id": "nope", "content": "x"},
			"forget_memory":   {"id": ""},
			"list_memories":   {"since": "last week"},
		} {
			res, err := s.CallTool(context.Background(), &sdk.CallToolParams{Name: tool, Arguments: args})
			if err != nil {
				// The SDK's own schema check refuses it before the tool.
				assert.Contains(t, err.Error(), "limit", tool)
				continue
			}
			require.True(t, res.IsError, "%s %v", tool, args)
			text := res.Content[0].(*sdk.TextContent).Text
			assert.Regexp(t, `limit|"content"|"id"|"since"`, text, tool)
		}
	}
}

// `vera mcp` bridged to a vera that needs a key: it sends VERA_API_KEY;
// without one it cannot connect, and says why.
func TestMCPOverStdioWithAKey(t *testing.T) {
	up := ollamatest.New(t)
	conf := veratest.ConfigDir(t, "[server]\ntrust_loopback = false\n")
	p := veratest.Launch(t, "VERA_OLLAMA_URL="+up.URL, conf, "VERA_API_KEYS=k-one")
	base := []string{"VERA_OLLAMA_URL=" + up.URL, conf}
	s := stdioMCP(t, append(base, "VERA_API_KEY=k-one"), "--url", "http://"+p.Addr, "--namespace", "carol")
	veratest.CallOK(t, s, "add_memory", map[string]any{"content": "Carol sings in a choir."}, nil)

	cmd := veratest.Command(t, "mcp", "--url", "http://"+p.Addr, "--namespace", "carol")
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, base...)
	_, err := sdk.NewClient(&sdk.Implementation{Name: "t", Version: "1"}, nil).Connect(context.Background(), &sdk.CommandTransport{Command: cmd}, nil)
	assert.Error(t, err, "no key: vera mcp stops")
}
