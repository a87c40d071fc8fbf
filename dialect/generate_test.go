package dialect_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/dialect"
	"github.com/vera-proxy/vera/memory"
)

// generateFull carries every field Ollama's /api/generate knows of, and one
// it does not.
const generateFull = `{"model":"llama3.2","prompt":"why is the sky blue?","system":"be brief",` +
	`"images":["aGVsbG8="],"format":"json","options":{"temperature":0.2,"num_ctx":8192,"num_predict":64},` +
	`"keep_alive":"5m","think":true,"stream":false,"template":"{{ .Prompt }}","future":{"x":[1,2,3]}}`

func TestGenerateRequestKeepsEverything(t *testing.T) {
	req, err := dialect.ParseGenerateRequest([]byte(generateFull))
	require.NoError(t, err)
	assert.Equal(t, "llama3.2", req.ModelName())
	assert.True(t, req.Conversation())
	assert.Equal(t, "why is the sky blue?", req.LastUser())
	assert.Equal(t, []memory.Message{{Role: "system", Content: "be brief"}, {Role: "user", Content: "why is the sky blue?"}}, req.MemoryMessages())
	numCtx, answer := req.Options()
	assert.Equal(t, 8192, numCtx)
	assert.Equal(t, 64, answer)
	assert.JSONEq(t, generateFull, marshalled(t, req), "a round trip keeps every field")

	// With memory, only system changes.
	mc := memoryLayers(true)
	out := req.WithMemory(&mc)
	require.NotNil(t, out)
	assert.JSONEq(t, withFields(t, generateFull, map[string]any{"system": mc.System + "\n\n" + recentAsText}), marshalled(t, out))
	assert.JSONEq(t, generateFull, marshalled(t, req), "the parsed request is left as it was")
}

func TestGenerateRequestReads(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		msgs       []memory.Message
	}{
		{"prompt only", `{"model":"m","prompt":"hi"}`, []memory.Message{{Role: "user", Content: "hi"}}},
		{"with system", `{"model":"m","prompt":"hi","system":"terse"}`, []memory.Message{{Role: "system", Content: "terse"}, {Role: "user", Content: "hi"}}},
		{"empty system", `{"model":"m","prompt":"hi","system":""}`, []memory.Message{{Role: "user", Content: "hi"}}},
		{"null system", `{"model":"m","prompt":"hi","system":null}`, []memory.Message{{Role: "user", Content: "hi"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := dialect.ParseGenerateRequest([]byte(tc.body))
			require.NoError(t, err)
			assert.Equal(t, tc.msgs, req.MemoryMessages())
			assert.Equal(t, "hi", req.LastUser())
			assert.True(t, req.Conversation())
			if tc.name != "null system" { // null goes out as "", which Ollama reads the same
				assert.JSONEq(t, tc.body, marshalled(t, req), "nothing lost")
			}
		})
	}
}

// generateNotConversations are /api/generate calls vera must leave alone.
var generateNotConversations = []struct{ name, body string }{
	{"load", `{"model":"llama3.2"}`},
	{"unload", `{"model":"llama3.2","keep_alive":0}`},
	{"empty prompt", `{"model":"llama3.2","prompt":"","keep_alive":"5m"}`},
	{"whitespace prompt", `{"model":"llama3.2","prompt":" \n\t "}`},
	{"raw", `{"model":"llama3.2","prompt":"<|user|>hi<|assistant|>","raw":true}`},
	{"suffix", `{"model":"codellama","prompt":"def add(a, b):","suffix":"\n    return c"}`},
	{"context", `{"model":"llama3.2","prompt":"and then?","context":[1,2,3]}`},
	{"context with spaces", `{"model":"llama3.2","prompt":"and then?","context": [ 7 ] }`},
}

func TestGenerateConversation(t *testing.T) {
	for _, tc := range generateNotConversations {
		req, err := dialect.ParseGenerateRequest([]byte(tc.body))
		require.NoError(t, err, tc.name)
		assert.False(t, req.Conversation(), tc.name)
	}
	for _, body := range []string{
		`{"model":"llama3.2","prompt":"hi"}`,
		`{"model":"llama3.2","prompt":"hi","raw":false,"suffix":""}`,
		`{"model":"llama3.2","prompt":"hi","context":null}`,
		`{"model":"llama3.2","prompt":"hi","context":[]}`,
		`{"model":"llama3.2","prompt":"hi","context": [] }`,
	} {
		req, err := dialect.ParseGenerateRequest([]byte(body))
		require.NoError(t, err, body)
		assert.True(t, req.Conversation(), body)
	}
}

// An empty context is empty however it is spelt: JSON allows blanks
// inside the brackets, and clients that pretty-print send them.
func TestGenerateEmptyContextWithBlanks(t *testing.T) {
	for _, body := range []string{
		`{"model":"llama3.2","prompt":"hi","context":[ ]}`,
		"{\"model\":\"llama3.2\",\"prompt\":\"hi\",\"context\":[\n]}",
	} {
		req, err := dialect.ParseGenerateRequest([]byte(body))
		require.NoError(t, err, body)
		assert.True(t, req.Conversation(), "%s: an empty context, like []", body)
	}
}

func TestGenerateWithMemory(t *testing.T) {
	const plain = `{"model":"llama3.2","prompt":"hi","options":{"seed":1}}`
	const withSystem = `{"model":"llama3.2","prompt":"hi","system":"be brief","options":{"seed":1}}`
	for _, tc := range []struct {
		name, body string
		mc         memory.Context
		system     any // what system becomes; nil: withMemory returns nil
	}{
		{"caller system, layers and recent", withSystem, memoryLayers(true), memoryLayers(true).System + "\n\n" + recentAsText},
		{"no caller system", plain, memoryLayers(false), memoryLayers(false).System + "\n\n" + recentAsText},
		{"recent only", plain, memory.Context{Recent: memoryLayers(false).Recent}, recentAsText},
		{"system layer only", plain, memory.Context{System: "the operator's prompt"}, "the operator's prompt"},
		{"unchanged: nothing", plain, memory.Context{}, nil},
		{"unchanged: the caller's system kept", withSystem, memory.Context{System: "be brief", SystemReplaces: 1}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := dialect.ParseGenerateRequest([]byte(tc.body))
			require.NoError(t, err)
			out := req.WithMemory(&tc.mc)
			if tc.system == nil {
				assert.Nil(t, out)
				return
			}
			require.NotNil(t, out)
			assert.JSONEq(t, withFields(t, tc.body, map[string]any{"system": tc.system}), marshalled(t, out))
		})
	}
}

var generateSeeds = []string{
	`{"model":"llama3.2","prompt":"hi"}`,
	generateFull,
	`{"model":"llama3.2","prompt":"hi","system":null,"context":null,"stream":null}`,
	`{"model":"llama3.2","prompt":"<|user|>hi","raw":true}`,
	`{"model":"codellama","prompt":"def f(","suffix":"  return x"}`,
	`{"model":"llama3.2","prompt":"and then?","context":[1,2,3]}`,
	`{"model":"llama3.2","prompt":"hi","context":[ ]}`,
	`{"model":"llama3.2","keep_alive":0}`,
	`{"model":"m","prompt":" "}`,
	`{"prompt":"\u00e9\ud83d\ude00","system":"<b>&</b>"}`,
	`{"model":1}`,
	`[]`,
	`null`,
	``,
}

func FuzzParseGenerateRequest(f *testing.F) {
	for _, s := range generateSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		checkParsed(t, ollamaGenerate, body, func(k string, v json.RawMessage) bool {
			switch k {
			case "stream", "context":
				return isNull(v)
			case "raw":
				return isNull(v) || string(bytes.TrimSpace(v)) == "false"
			case "suffix":
				return isNull(v) || string(bytes.TrimSpace(v)) == `""`
			}
			return false
		})
		req, err := dialect.ParseGenerateRequest(body)
		if err != nil || !req.Conversation() {
			return
		}
		assert.Equal(t, req.Prompt, req.LastUser())
		assert.NotEmpty(t, strings.TrimSpace(req.Prompt))
		assert.False(t, req.Raw)
		assert.Empty(t, req.Suffix)
	})
}

// A field sent in another case is read as Ollama reads it, and does not
// stay beside the one vera writes.
func TestFieldsMatchInAnyCase(t *testing.T) {
	req, err := dialect.ParseGenerateRequest([]byte(`{"model":"m","prompt":"hi","System":"be terse"}`))
	require.NoError(t, err)
	assert.Equal(t, "be terse", req.System)
	out := *req
	out.System = "be terse\n\nmore"
	b, err := json.Marshal(out)
	require.NoError(t, err)
	assert.JSONEq(t, `{"model":"m","prompt":"hi","system":"be terse\n\nmore"}`, string(b))
}
