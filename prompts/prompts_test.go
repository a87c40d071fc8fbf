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
