package veraai

import (
	"testing"
	"time"

	"github.com/qdrant/go-client/qdrant"
	"github.com/stretchr/testify/assert"

	"github.com/vera-proxy/vera/memory"
)

func TestConvert(t *testing.T) {
	now := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	id := qdrant.NewID("5c56c793-69f3-4fbf-87e6-c4bf54c28c26")
	tests := []struct {
		name    string
		id      *qdrant.PointId
		payload map[string]any
		text    string
		typ     memory.Type
		time    time.Time
		skip    string
		undated bool
	}{
		{name: "raw turn with timestamp line", id: id,
			payload: map[string]any{"type": "raw", "role": "qa", "text": "User: my cat is Miso\nAssistant: Nice!\nTimestamp: 2025-03-01T10:00:00.123456Z", "timestamp": "2025-03-01T10:00:00.123456Z"},
			text:    "User: my cat is Miso\nAssistant: Nice!", typ: memory.Raw, time: time.Date(2025, 3, 1, 10, 0, 0, 123456000, time.UTC)},
		{name: "curated, offset timestamp", id: id,
			payload: map[string]any{"type": "curated", "text": "User: What pet?\nAssistant: A cat named Miso.", "timestamp": "2025-03-02T12:00:00+01:00"},
			text:    "User: What pet?\nAssistant: A cat named Miso.", typ: memory.Curated, time: time.Date(2025, 3, 2, 11, 0, 0, 0, time.UTC)},
		{name: "one role only, naive timestamp", id: qdrant.NewIDNum(42),
			payload: map[string]any{"type": "raw", "role": "user", "text": "User: hello there", "content": "hello there", "timestamp": "2025-03-03T08:00:00"},
			text:    "User: hello there", typ: memory.Raw, time: time.Date(2025, 3, 3, 8, 0, 0, 0, time.UTC)},
		{name: "no timestamp", id: id, payload: map[string]any{"type": "raw", "text": "User: a\nAssistant: b"},
			text: "User: a\nAssistant: b", typ: memory.Raw, time: now, undated: true},
		{name: "unknown type", id: id, payload: map[string]any{"type": "summary", "text": "x"}, skip: `type "summary"`},
		{name: "no text", id: id, payload: map[string]any{"type": "raw", "text": "Timestamp: 2025-01-01T00:00:00Z"}, skip: "no text"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, skip, undated := Convert(tt.id, qdrant.NewValueMap(tt.payload), "alice", now)
			assert.Equal(t, tt.skip, skip)
			if skip != "" {
				return
			}
			assert.NoError(t, m.Validate())
			assert.Equal(t, tt.text, m.Text)
			assert.Equal(t, tt.typ, m.Type)
			assert.Equal(t, "alice", m.Namespace)
			assert.True(t, tt.time.Equal(m.Time), "%v != %v", m.Time, tt.time)
			assert.Equal(t, tt.undated, undated)
			assert.Equal(t, "vera-ai", m.Metadata["imported_from"])
		})
	}
	// A numeric id maps to the same UUID every time: importing twice
	// replaces.
	a, _, _ := Convert(qdrant.NewIDNum(42), qdrant.NewValueMap(map[string]any{"type": "raw", "text": "x"}), "a", now)
	b, _, _ := Convert(qdrant.NewIDNum(42), qdrant.NewValueMap(map[string]any{"type": "raw", "text": "x"}), "a", now)
	assert.Equal(t, a.ID, b.ID)
	// The mapping is pinned: a point imported by an earlier vera keeps its
	// id, so importing it again still replaces it.
	assert.Equal(t, "daed2d93-1d84-54fd-82a5-c94ee3b791f5", a.ID)
	assert.Equal(t, "5c56c793-69f3-4fbf-87e6-c4bf54c28c26", func() string {
		m, _, _ := Convert(id, qdrant.NewValueMap(map[string]any{"type": "raw", "text": "x"}), "a", now)
		return m.ID
	}())
}
