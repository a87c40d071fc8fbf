// Package process holds vera's end-to-end tests that need it as a process
// of its own, the built binary (veratest.Launch, veratest.RunCommand):
// signals and graceful shutdown, exit codes and usage, `vera check`,
// `vera memories`, `vera curate`, `vera eval`, `vera mcp` over stdio,
// kill -9, restarts against the Qdrant stand-in, and a peak RSS.
package process

import (
	"testing"

	"github.com/vera-proxy/vera/tests/veratest"
)

func TestMain(m *testing.M) { veratest.Main(m) }
