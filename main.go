// Command vera is a transparent, Ollama-compatible memory proxy: it sits
// where Ollama used to listen, forwards every request to Ollama, and gives
// every chat a long-term memory.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	_ "time/tzdata" // curator.timezone must resolve in a scratch container too

	"github.com/vera-proxy/vera/config"
)

const usage = `vera — a transparent, Ollama-compatible memory proxy

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

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop() // a second signal kills at once
	}()
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr, nil)
	stop()
	var ue usageError
	switch {
	case err == nil:
	case errors.As(err, &ue):
		fmt.Fprintf(os.Stderr, "vera: %s\n\n%s", config.RedactText(ue.msg), usage)
		os.Exit(2)
	default:
		// Config errors quote the value they refuse, URLs included.
		fmt.Fprintf(os.Stderr, "vera: %s\n", config.RedactText(err.Error()))
		os.Exit(1)
	}
}

// run is the whole program: main and the end-to-end tests both call it.
// Once serve listens, it calls ready (when not nil) with the bound
// address, so a test can listen on 127.0.0.1:0.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer, ready func(addr string)) error {
	cmd := "serve"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "help":
		fmt.Fprint(stdout, usage)
		return nil
	case "version":
		fmt.Fprintf(stdout, "vera %s\n", version)
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
	default:
		return usageError{fmt.Sprintf("unknown command %q", cmd)}
	}

	fs := flag.NewFlagSet("vera "+cmd, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var flags config.Flags
	showVersion := fs.Bool("version", false, "")
	configFlags(fs, &flags)
	fs.StringVar(&flags.Listen, "listen", "", "")
	fs.BoolVar(&flags.Debug, "debug", false, "")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, usage)
			return nil
		}
		return usageError{err.Error()}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Sprintf("unexpected argument %q", fs.Arg(0))}
	}
	if *showVersion {
		fmt.Fprintf(stdout, "vera %s\n", version)
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
