package dialect

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/memory/storetest"
)

// The tee reads records in place (jsonscan.go). What it reads must be what
// encoding/json reads: these oracles are the decoders it replaced.

var stringSeeds = []string{
	`"plain"`, `""`, `null`, `"line\nbreak\ttab \"quoted\" back\\slash \/ \b\f\r"`,
	`"\u003cthink\u003e \u00e9t\u00E9"`, `"emoji \ud83d\ude00 pair"`, `"lone \ud83d high"`,
	`"lone \ude00 low"`, `"high then letter \ud83dx"`, "\"invalid \xff utf8 \xe2\x82\"", `"héllo wörld ✓"`,
	`5`, `true`, `{"a":1}`, `"bad \q escape"`, `"short \u12"`,
}

func FuzzAppendJSONString(f *testing.F) {
	for _, s := range stringSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if !json.Valid(raw) {
			return // the tee checks validity first
		}
		raw = bytes.TrimSpace(raw) // a value as members gives it
		var want *string
		werr := json.Unmarshal(raw, &want)
		var sb strings.Builder
		ok := appendJSONString(&sb, raw)
		if werr != nil {
			assert.False(t, ok, "%q is not a string", raw)
			return
		}
		require.True(t, ok, "%q", raw)
		if want == nil {
			assert.Empty(t, sb.String())
			return
		}
		assert.Equal(t, *want, sb.String(), "%q", raw)
	})
}

// oracleRecord is how the tee read an Ollama record with encoding/json.
func oracleRecord(line []byte) (content string, tools, done, failed bool) {
	var rec struct {
		Message *struct {
			Content   string          `json:"content"`
			ToolCalls json.RawMessage `json:"tool_calls"`
		} `json:"message"`
		Response string `json:"response"`
		Done     bool   `json:"done"`
		Error    string `json:"error"`
	}
	if json.Unmarshal(line, &rec) != nil || rec.Error != "" {
		return "", false, false, true
	}
	if rec.Message != nil {
		content, tools = rec.Message.Content, present(rec.Message.ToolCalls)
	}
	return content + rec.Response, tools, rec.Done, false
}

var recordSeeds = []string{
	`{"model":"llama3.2","message":{"role":"assistant","content":"Hi \u003cb\u003e"},"done":false}`,
	`{"model":"llama3.2","response":"line\n","done":true,"done_reason":"stop","context":[1,2,3]}`,
	`{"message":{"role":"assistant","content":"","tool_calls":[{"function":{"name":"f","arguments":{"x":"}"}}}]},"done":true}`,
	`{"message":{"content":"x","tool_calls":[]},"done":false}`,
	`{"message":null,"done":null}`,
	`{"error":"model not found"}`, `{"error":""}`, `{"error":null,"done":true}`, `{"error":{"m":1}}`,
	`{"message":"text"}`, `{"message":{"content":5}}`, `{"done":"yes"}`, `{"response":null}`,
	`[1,2]`, `"str"`, `{}`, ` { "message" : { "content" : "spaced" } , "done" : true } `,
	`{"message":{"content":"a\"b{c}[d]","images":["x\"]"]},"done":false}`,
	`null`, ` null `,
}

// FuzzTeeRecordMatchesJSON: an Ollama record reads as encoding/json read it.
func FuzzTeeRecordMatchesJSON(f *testing.F) {
	for _, s := range recordSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		if !json.Valid(line) || hasFoldedKey(line) {
			return
		}
		content, tools, done, failed := oracleRecord(line)
		var tee Answer
		tee.record(line)
		if failed {
			assert.True(t, tee.Failed, "%s", line)
			return
		}
		require.False(t, tee.Failed, "%s", line)
		assert.Equal(t, content, tee.Content.String(), "%s", line)
		assert.Equal(t, tools, tee.ToolCalls, "%s", line)
		assert.Equal(t, done, tee.Done, "%s", line)
	})
}

// hasFoldedKey reports whether a record spells one of the keys the tee
// reads in another case (encoding/json matches keys case-insensitively;
// Ollama and OpenAI write them in lower case), or twice (encoding/json
// keeps the last).
func hasFoldedKey(line []byte) bool {
	l := string(line)
	for _, k := range []string{"message", "content", "tool_calls", "response", "done", "error", "choices", "delta", "index"} {
		if strings.Count(strings.ToLower(l), `"`+k+`"`) != strings.Count(l, `"`+k+`"`) || strings.Count(l, `"`+k+`"`) > 1 {
			return true
		}
	}
	return false
}

// oracleChunk is how the tee read an OpenAI chunk with encoding/json.
func oracleChunk(data []byte) (content string, tools, failed bool) {
	var rec openAIRecord
	if json.Unmarshal(data, &rec) != nil || rec.Error != nil {
		return "", false, true
	}
	for _, c := range rec.Choices {
		if c.Index == 0 && c.Delta != nil {
			content += c.Delta.Content
			tools = tools || present(c.Delta.ToolCalls)
		}
	}
	return content, tools, false
}

var chunkSeeds = []string{
	`{"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":"Hi"},"finish_reason":null}]}`,
	`{"choices":[{"delta":{"content":"no index"}}]}`,
	`{"choices":[{"index":1,"delta":{"content":"second"}},{"index":0,"delta":{"content":"first"}}]}`,
	`{"choices":[{"delta":{"content":"late index"},"index":1}]}`,
	`{"choices":[{"index":0,"delta":{"tool_calls":[{"id":"t","function":{"name":"f"}}]}}]}`,
	`{"choices":[],"usage":{"total_tokens":3}}`, `{"choices":null}`, `{"error":{"message":"x"}}`, `{"error":null,"choices":[]}`,
	`{"choices":[{"index":0,"delta":null}]}`, `{"choices":[{"index":0,"delta":{"content":null}}]}`,
	`{"choices":{"index":0}}`, `{"choices":[{"index":"0","delta":{"content":"x"}}]}`, `{"choices":[5]}`,
	`null`, `{"choices":[null]}`, `{"choices":[{"index":null,"delta":{"content":"x"}}]}`,
	`{"choices":[{"index":-0,"delta":{"content":"x"}}]}`,
}

// FuzzTeeChunkMatchesJSON: an OpenAI chunk reads as encoding/json read it.
func FuzzTeeChunkMatchesJSON(f *testing.F) {
	for _, s := range chunkSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !json.Valid(data) || hasFoldedKey(data) || strings.Contains(string(data), "[DONE]") {
			return
		}
		content, tools, failed := oracleChunk(data)
		var tee Answer
		OpenAIChat{}.Read(&tee, data)
		if failed {
			assert.True(t, tee.Failed, "%s", data)
			return
		}
		require.False(t, tee.Failed, "%s", data)
		assert.Equal(t, content, tee.Content.String(), "%s", data)
		assert.Equal(t, tools, tee.ToolCalls, "%s", data)
	})
}

// allowedAllocs per record: none. Under the race detector sync.Pool drops
// a share of what is put back at random, and json.Valid's pooled scanner
// (one to three allocations) is then made again: 0.5 to 1 allocation per
// record on average, measured. One allocation more per record would still
// show.
var allowedAllocs = map[bool]float64{false: 0, true: 1.25}[raceOn]

// cycle serves the same records over and over, one per Read.
type cycle struct {
	records [][]byte
	i       int
}

func (c *cycle) Read(p []byte) (int, error) {
	n := copy(p, c.records[c.i%len(c.records)])
	c.i++
	return n, nil
}

func (c *cycle) Close() error { return nil }

// TestThinkStripAllocatesNothingPerRecord: with strip_think on, a record
// with no tag in it passes as it came, at no allocation.
func TestThinkStripAllocatesNothingPerRecord(t *testing.T) {
	ndjson := `{"model":"llama3.2","message":{"role":"assistant","content":"word\n"},"done":false}` + "\n"
	sse := `data: {"id":"c","choices":[{"index":0,"delta":{"content":"word"},"finish_reason":null}]}` + "\n"
	for name, body := range map[string]io.ReadCloser{
		"ndjson": newThinkNDJSON(&cycle{records: [][]byte{[]byte(ndjson)}}, true),
		"sse":    newThinkSSE(&cycle{records: [][]byte{[]byte(sse), []byte("\n")}}, true),
	} {
		t.Run(name, func(t *testing.T) {
			p := make([]byte, 32<<10)
			var got []byte
			for range 4 {
				n, err := body.Read(p)
				require.NoError(t, err)
				got = append(got, p[:n]...)
			}
			want := map[string]string{"ndjson": ndjson + ndjson + ndjson + ndjson, "sse": sse + "\n" + sse + "\n"}[name]
			assert.Equal(t, want, string(got), "records without a tag pass byte for byte")
			allocs := storetest.AllocsPer(2000, func() { body.Read(p) })
			assert.LessOrEqual(t, allocs, allowedAllocs, "allocations per forwarded record")
		})
	}
}
