package app

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/vera-proxy/vera/admin"
	"github.com/vera-proxy/vera/config"
	"github.com/vera-proxy/vera/mcp"
	"github.com/vera-proxy/vera/memory"
	"github.com/vera-proxy/vera/memory/embedded"
	"github.com/vera-proxy/vera/ollama"
)

const mcpUsage = `mcp: vera mcp [--url VERA_URL] [--namespace NS]
serves vera's memory tools over stdio (MCP), for agents that start their own server:
through the running vera's /mcp (with VERA_API_KEY when it needs a key), or, when none
answers at the default address, on the store opened for each call.`

// mcpCmd runs `vera mcp`: the MCP tools over stdin and stdout.
func mcpCmd(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("vera mcp", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var rawURL, ns string
	fs.StringVar(&rawURL, "url", "", "")
	fs.StringVar(&ns, "namespace", memory.DefaultNamespace, "")
	var flags config.Flags
	configFlags(fs, &flags)
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		return UsageError{mcpUsage}
	}
	cfg, err := config.Load(flags, getenv)
	if err != nil {
		return err
	}
	call, tools, done, err := mcpBackend(ctx, cfg, rawURL, strings.TrimSpace(ns), getenv("VERA_API_KEY"), stderr)
	if err != nil {
		return err
	}
	defer done()
	return mcp.Serve(ctx, Version(), tools, call, stdin, stdout)
}

// mcpBackend chooses where the tools run: the running vera's /mcp, or,
// when none answers at the default address, the store, opened for each
// call and closed at once: a long-lived `vera mcp` never keeps `vera
// serve` from opening it.
func mcpBackend(ctx context.Context, cfg config.Config, rawURL, ns, key string, stderr io.Writer) (mcp.Call, []*sdk.Tool, func(), error) {
	explicit := rawURL != ""
	if !explicit {
		rawURL = "http://" + admin.DialAddr(cfg.Server.Listen)
	}
	base, err := url.Parse(rawURL)
	if err != nil || base.Host == "" || (base.Scheme != "http" && base.Scheme != "https") {
		return nil, nil, nil, UsageError{fmt.Sprintf("mcp: --url %q is not an http:// address of vera", rawURL)}
	}
	local := mcp.New(nil, Version())
	tools, err := local.Tools(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	hc := &http.Client{Transport: ollama.NewTransport(time.Minute), Timeout: 10 * time.Second, CheckRedirect: mcp.NoRedirect}
	header := http.Header{cfg.Memory.NamespaceHeader: {ns}}
	if key != "" {
		header.Set("Authorization", "Bearer "+key) // never the admin token
	}
	dial := func(ctx context.Context) (*mcp.Remote, error) {
		return mcp.Dial(ctx, base.JoinPath("/mcp").String(), header, ollama.NewTransport(5*time.Minute))
	}
	var health map[string]json.RawMessage
	herr := admin.GetJSON(ctx, hc, base.JoinPath("/healthz").String(), &health)
	switch {
	case herr == nil && health["version"] != nil:
		remote, err := dial(ctx)
		if err != nil {
			return nil, nil, nil, err
		}
		return remote.Call, tools, func() { remote.Close() }, nil
	case herr == nil || explicit || !refused(herr):
		return nil, nil, nil, fmt.Errorf("mcp: no vera at %s (%v)", config.RedactText(base.String()), herr)
	}
	if cfg.QdrantURL == nil {
		// The data dir may be relative (./data by default), and an agent
		// starts vera mcp in its own project: never make a store there
		// that no vera reads.
		file := filepath.Join(cfg.Memory.DataDir, embedded.FileName)
		if _, err := os.Stat(file); err != nil {
			abs, _ := filepath.Abs(file)
			return nil, nil, nil, fmt.Errorf("mcp: no vera answers at %s, and there is no store at %s: start vera, or set VERA_DATA_DIR to its data directory", config.RedactText(base.String()), abs)
		}
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn, ReplaceAttr: redactAttr}))
	call := func(ctx context.Context, tool string, args any) (*sdk.CallToolResult, error) {
		a, err := newApp(ctx, cfg, logger, appOptions{Store: true, Tokenizer: true})
		if errors.Is(err, embedded.ErrInUse) {
			// vera started since: the call goes through it.
			remote, derr := dial(ctx)
			if derr != nil {
				return nil, fmt.Errorf("opening the store: %w; and reaching vera: %w", err, derr)
			}
			defer remote.Close()
			return remote.Call(ctx, tool, args)
		}
		if err != nil {
			return nil, fmt.Errorf("opening the store: %w", err)
		}
		defer a.Close()
		return mcp.New(a.memoryService(), Version()).Call(ctx, ns, tool, args)
	}
	return call, tools, func() {}, nil
}
