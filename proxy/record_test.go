package proxy

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/memory"
)

func TestChatRecordsFinishedTurns(t *testing.T) {
	const v1 = "/v1/chat/completions"
	tests := []struct {
		name    string
		path    string // default /api/chat
		setup   func(*fakeOllama)
		header  http.Header
		body    string
		want    []string // the recorded answers
		wantNS  string
		status  int // default 200
		wantErr bool
	}{
		{
			name:   "streamed answer without thinking",
			setup:  func(f *fakeOllama) { f.thinking = []string{"let me ", "think"} },
			body:   `{"model":"llama3.2","messages":[{"role":"user","content":"first"},{"role":"assistant","content":"a"},{"role":"user","content":"hi"}]}`,
			want:   []string{"Hello there."},
			wantNS: "default",
		},
		{
			name:   "non-streamed, namespace header",
			header: http.Header{"X-Openwebui-User-Id": {"alice"}},
			body:   `{"model":"llama3.2","stream":false,"messages":[{"role":"user","content":"hi"}]}`,
			want:   []string{"Hello there."},
			wantNS: "alice",
		},
		{
			name:   "memory off",
			header: http.Header{"X-Vera-Memory": {"off"}},
			body:   `{"model":"llama3.2","messages":[{"role":"user","content":"hi"}]}`,
		},
		{
			name:   "upstream error status",
			body:   `{"model":"missing","messages":[{"role":"user","content":"hi"}]}`,
			status: http.StatusNotFound,
		},
		{
			name:    "aborted stream",
			setup:   func(f *fakeOllama) { f.dieAfter = 2 },
			body:    `{"model":"llama3.2","messages":[{"role":"user","content":"hi"}]}`,
			wantErr: true,
		},
		{
			name:  "empty answer",
			setup: func(f *fakeOllama) { f.tokens = []string{"", " "} },
			body:  `{"model":"llama3.2","messages":[{"role":"user","content":"hi"}]}`,
		},
		{
			name: "no user message",
			body: `{"model":"llama3.2","messages":[{"role":"system","content":"hi"}]}`,
		},

		// OpenAI's format on Ollama's compatible endpoint.
		{name: "v1 streamed", path: v1, body: `{"model":"llama3.2","stream":true,"messages":[{"role":"user","content":"hi"}]}`, want: []string{"Hello there."}, wantNS: "default"},
		{name: "v1 not streamed, content parts", path: v1, body: `{"model":"llama3.2","messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}`, want: []string{"Hello there."}, wantNS: "default"},
		{name: "v1 memory off", path: v1, header: http.Header{"X-Vera-Memory": {"off"}}, body: `{"model":"llama3.2","stream":true,"messages":[{"role":"user","content":"hi"}]}`},
		{name: "v1 missing model", path: v1, body: `{"model":"missing","stream":true,"messages":[{"role":"user","content":"hi"}]}`, status: http.StatusNotFound},
		{name: "v1 aborted stream", path: v1, setup: func(f *fakeOllama) { f.dieAfter = 2 }, body: `{"model":"llama3.2","stream":true,"messages":[{"role":"user","content":"hi"}]}`, wantErr: true},
		{name: "v1 empty answer", path: v1, setup: func(f *fakeOllama) { f.tokens = []string{" "} }, body: `{"model":"llama3.2","stream":true,"messages":[{"role":"user","content":"hi"}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up := newFakeOllama(t)
			if tt.setup != nil {
				tt.setup(up)
			}
			rec := &recorder{}
			base, served := startServedVera(t, up.srv.URL, func(s *Server) { s.Recorder = rec })
			path := cmp.Or(tt.path, "/api/chat")
			req, _ := http.NewRequest(http.MethodPost, base+path, strings.NewReader(tt.body))
			for k, v := range tt.header {
				req.Header[k] = v
			}
			res, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			_, readErr := io.ReadAll(res.Body)
			res.Body.Close()
			if tt.wantErr {
				require.Error(t, readErr)
			} else {
				require.NoError(t, readErr)
				assert.Equal(t, cmp.Or(tt.status, http.StatusOK), res.StatusCode)
			}
			waitFor(t, served, "the handler to return")
			turns := rec.all()
			require.Len(t, turns, len(tt.want))
			for i, answer := range tt.want {
				assert.Equal(t, answer, turns[i].Assistant)
				assert.Equal(t, "hi", turns[i].User)
				assert.Equal(t, "llama3.2", turns[i].Model)
				assert.Equal(t, tt.wantNS, turns[i].Namespace)
				assert.False(t, turns[i].Time.IsZero())
			}
		})
	}
}

// Only a chat whose turn is stored notes who its namespace is: a flood of
// load calls, background tasks, temporary chats or chats with memory off,
// each under a namespace of its own and with a long user name, leaves the
// directory empty.
func TestOnlyStoredTurnsNoteTheirNamespace(t *testing.T) {
	up := newFakeOllama(t)
	dir := memory.NewDirectory(seenStore{})
	rec := &recorder{}
	base := startVera(t, up.srv.URL, func(s *Server) { s.Memory, s.Recorder, s.Directory = &countingMemory{}, rec, dir })
	cases := []struct {
		name, path, body string
		hdr              []string
	}{
		{"chat load call", "/api/chat", `{"model":"m","messages":[]}`, nil},
		{"generate load call", "/api/generate", `{"model":"m","prompt":""}`, nil},
		{"memory off", "/api/chat", hiChat, []string{"X-Vera-Memory", "off"}},
		{"temporary chat", "/api/chat", hiChat, []string{"X-OpenWebUI-Chat-Id", "local:Xy12socket"}},
		{"background task", "/api/chat", hiChat, []string{"X-OpenWebUI-Task", "title_generation"}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for k := range 20 {
				hdr := append([]string{"X-OpenWebUI-User-Id", fmt.Sprintf("flood-%d-%d", i, k), "X-OpenWebUI-User-Name", strings.Repeat("N", 256)}, tc.hdr...)
				res, _ := postChat(t, base, tc.path, tc.body, hdr...)
				require.Equal(t, http.StatusOK, res.StatusCode)
			}
			all, err := dir.All(context.Background())
			require.NoError(t, err)
			assert.Zero(t, len(all), "rows in the directory")
		})
	}
	require.Zero(t, len(rec.all()), "none of them was stored")

	res, _ := postChat(t, base, "/api/chat", hiChat, "X-OpenWebUI-User-Id", "alice", "X-OpenWebUI-User-Name", "Alice Martin")
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Len(t, rec.all(), 1)
	all, err := dir.All(context.Background())
	require.NoError(t, err)
	require.Len(t, all, 1)
	assert.Equal(t, "Alice Martin", all["alice"].Name, "a stored turn notes who its namespace is")
}
