package process

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/app"
	"github.com/vera-proxy/vera/tests/veratest"
)

func TestCommandLine(t *testing.T) {
	code, out, _ := veratest.RunCommand(t, nil, "--version")
	assert.Equal(t, 0, code)
	assert.Regexp(t, `^vera \S+\n$`, out)

	code, out, _ = veratest.RunCommand(t, nil, "help")
	assert.Equal(t, 0, code)
	assert.Contains(t, out, "vera check")

	code, _, errOut := veratest.RunCommand(t, nil, "frobnicate")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, `unknown command "frobnicate"`)
	assert.Contains(t, errOut, "Usage:")

	code, _, errOut = veratest.RunCommand(t, nil, "serve", "--no-such-flag")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "no-such-flag")

	// A config error names the key and line, and vera does not start.
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.toml"), []byte("[general]\n\nollama_hots = \"x\"\n"), 0o600))
	code, _, errOut = veratest.RunCommand(t, []string{"VERA_CONFIG_DIR=" + dir}, "serve")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, `unknown key "general.ollama_hots" at line 3`)
}

// `vera version`, `vera --version` and `vera serve --version` print the
// version the build carries, and start nothing.
func TestVersionCommand(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}, {"serve", "--version"}} {
		var out strings.Builder
		require.NoError(t, app.Run(context.Background(), args, func(string) string { return "" }, &out, io.Discard, nil), args)
		assert.Equal(t, "vera "+app.Version()+"\n", out.String(), args)
	}
	assert.NotEmpty(t, app.Version())
}
