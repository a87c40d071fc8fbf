package app

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/vera-proxy/vera/config"
	"github.com/vera-proxy/vera/curator"
	"github.com/vera-proxy/vera/memory/embedded"
)

// curateCmd runs `vera curate [--dry-run] [--namespace NS]`: one curator
// run, its result printed as JSON; exit 1 unless it succeeded.
func curateCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("vera curate", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	dry := fs.Bool("dry-run", false, "")
	ns := fs.String("namespace", "", "")
	var flags config.Flags
	configFlags(fs, &flags)
	if err := fs.Parse(args); err != nil {
		return UsageError{err.Error()}
	}
	if fs.NArg() > 0 {
		return UsageError{fmt.Sprintf("curate: unexpected argument %q", fs.Arg(0))}
	}
	cfg, err := config.Load(flags, getenv)
	if err != nil {
		return err
	}
	if !cfg.Memory.Enabled {
		return errors.New("curate: memory is off (memory.enabled = false)")
	}
	logger := newLogger(stderr, cfg.General.Debug)
	a, err := newApp(ctx, cfg, logger, appOptions{Memory: true})
	if errors.Is(err, embedded.ErrInUse) {
		return fmt.Errorf("curate: vera is running on this data dir; ask it instead: curl -X POST http://%s/curator/run: %w", cfg.Server.Listen, err)
	}
	if err != nil {
		return err
	}
	defer a.Close()
	// Curated memories get their vectors now if the embedder answers
	// within a little while; otherwise the backfill of a running vera
	// makes them.
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	a.gate.Settle(pctx, time.Second)
	cancel()
	res := a.curator.Run(ctx, curator.Options{DryRun: *dry, Namespace: strings.TrimSpace(*ns)})
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(res); err != nil {
		return err
	}
	if res.Status != curator.StatusOK {
		return fmt.Errorf("curate: %s", res.Error)
	}
	return nil
}
