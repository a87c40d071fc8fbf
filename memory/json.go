package memory

import "time"

// JSON is a memory as the admin API reads and writes it, and as the MCP
// tools answer it.
type JSON struct {
	ID        string         `json:"id"`
	Namespace string         `json:"namespace"`
	Type      Type           `json:"type"`
	Text      string         `json:"text"`
	Timestamp time.Time      `json:"timestamp"`
	Model     string         `json:"model,omitempty"`
	Metadata  map[string]any `json:"metadata,omitempty"`
	Score     *float64       `json:"score,omitempty"`
	// UsedCount is how many answers the memory was injected into,
	// LastUsed the latest (absent when never).
	UsedCount int        `json:"used_count"`
	LastUsed  *time.Time `json:"last_used,omitempty"`
}

// JSONOf is m as the admin API and the MCP tools answer it (without its
// usage, which the admin API adds).
func JSONOf(m Memory) JSON {
	return JSON{ID: m.ID, Namespace: m.Namespace, Type: m.Type, Text: m.Text, Timestamp: m.Time, Model: m.Model, Metadata: m.Metadata}
}
