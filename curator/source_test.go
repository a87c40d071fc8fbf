package curator

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/vera-proxy/vera/memory"
)

// A curated memory names the chats of its turns and their time span: it
// keeps them after those turns are deleted.
func TestSourceOfTheTurns(t *testing.T) {
	at := time.Date(2026, 11, 20, 9, 0, 0, 0, time.UTC)
	turn := func(id, chat string, h int) memory.Memory {
		m := memory.Memory{ID: id, Time: at.Add(time.Duration(h) * time.Hour)}
		if chat != "" {
			m.Metadata = memory.WithSource(nil, memory.Source{Via: memory.ViaChat, ChatID: chat})
		}
		return m
	}
	src := sourceOf([]memory.Memory{turn("a", "c1", 2), turn("b", "c2", 0), turn("c", "c1", 5), turn("d", "", 1), {}})
	assert.Equal(t, memory.ViaCurator, src.Via)
	assert.Equal(t, []string{"c1", "c2"}, src.Chats)
	assert.Equal(t, at, src.From)
	assert.Equal(t, at.Add(5*time.Hour), src.Until)
	meta := src.Meta()
	assert.Equal(t, []any{"c1", "c2"}, meta["chats"])
	assert.Equal(t, "2026-11-20T09:00:00Z", meta["from"])
	assert.Equal(t, "2026-11-20T14:00:00Z", meta["until"])
}
