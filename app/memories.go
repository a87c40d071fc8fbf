package app

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/vera-proxy/vera/admin"

	"github.com/vera-proxy/vera/config"
	"github.com/vera-proxy/vera/memory"
	"github.com/vera-proxy/vera/memory/embedded"
)

const memoriesUsage = `memories: want one of
  vera memories namespaces
  vera memories list   [--namespace NS] [--type raw|curated|rule|profile|forgotten] [--private=true|false] [--since T] [--until T] [--limit N] [--cursor C] [--all] [--oldest]
  vera memories search QUERY [--namespace NS] [--type T] [--limit N]
  vera memories show   ID
  vera memories history ID
  vera memories add    [--namespace NS] [--type curated|rule|profile] TEXT
  vera memories edit   ID [TEXT] [--private=true|false]
  vera memories delete ID... | --namespace NS --confirm
  vera memories erase  --namespace NS --yes
  vera memories export [--namespace NS] [--output FILE]
  vera memories import FILE|-
  vera memories import --from-vera-ai --url QDRANT_URL [--collection NAME] [--namespace NS]
  vera memories import --from-open-webui URL --token TOKEN [--namespace NS]
with --url VERA_URL (default: the listen address), --json for scripts; the admin token comes from VERA_ADMIN_TOKEN.
When no vera answers at the default address, the command works on the store directly.`

// memoriesCmd runs `vera memories ...`: against the running
// vera's admin API, or, when none runs, against the same routes served
// in-process over the store.
func memoriesCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return UsageError{memoriesUsage}
	}
	sub := args[0]
	if sub == "import" && slices.ContainsFunc(args[1:], func(a string) bool { return strings.TrimLeft(a, "-") == "from-vera-ai" }) {
		return importVeraAICmd(ctx, args[1:], getenv, stdout, stderr)
	}
	if sub == "import" && slices.ContainsFunc(args[1:], func(a string) bool {
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		return strings.HasPrefix(a, "-") && name == "from-open-webui"
	}) {
		return importOpenWebUICmd(ctx, args[1:], getenv, stdout, stderr)
	}
	var o memoriesOptions
	var flags config.Flags
	fs := memoriesFlags(sub, &o, &flags)
	pos, err := parseInterleaved(fs, args[1:])
	if err != nil {
		return UsageError{fmt.Sprintf("memories %s: %v", sub, err)}
	}
	cmd, ok := memoriesCommands[sub]
	if !ok {
		return UsageError{fmt.Sprintf("memories: unknown command %q\n%s", sub, memoriesUsage)}
	}
	o.ns = strings.TrimSpace(o.ns)
	fs.Visit(func(f *flag.Flag) { o.nsSet = o.nsSet || f.Name == "namespace" })
	if err := cmd.validate(pos, &o); err != nil {
		return UsageError{fmt.Sprintf("memories %s: %v", sub, err)}
	}
	cfg, err := config.Load(flags, getenv)
	if err != nil {
		return err
	}
	client, done, err := memoriesClient(ctx, cfg, o.url, stderr)
	if err != nil {
		return err
	}
	defer done()
	if o.nsSet {
		client.Scope = o.ns // show, edit, delete ID: within that namespace only
	}
	return cmd.do(ctx, client, pos, o, stdout)
}

// memoriesFlags declares the flags of `vera memories sub`, into o and
// flags.
func memoriesFlags(sub string, o *memoriesOptions, flags *config.Flags) *flag.FlagSet {
	fs := flag.NewFlagSet("vera memories "+sub, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.url, "url", "", "")
	fs.BoolVar(&o.json, "json", false, "")
	fs.StringVar(&o.ns, "namespace", memory.DefaultNamespace, "")
	fs.StringVar(&o.typ, "type", "", "")
	fs.IntVar(&o.limit, "limit", 0, "")
	fs.StringVar(&o.cursor, "cursor", "", "")
	fs.StringVar(&o.since, "since", "", "")
	fs.StringVar(&o.until, "until", "", "")
	fs.BoolVar(&o.all, "all", false, "")
	fs.BoolVar(&o.oldest, "oldest", false, "")
	fs.BoolVar(&o.confirm, "confirm", false, "")
	fs.BoolVar(&o.yes, "yes", false, "")
	fs.StringVar(&o.output, "output", "", "")
	fs.Func("private", "", func(v string) error {
		if v != "true" && v != "false" {
			return errors.New("want --private=true or --private=false")
		}
		o.private = v
		return nil
	})
	configFlags(fs, flags)
	return fs
}

// memoriesOptions are the flags every memories command reads from.
type memoriesOptions struct {
	url, ns, typ, cursor, since, until, output string
	private                                    string // "", "true" or "false"
	limit                                      int
	json, all, confirm, nsSet, yes, oldest     bool
}

// memoriesCommand checks a command's arguments, then runs it.
type memoriesCommand struct {
	validate func(pos []string, o *memoriesOptions) error
	do       func(ctx context.Context, c *admin.Client, pos []string, o memoriesOptions, out io.Writer) error
}

func wantArgs(min, max int, what string) func([]string, *memoriesOptions) error {
	return func(pos []string, _ *memoriesOptions) error {
		if len(pos) < min || max >= 0 && len(pos) > max {
			return fmt.Errorf("want %s", what)
		}
		return nil
	}
}

var memoriesCommands = map[string]memoriesCommand{
	"list":       {validate: wantArgs(0, 0, "no arguments (the namespace is --namespace)"), do: listMemories},
	"namespaces": {validate: wantArgs(0, 0, "no arguments"), do: listNamespaces},
	"search":     {validate: wantArgs(1, -1, "a query: vera memories search \"where does my sister live\""), do: listMemories},
	"show":       {validate: wantArgs(1, 1, "one memory id"), do: showMemory},
	"history":    {validate: wantArgs(1, 1, "one memory id"), do: memoryHistory},
	"add":        {validate: wantArgs(1, -1, "the memory's text"), do: addMemory},
	"edit":       {validate: checkEdit, do: editMemory},
	"delete":     {validate: checkDelete, do: deleteMemories},
	"erase":      {validate: checkErase, do: eraseNamespace},
	"export":     {validate: wantArgs(0, 0, "no arguments (--output FILE, or standard output)"), do: exportMemories},
	"import":     {validate: wantArgs(1, 1, "one JSONL file, or - for standard input"), do: importMemories},
}

func checkDelete(pos []string, o *memoriesOptions) error {
	switch {
	case o.confirm && !o.nsSet:
		return errors.New("forgetting a namespace needs it named: --namespace NS --confirm")
	case len(pos) == 0 && !o.confirm:
		return errors.New("want memory ids, or --namespace NS --confirm to forget a whole namespace")
	case len(pos) > 0 && o.confirm:
		return errors.New("either memory ids or --namespace NS --confirm, not both")
	}
	return nil
}

func checkErase(pos []string, o *memoriesOptions) error {
	if len(pos) > 0 || !o.nsSet || !o.yes {
		return errors.New("erasing everything of one person needs it named and confirmed: --namespace NS --yes")
	}
	return nil
}

// checkEdit wants a memory id, and a new text or --private.
func checkEdit(pos []string, o *memoriesOptions) error {
	if len(pos) == 0 || len(pos) == 1 && o.private == "" {
		return errors.New("want a memory id and its new text, or --private=true|false")
	}
	return nil
}

// parseInterleaved parses flags that come before, between or after the
// positional arguments ("vera memories search bike --namespace alice"),
// and returns those; everything after "--" is positional.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), nil
		}
		if len(rest) == 0 {
			return pos, nil
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
}

// memoriesClient returns a client for the running vera at rawURL (empty:
// the listen address), or, when none answers at the default address, for
// the memory routes served in-process over the store. done releases what
// it opened.
func memoriesClient(ctx context.Context, cfg config.Config, rawURL string, stderr io.Writer) (c *admin.Client, done func(), err error) {
	explicit := rawURL != ""
	if !explicit {
		rawURL = "http://" + admin.DialAddr(cfg.Server.Listen)
	}
	base, err := url.Parse(rawURL)
	if err != nil || base.Host == "" || (base.Scheme != "http" && base.Scheme != "https") {
		return nil, nil, UsageError{fmt.Sprintf("memories: --url %q is not an http:// address of vera", rawURL)}
	}
	hc := &http.Client{Timeout: 5 * time.Minute}
	var health map[string]json.RawMessage
	herr := admin.GetJSON(ctx, hc, base.JoinPath("/healthz").String(), &health)
	switch {
	case herr == nil && health["version"] != nil:
		return &admin.Client{Base: base, Token: cfg.Server.AdminToken, HTTP: hc, UserAgent: "vera/" + Version()}, func() {}, nil
	case herr == nil || explicit || !refused(herr):
		why := "it does not answer /healthz as vera does"
		if herr != nil {
			why = herr.Error()
		}
		return nil, nil, fmt.Errorf("memories: no vera at %s (%s)", config.RedactText(base.String()), why)
	}
	return directClient(ctx, cfg, stderr)
}

// refused reports whether err says nothing listens there.
func refused(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED)
}

// directClient serves the memory routes over the store on a loopback port
// of this process: the same code as a running vera's, nothing to keep in
// step.
func directClient(ctx context.Context, cfg config.Config, stderr io.Writer) (*admin.Client, func(), error) {
	if !cfg.Memory.Enabled {
		return nil, nil, errors.New("memories: memory is off (memory.enabled = false)")
	}
	// Warnings only: the command's output is its answer.
	level := slog.LevelWarn
	if cfg.General.Debug {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level, ReplaceAttr: redactAttr}))
	// The store and the queue (a delete reaches queued turns too); no
	// writer: nothing else writes while no vera runs.
	a, err := newApp(ctx, cfg, logger, appOptions{Store: true, Tokenizer: true})
	if err == nil && a.local == nil {
		// With Qdrant, the queue is still the local file.
		if err = a.openLocal(ctx, false); err != nil {
			a.Close()
		}
	}
	if err == nil && a.qdrant != nil {
		// The collection is made to the embedding model's size, as vera
		// makes it at start.
		if err = checkVectorSpace(ctx, a.qdrant, a.embedder, cfg.General.EmbeddingModel, logger); err != nil {
			a.Close()
		}
	}
	if errors.Is(err, embedded.ErrInUse) {
		return nil, nil, fmt.Errorf("memories: a vera runs on this data dir but does not answer at %s; give its address with --url: %w", cfg.Server.Listen, err)
	}
	if err != nil {
		return nil, nil, err
	}
	gin.SetMode(gin.ReleaseMode)
	e := gin.New()
	adm := admin.New(Version(), a.ollama)
	adm.TrustLoopback = true // its own port, for this command alone
	if a.directory == nil && a.local != nil {
		// Who each namespace is, as the running vera last kept it.
		a.directory = memory.NewDirectory(a.local)
	}
	adm.Memories = a.memoryService()
	adm.Mount(e)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		a.Close()
		return nil, nil, err
	}
	srv := &http.Server{Handler: e, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }() // ends when done closes it
	done := func() {
		srv.Close()
		a.Close()
	}
	return &admin.Client{Base: &url.URL{Scheme: "http", Host: ln.Addr().String()}, UserAgent: "vera/" + Version()}, done, nil
}
