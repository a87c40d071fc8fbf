// Package app is the vera program: every command (serve, check,
// healthcheck, eval, curate, memories, mcp), each building the parts it
// needs once from the resolved config. Run is its entry point, called by
// main and by the end-to-end tests alike.
package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	_ "time/tzdata" // curator.timezone must resolve in a scratch container too

	"github.com/vera-proxy/vera/config"
)

// Usage is the help `vera help` prints, and main after a usage error.
const Usage = `vera — a transparent, Ollama-compatible memory proxy

Usage:
  vera [serve] [flags]   run the proxy (default)
  vera check [flags]     validate the config, reach Ollama, the store and the embedder; exit 1 when
                         vera cannot serve chats (FAIL lines), 0 when only a feature is degraded (warn)
  vera healthcheck       ask a running vera's /healthz (for container health checks)
  vera eval locomo [--budget N] [--embedder ollama|none] [--cv] FILE...
                         memory-quality benchmark on LoCoMo conversations; --cv: the
                         retrieval choices cross-validated, one conversation left out at a time
  vera eval routing [--embedder ollama|none] [--cv K] [FILE]
                         tier-routing accuracy on the older labelled set (or FILE);
                         --cv K: the learned stage's grouped K-fold cross-validation
                         on the training corpus (or FILE)
  vera curate [--dry-run] [--namespace NS]
                         run the curator once (vera stopped; else POST /curator/run)
  vera memories namespaces|list|search|show|add|edit|delete|export|import ...
                         see, correct and move memories (vera memories, for details)
  vera memories import --from-vera-ai --url URL [--collection NAME] [--namespace NS]
                         copy a Vera-AI Qdrant collection into vera's store, re-embedded
  vera memories import --from-open-webui URL --token TOKEN [--namespace NS]
                         copy a user's memories from Open WebUI (into the namespace of
                         their user id); run again, it adds only what is new
  vera mcp [--url URL] [--namespace NS]
                         the memory tools over stdio (MCP), for agents that start their own server
  vera help              show this help
  vera --version         print the version

Flags:
  --config PATH      config file (default $VERA_CONFIG_DIR/config.toml, else ./config.toml)
  --listen ADDR      listen address (VERA_LISTEN, server.listen; default 127.0.0.1:11434)
  --ollama-url URL   Ollama's address (VERA_OLLAMA_URL, general.ollama_host; default http://127.0.0.1:11435)
  --data-dir DIR     data directory (VERA_DATA_DIR, memory.data_dir; default ./data)
  --debug            debug logging (VERA_DEBUG, general.debug)
`

// UsageError is a command line vera does not understand: main prints
// Msg, then Usage, and exits with status 2.
type UsageError struct{ Msg string }

func (e UsageError) Error() string { return e.Msg }

// Run is the whole program: main and the end-to-end tests both call it,
// with the command line after the program's name. Once serve listens, it
// calls ready (when not nil) with the bound address, so a test can listen
// on 127.0.0.1:0.
func Run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer, ready func(addr string)) error {
	cmd := "serve"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "help":
		fmt.Fprint(stdout, Usage)
		return nil
	case "version":
		fmt.Fprintf(stdout, "vera %s\n", Version())
		return nil
	case "eval":
		return evalCmd(ctx, args, getenv, stdout, stderr)
	case "memories":
		return memoriesCmd(ctx, args, getenv, stdout, stderr)
	case "mcp":
		return mcpCmd(ctx, args, getenv, os.Stdin, stdout, stderr)
	case "curate":
		return curateCmd(ctx, args, getenv, stdout, stderr)
	case "serve", "check", "healthcheck":
		return serverCmd(ctx, cmd, args, getenv, stdout, stderr, ready)
	}
	return UsageError{fmt.Sprintf("unknown command %q", cmd)}
}

// serverCmd runs the commands that take the server's flags: serve, check
// and healthcheck.
func serverCmd(ctx context.Context, cmd string, args []string, getenv func(string) string, stdout, stderr io.Writer, ready func(addr string)) error {
	fs := flag.NewFlagSet("vera "+cmd, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var flags config.Flags
	showVersion := fs.Bool("version", false, "")
	configFlags(fs, &flags)
	fs.StringVar(&flags.Listen, "listen", "", "")
	fs.BoolVar(&flags.Debug, "debug", false, "")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, Usage)
			return nil
		}
		return UsageError{err.Error()}
	}
	if fs.NArg() > 0 {
		return UsageError{fmt.Sprintf("unexpected argument %q", fs.Arg(0))}
	}
	if *showVersion {
		fmt.Fprintf(stdout, "vera %s\n", Version())
		return nil
	}

	cfg, err := config.Load(flags, getenv)
	switch {
	case cmd == "check":
		return check(ctx, cfg, err, stdout)
	case err != nil:
		return err
	case cmd == "healthcheck":
		return healthcheck(ctx, cfg, stdout)
	}
	return serve(ctx, cfg, stderr, ready)
}

// configFlags declares, on fs into f, the flags every command takes to
// choose its config: --config, --ollama-url and --data-dir.
func configFlags(fs *flag.FlagSet, f *config.Flags) {
	fs.StringVar(&f.ConfigPath, "config", "", "")
	fs.StringVar(&f.OllamaURL, "ollama-url", "", "")
	fs.StringVar(&f.DataDir, "data-dir", "", "")
}
