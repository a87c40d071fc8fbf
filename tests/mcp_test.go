package tests

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/memory/embedded"
	"github.com/vera-proxy/vera/ollama/ollamatest"
)

// stdioMCP starts `vera mcp ARGS` and connects the official Go SDK's
// client to it over stdio.
func stdioMCP(t *testing.T, env []string, args ...string) *sdk.ClientSession {
	t.Helper()
	trackSources()
	cmd := exec.Command(veraBin, append([]string{"mcp"}, args...)...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	s, err := sdk.NewClient(&sdk.Implementation{Name: "vera-test", Version: "1"}, nil).Connect(context.Background(), &sdk.CommandTransport{Command: cmd}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

func stdioCall(t *testing.T, s *sdk.ClientSession, tool string, args map[string]any, out any) {
	t.Helper()
	res, err := s.CallTool(context.Background(), &sdk.CallToolParams{Name: tool, Arguments: args})
	require.NoError(t, err)
	var text strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			text.WriteString(tc.Text)
		}
	}
	require.False(t, res.IsError, text.String())
	if out != nil {
		b, _ := json.Marshal(res.StructuredContent)
		require.NoError(t, json.Unmarshal(b, out))
	}
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

// `vera mcp` over stdio: with no vera running it works on the embedded
// store, opened for each call, so `vera serve` starts while it runs; with
// vera running it bridges to its /mcp, as its namespace.
func TestMCPOverStdio(t *testing.T) {
	up := ollamatest.New(t)
	data := t.TempDir()
	env := []string{"VERA_OLLAMA_URL=" + up.URL, "VERA_DATA_DIR=" + data, "VERA_CONFIG_DIR=" + t.TempDir(), "VERA_LISTEN=" + freeAddr(t)}

	// No vera and no store: vera mcp makes none (an agent may start it
	// in any directory), and says what to do.
	trackSources()
	cmd := exec.Command(veraBin, "mcp", "--namespace", "alice")
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
	stdioCall(t, offline, "add_memory", map[string]any{"content": "Alice's dog is called Biscuit."}, &added)
	require.NotEmpty(t, added.ID)

	// vera serve starts on the same data dir while vera mcp runs.
	p := startVera(t, env...) // at the address vera mcp knows
	chat(t, p, "alice", false, user("What is my dog called?"))
	assert.Contains(t, systemOf(up.LastChat(t)), "Biscuit", "written by vera mcp, recalled by vera")

	// With vera running, vera mcp goes through its /mcp.
	online := stdioMCP(t, env[:3:3], "--url", "http://"+p.addr, "--namespace", "bob")
	stdioCall(t, online, "add_memory", map[string]any{"content": "Bob rides a red bike."}, nil)
	chat(t, p, "bob", false, user("What colour is my bike?"))
	assert.Contains(t, systemOf(up.LastChat(t)), "red bike")
	chat(t, p, "alice", false, user("What colour is my bike?"))
	assert.NotContains(t, systemOf(up.LastChat(t)), "red bike", "namespaces never cross")
	var found struct{ Memories []struct{ Text string } }
	stdioCall(t, online, "search_memories", map[string]any{"query": "bike"}, &found)
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
	conf := configDir(t, "[server]\ntrust_loopback = false\n")
	p := startVera(t, "VERA_OLLAMA_URL="+up.URL, conf, "VERA_API_KEYS=k-one")
	base := []string{"VERA_OLLAMA_URL=" + up.URL, conf}
	s := stdioMCP(t, append(base, "VERA_API_KEY=k-one"), "--url", "http://"+p.addr, "--namespace", "carol")
	stdioCall(t, s, "add_memory", map[string]any{"content": "Carol sings in a choir."}, nil)

	trackSources()
	cmd := exec.Command(veraBin, "mcp", "--url", "http://"+p.addr, "--namespace", "carol")
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, base...)
	_, err := sdk.NewClient(&sdk.Implementation{Name: "t", Version: "1"}, nil).Connect(context.Background(), &sdk.CommandTransport{Command: cmd}, nil)
	assert.Error(t, err, "no key: vera mcp stops")
}
