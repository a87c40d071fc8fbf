package curator

import (
	"slices"

	"github.com/vera-proxy/vera/memory"
)

// sourceOf is where a memory the curator writes comes from: the chats of
// the turns it distils and their time span, kept in its metadata after
// those turns are deleted.
func sourceOf(turns []memory.Memory) memory.Source {
	s := memory.Source{Via: memory.ViaCurator}
	for _, t := range turns {
		if t.ID == "" {
			continue
		}
		if src, ok := t.Metadata[memory.MetaSource].(map[string]any); ok {
			if id, _ := src["chat_id"].(string); id != "" && !slices.Contains(s.Chats, id) {
				s.Chats = append(s.Chats, id)
			}
		}
		if s.From.IsZero() || t.Time.Before(s.From) {
			s.From = t.Time
		}
		if t.Time.After(s.Until) {
			s.Until = t.Time
		}
	}
	return s
}
