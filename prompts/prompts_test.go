package prompts

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSystemPromptIsReReadWhenItChanges(t *testing.T) {
	dir := t.TempDir()
	d := New(dir)
	assert.Equal(t, "", d.System(), "missing file: no system prompt")
	p := filepath.Join(dir, SystemPrompt)
	require.NoError(t, os.WriteFile(p, []byte("Be brief."), 0o644))
	assert.Equal(t, "Be brief.", d.System())
	require.NoError(t, os.WriteFile(p, []byte("Be very brief."), 0o644))
	later := time.Now().Add(2 * time.Second)
	require.NoError(t, os.Chtimes(p, later, later))
	assert.Equal(t, "Be very brief.", d.System())
}

func TestDefaultsShipInTheBinary(t *testing.T) {
	d := New(t.TempDir())
	assert.Contains(t, d.Curator(), "{CURRENT_DATE}")
	assert.Equal(t, "", d.System(), "the default system prompt is empty")
	require.NoError(t, os.WriteFile(filepath.Join(d.Path(), CuratorPrompt), []byte("mine {CURRENT_DATE}"), 0o644))
	assert.Equal(t, "mine {CURRENT_DATE}", d.Curator(), "a file overrides the default")
}
