package memory

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The admin API and the MCP tools answer this shape; clients read it by
// name, and exports diff it by line, so its fields, their order and what
// is left out when empty must not change.
func TestJSONShape(t *testing.T) {
	at := time.Date(2026, 3, 1, 9, 30, 0, 0, time.UTC)
	score := 0.75
	tests := []struct {
		name string
		in   JSON
		want string
	}{
		{
			name: "empty fields left out",
			in:   JSONOf(Memory{ID: "m1", Namespace: "alice", Type: Curated, Text: "Lives in Lyon.", Time: at}),
			want: `{"id":"m1","namespace":"alice","type":"curated","text":"Lives in Lyon.","timestamp":"2026-03-01T09:30:00Z","used_count":0}`,
		},
		{
			name: "every field",
			in: func() JSON {
				j := JSONOf(Memory{ID: "m2", Namespace: "bob", Type: Raw, Text: "Hello.", Time: at,
					Model: "llama3", Metadata: map[string]any{"private": true}})
				j.Score, j.UsedCount, j.LastUsed = &score, 3, &at
				return j
			}(),
			want: `{"id":"m2","namespace":"bob","type":"raw","text":"Hello.","timestamp":"2026-03-01T09:30:00Z",` +
				`"model":"llama3","metadata":{"private":true},"score":0.75,"used_count":3,"last_used":"2026-03-01T09:30:00Z"}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := json.Marshal(tt.in)
			require.NoError(t, err)
			assert.Equal(t, tt.want, string(got))
		})
	}
}

// JSONOf carries no vector, tokens or usage: those are not the memory's
// text, and the admin API adds usage itself.
func TestJSONOfLeavesOutWhatIsNotAnswered(t *testing.T) {
	j := JSONOf(Memory{ID: "m3", Namespace: "alice", Type: Rule, Text: "Answer in German.", Vector: []float32{1}, Tokens: 4})
	assert.Equal(t, JSON{ID: "m3", Namespace: "alice", Type: Rule, Text: "Answer in German."}, j)
}
