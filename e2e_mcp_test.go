package main

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/ollama/ollamatest"
)

// mcpSession connects the official Go SDK's client to vera's /mcp, as ns.
func mcpSession(t *testing.T, p *inProcess, h http.Header) *sdk.ClientSession {
	t.Helper()
	c := sdk.NewClient(&sdk.Implementation{Name: "vera-test", Version: "1"}, nil)
	tr := &sdk.StreamableClientTransport{Endpoint: "http://" + p.addr + "/mcp", DisableStandaloneSSE: true, MaxRetries: -1,
		HTTPClient: &http.Client{Transport: headerTransport{Header: h}}}
	s, err := c.Connect(context.Background(), tr, nil)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

// call calls a tool and decodes its structured content into out.
func call(t *testing.T, s *sdk.ClientSession, tool string, args map[string]any, out any) *sdk.CallToolResult {
	t.Helper()
	res, err := s.CallTool(context.Background(), &sdk.CallToolParams{Name: tool, Arguments: args})
	require.NoError(t, err, "a tool's failure is a tool error, never a protocol error")
	if out != nil && !res.IsError {
		b, err := json.Marshal(res.StructuredContent)
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(b, out))
	}
	return res
}

func toolText(res *sdk.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// The MCP tools through the official Go SDK's client over streamable
// HTTP: the tool list, a fact told in a chat found by search_memories,
// add_memory recalled by the next chat of that namespace only,
// update_memory and forget_memory changing what is recalled, and bad
// arguments named in tool errors.
func TestMCPTools(t *testing.T) {
	up := ollamatest.New(t)
	p := runInProcess(t, "VERA_OLLAMA_URL="+up.URL)
	alice := mcpSession(t, p, http.Header{"X-Openwebui-User-Id": {"alice"}})

	tools, err := alice.ListTools(context.Background(), nil)
	require.NoError(t, err)
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
		if tl.Name == "search_memories" {
			b, _ := json.Marshal(tl.InputSchema)
			assert.Contains(t, string(b), `"required":["query"]`, "limit is optional")
		}
		if tl.Name == "list_memories" {
			b, _ := json.Marshal(tl.InputSchema)
			assert.NotContains(t, string(b), `"required"`, "every argument is optional")
		}
	}
	assert.ElementsMatch(t, []string{"search_memories", "add_memory", "update_memory", "forget_memory", "list_memories"}, names)

	// A fact told in a chat is found.
	chat(t, p, "alice", false, user("My sister Ana lives in Lisbon."))
	settled(t, p)
	type found struct {
		Memories []struct {
			ID, Text string
			Score    *float64
		}
	}
	var f found
	res := call(t, alice, "search_memories", map[string]any{"query": "where does my sister live"}, &f)
	require.False(t, res.IsError, toolText(res))
	require.NotEmpty(t, f.Memories)
	assert.Contains(t, f.Memories[0].Text, "Lisbon")
	assert.NotNil(t, f.Memories[0].Score)
	assert.Contains(t, toolText(res), "Lisbon", "the text content holds the same JSON")

	// add_memory: recalled by alice's next chat, never bob's.
	var added struct{ ID string }
	res = call(t, alice, "add_memory", map[string]any{"content": "Alice's dog is called Biscuit."}, &added)
	require.False(t, res.IsError, toolText(res))
	require.NotEmpty(t, added.ID)
	chat(t, p, "alice", false, user("What is my dog called?"))
	assert.Contains(t, systemOf(up.LastChat(t)), "Biscuit")
	chat(t, p, "bob", false, user("What is my dog called?"))
	assert.NotContains(t, systemOf(up.LastChat(t)), "Biscuit", "namespaces never cross")
	bob := mcpSession(t, p, http.Header{"X-Openwebui-User-Id": {"bob"}})
	res = call(t, bob, "forget_memory", map[string]any{"id": added.ID}, nil)
	assert.True(t, res.IsError, "bob cannot touch alice's memory")
	assert.Contains(t, toolText(res), `"id"`)

	// update_memory changes what is recalled.
	res = call(t, alice, "update_memory", map[string]any{"id": added.ID, "content": "Alice's dog is called Pretzel."}, nil)
	require.False(t, res.IsError, toolText(res))
	chat(t, p, "alice", false, user("And what is my dog called again?"))
	sys := systemOf(up.LastChat(t))
	assert.Contains(t, sys, "Pretzel")
	assert.NotContains(t, sys, "Biscuit")

	// forget_memory takes it out of the next chat.
	res = call(t, alice, "forget_memory", map[string]any{"id": added.ID}, nil)
	require.False(t, res.IsError, toolText(res))
	chat(t, p, "alice", false, user("Tell me my dog's name."))
	assert.NotContains(t, systemOf(up.LastChat(t)), "Pretzel")
	var listed found
	res = call(t, alice, "list_memories", map[string]any{"type": "forgotten"}, &listed)
	require.False(t, res.IsError, toolText(res))
	require.Len(t, listed.Memories, 1, "hidden, restorable")

	// Counted by tool and status.
	families, _ := scrape(t, p)
	assert.EqualValues(t, 1, metricValue(families, "vera_mcp_calls_total", map[string]string{"tool": "add_memory", "status": "ok"}))
	assert.EqualValues(t, 1, metricValue(families, "vera_mcp_calls_total", map[string]string{"tool": "forget_memory", "status": "error"}), "bob's try")

	// Bad arguments: tool errors naming the argument.
	for _, tc := range []struct {
		tool string
		args map[string]any
		arg  string
	}{
		{"search_memories", map[string]any{"query": " "}, "query"},
		{"search_memories", map[string]any{"query": "x", "limit": 500}, "limit"},
		{"add_memory", map[string]any{"content": ""}, "content"},
		{"update_memory", map[string]any{"id": "nope", "content": "x"}, "id"},
		{"forget_memory", map[string]any{"id": ""}, "id"},
		{"list_memories", map[string]any{"type": "secret"}, "type"},
		{"list_memories", map[string]any{"since": "yesterday"}, "since"},
	} {
		res := call(t, alice, tc.tool, tc.args, nil)
		assert.True(t, res.IsError, "%s %v", tc.tool, tc.args)
		assert.Contains(t, toolText(res), `"`+tc.arg+`"`, "%s names the argument", tc.tool)
	}
}

// /mcp has a chat's access: the API keys (loopback not trusted here, as
// behind a reverse proxy), and vera's Origin and Host rules: a foreign
// page gets 403 and no tool runs.
func TestMCPAccess(t *testing.T) {
	up := ollamatest.New(t)
	p := runInProcess(t, "VERA_OLLAMA_URL="+up.URL, "VERA_API_KEYS=k-one", "VERA_CONFIG_DIR="+writeConfig(t, "[server]\ntrust_loopback = false\n"))
	_, err := sdk.NewClient(&sdk.Implementation{Name: "t", Version: "1"}, nil).Connect(context.Background(),
		&sdk.StreamableClientTransport{Endpoint: "http://" + p.addr + "/mcp", MaxRetries: -1, DisableStandaloneSSE: true}, nil)
	assert.Error(t, err, "no key")
	s := mcpSession(t, p, http.Header{"Authorization": {"Bearer k-one"}, "X-Openwebui-User-Id": {"alice"}})
	res := call(t, s, "add_memory", map[string]any{"content": "Alice plays the cello."}, nil)
	require.False(t, res.IsError, toolText(res))

	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"add_memory","arguments":{"content":"planted by a page"}}}`
	for name, h := range map[string]http.Header{
		"foreign origin": {"Origin": {"https://evil.example"}, "Authorization": {"Bearer k-one"}},
		"rebound host":   {"Host": {"evil.example:11434"}, "Authorization": {"Bearer k-one"}},
		"a wrong key":    {"Authorization": {"Bearer k-two"}},
	} {
		req, _ := http.NewRequest(http.MethodPost, "http://"+p.addr+"/mcp", strings.NewReader(body))
		for k, v := range h {
			req.Header[k] = v
		}
		if host := h.Get("Host"); host != "" {
			req.Host = host
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		res.Body.Close()
		assert.Contains(t, []int{http.StatusUnauthorized, http.StatusForbidden}, res.StatusCode, name)
	}
	var list struct{ Memories []struct{ Text string } }
	call(t, s, "list_memories", map[string]any{"type": "curated"}, &list)
	for _, m := range list.Memories {
		assert.NotContains(t, m.Text, "planted", "no tool ran")
	}
	// Stateless: no session id is given out.
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	ireq, _ := http.NewRequest(http.MethodPost, "http://"+p.addr+"/mcp", strings.NewReader(init))
	ireq.Header.Set("Authorization", "Bearer k-one")
	ireq.Header.Set("Content-Type", "application/json")
	ireq.Header.Set("Accept", "application/json, text/event-stream")
	ires, err := http.DefaultClient.Do(ireq)
	require.NoError(t, err)
	ires.Body.Close()
	assert.Equal(t, http.StatusOK, ires.StatusCode)
	assert.Empty(t, ires.Header.Get("Mcp-Session-Id"), "stateless")

	req, _ := http.NewRequest(http.MethodGet, "http://"+p.addr+"/mcp", nil)
	req.Header.Set("Authorization", "Bearer k-one")
	res2, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	res2.Body.Close()
	assert.Equal(t, http.StatusMethodNotAllowed, res2.StatusCode, "stateless: GET answers 405")
}
