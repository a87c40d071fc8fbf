package main

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
	"os"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/vera-proxy/vera/admin"

	"github.com/vera-proxy/vera/config"
	"github.com/vera-proxy/vera/memory"
	"github.com/vera-proxy/vera/memory/embedded"
	"github.com/vera-proxy/vera/memory/qdrant"
	"github.com/vera-proxy/vera/memory/veraai"
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
		return usageError{memoriesUsage}
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
	fs := flag.NewFlagSet("vera memories "+sub, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var o memoriesOptions
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
	var flags config.Flags
	configFlags(fs, &flags)
	pos, err := parseInterleaved(fs, args[1:])
	if err != nil {
		return usageError{fmt.Sprintf("memories %s: %v", sub, err)}
	}
	cmd, ok := memoriesCommands[sub]
	if !ok {
		return usageError{fmt.Sprintf("memories: unknown command %q\n%s", sub, memoriesUsage)}
	}
	o.ns = strings.TrimSpace(o.ns)
	fs.Visit(func(f *flag.Flag) { o.nsSet = o.nsSet || f.Name == "namespace" })
	if err := cmd.validate(pos, &o); err != nil {
		return usageError{fmt.Sprintf("memories %s: %v", sub, err)}
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

// eraseNamespace erases a namespace and prints the receipt.
func eraseNamespace(ctx context.Context, c *admin.Client, _ []string, o memoriesOptions, out io.Writer) error {
	r, err := c.EraseNamespace(ctx, o.ns)
	if err != nil {
		return err
	}
	if o.json {
		return writeJSON(out, r)
	}
	fmt.Fprintf(out, "erased namespace %q at %s:", r.Namespace, r.At.Format(time.RFC3339))
	for _, k := range []string{"raw", "curated", "rule", "profile", "forgotten", "queued", "plans"} {
		fmt.Fprintf(out, " %s %d", k, r.Erased[k])
	}
	fmt.Fprintln(out)
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
		return nil, nil, usageError{fmt.Sprintf("memories: --url %q is not an http:// address of vera", rawURL)}
	}
	hc := &http.Client{Timeout: 5 * time.Minute}
	var health map[string]json.RawMessage
	herr := admin.GetJSON(ctx, hc, base.JoinPath("/healthz").String(), &health)
	switch {
	case herr == nil && health["version"] != nil:
		return &admin.Client{Base: base, Token: cfg.Server.AdminToken, HTTP: hc, UserAgent: "vera/" + version}, func() {}, nil
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
	adm := admin.New(version, a.ollama)
	adm.TrustLoopback = true // its own port, for this command alone
	if a.directory == nil && a.local != nil {
		// Who each namespace is, as the running vera last kept it.
		a.directory = memory.NewDirectory(a.local)
	}
	adm.Memories = a.adminMemories()
	adm.Mount(e)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		a.Close()
		return nil, nil, err
	}
	srv := &http.Server{Handler: e, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	done := func() {
		srv.Close()
		a.Close()
	}
	return &admin.Client{Base: &url.URL{Scheme: "http", Host: ln.Addr().String()}, UserAgent: "vera/" + version}, done, nil
}

func listMemories(ctx context.Context, c *admin.Client, pos []string, o memoriesOptions, out io.Writer) error {
	q := admin.ListQuery{Namespace: o.ns, Type: o.typ, Q: strings.Join(pos, " "), Cursor: o.cursor, Limit: o.limit, Private: o.private}
	if o.oldest {
		q.Order = "oldest"
	}
	for _, t := range []struct {
		flag, v string
		dst     *time.Time
	}{{"since", o.since, &q.Since}, {"until", o.until, &q.Until}} {
		if t.v == "" {
			continue
		}
		v, err := time.Parse(time.RFC3339, t.v)
		if err != nil {
			if v, err = time.ParseInLocation(time.DateOnly, t.v, time.Local); err != nil {
				return usageError{fmt.Sprintf("memories: --%s %q: want a date (2026-11-22) or an RFC 3339 time (2026-11-22T10:00:00Z)", t.flag, t.v)}
			}
		}
		*t.dst = v
	}
	var all admin.Page
	for {
		page, err := c.List(ctx, q)
		if err != nil {
			return err
		}
		all.Memories = append(all.Memories, page.Memories...)
		all.NextCursor = page.NextCursor
		if !o.all || q.Q != "" || page.NextCursor == "" {
			break
		}
		q.Cursor = page.NextCursor
	}
	if o.json {
		return writeJSON(out, all)
	}
	writeTable(out, all.Memories, q.Q != "")
	switch {
	case len(all.Memories) == 0:
		fmt.Fprintf(out, "no memories in namespace %q\n", o.ns)
	case all.NextCursor != "":
		fmt.Fprintf(out, "%d shown; more with --cursor %s (or --all)\n", len(all.Memories), all.NextCursor)
	}
	return nil
}

// listNamespaces prints who each namespace is, with its counts, when it
// last chatted and the start of its profile.
func listNamespaces(ctx context.Context, c *admin.Client, _ []string, o memoriesOptions, out io.Writer) error {
	all, err := c.Namespaces(ctx)
	if err != nil {
		return err
	}
	if o.json {
		return writeJSON(out, map[string]any{"namespaces": all})
	}
	if len(all) == 0 {
		fmt.Fprintln(out, "no namespaces yet")
		return nil
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAMESPACE\tNAME\tEMAIL\tRAW\tCURATED\tRULES\tPROFILE\tFORGOTTEN\tLAST SEEN (UTC)\tPROFILE TEXT")
	for _, n := range all {
		seen := "-"
		if n.LastSeen != nil {
			seen = n.LastSeen.UTC().Format("2006-01-02 15:04")
		}
		k := n.Counts
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\t%s\n", n.Namespace, oneLine(n.Name, 40), oneLine(n.Email, 40),
			k["raw"], k["curated"], k["rule"], k["profile"], k["forgotten"], seen, oneLine(n.Profile, 60))
	}
	return tw.Flush()
}

func showMemory(ctx context.Context, c *admin.Client, pos []string, o memoriesOptions, out io.Writer) error {
	m, err := c.Get(ctx, pos[0])
	if err != nil {
		return err
	}
	if o.json {
		return writeJSON(out, m)
	}
	es, err := c.History(ctx, pos[0])
	if err != nil {
		return err
	}
	if err := printMemory(out, m, false); err != nil {
		return err
	}
	if len(es) > 0 {
		fmt.Fprintln(out, "\nhistory:")
		writeHistory(out, es)
	}
	return nil
}

// memoryHistory prints what changed a memory, and who, oldest first; an
// erased memory still has its history (which holds no text).
func memoryHistory(ctx context.Context, c *admin.Client, pos []string, o memoriesOptions, out io.Writer) error {
	es, err := c.History(ctx, pos[0])
	if err != nil {
		return err
	}
	if o.json {
		return writeJSON(out, map[string]any{"history": es})
	}
	if len(es) == 0 {
		fmt.Fprintf(out, "%s has no history: it was written before vera kept one.\n", pos[0])
		return nil
	}
	writeHistory(out, es)
	return nil
}

func writeHistory(out io.Writer, es []memory.Entry) {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME (UTC)\tACTION\tBY")
	for _, e := range es {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", e.At.UTC().Format(time.DateTime), e.Action, e.Actor)
	}
	tw.Flush()
}

func addMemory(ctx context.Context, c *admin.Client, pos []string, o memoriesOptions, out io.Writer) error {
	typ := o.typ
	if typ == "" {
		typ = string(memory.Curated)
	}
	m, err := c.Add(ctx, o.ns, typ, strings.Join(pos, " "))
	if err != nil {
		return err
	}
	return printMemory(out, m, o.json)
}

// checkEdit wants a memory id, and a new text or --private.
func checkEdit(pos []string, o *memoriesOptions) error {
	if len(pos) == 0 || len(pos) == 1 && o.private == "" {
		return errors.New("want a memory id and its new text, or --private=true|false")
	}
	return nil
}

func editMemory(ctx context.Context, c *admin.Client, pos []string, o memoriesOptions, out io.Writer) error {
	patch := map[string]any{}
	if len(pos) > 1 {
		patch["text"] = strings.Join(pos[1:], " ")
	}
	if o.private != "" {
		patch["metadata"] = map[string]any{memory.MetaPrivate: o.private == "true"}
	}
	m, err := c.Patch(ctx, pos[0], patch)
	if err != nil {
		return err
	}
	return printMemory(out, m, o.json)
}

func deleteMemories(ctx context.Context, c *admin.Client, pos []string, o memoriesOptions, out io.Writer) error {
	if o.confirm {
		n, err := c.ForgetNamespace(ctx, o.ns)
		if err != nil {
			return err
		}
		if o.json {
			return writeJSON(out, map[string]any{"namespace": o.ns, "forgotten": n})
		}
		fmt.Fprintf(out, "forgot namespace %q: %d memories and queued turns\n", o.ns, n)
		return nil
	}
	for _, id := range pos {
		if err := c.Delete(ctx, id); err != nil {
			return fmt.Errorf("deleting %s: %w", id, err)
		}
		if !o.json {
			fmt.Fprintf(out, "deleted %s\n", id)
		}
	}
	if o.json {
		return writeJSON(out, map[string]any{"deleted": pos})
	}
	return nil
}

func exportMemories(ctx context.Context, c *admin.Client, _ []string, o memoriesOptions, out io.Writer) error {
	ns := o.ns
	if !o.nsSet {
		ns = "" // every namespace unless one is named
	}
	if o.output == "" || o.output == "-" {
		return c.Export(ctx, ns, out)
	}
	f, err := os.Create(o.output)
	if err != nil {
		return err
	}
	if err := c.Export(ctx, ns, f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func importMemories(ctx context.Context, c *admin.Client, pos []string, o memoriesOptions, out io.Writer) error {
	var in io.Reader = os.Stdin
	if pos[0] != "-" {
		f, err := os.Open(pos[0])
		if err != nil {
			return err
		}
		defer f.Close()
		in = f
	}
	rep, err := c.Import(ctx, in)
	if err != nil {
		return err
	}
	if o.json {
		if err := writeJSON(out, rep); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(out, "imported %d memories\n", rep.Imported)
		for _, e := range rep.Errors {
			fmt.Fprintf(out, "line %d: %s\n", e.Line, e.Error)
		}
		if more := rep.ErrorCount - len(rep.Errors); more > 0 {
			fmt.Fprintf(out, "... and %d more bad lines\n", more)
		}
	}
	// A vera from before error_count sends only the list.
	if bad := max(rep.ErrorCount, len(rep.Errors)); bad > 0 {
		return fmt.Errorf("memories import: %d lines were not imported (the others were)", bad)
	}
	return nil
}

func writeJSON(out io.Writer, v any) error {
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// writeTable prints memories one per line, their text cut to one line.
func writeTable(out io.Writer, ms []admin.Memory, scored bool) {
	if len(ms) == 0 {
		return
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	head := "ID\tTYPE\tTIME (UTC)\t"
	if scored {
		head += "SCORE\t"
	}
	fmt.Fprintln(tw, head+"TEXT")
	for _, m := range ms {
		row := fmt.Sprintf("%s\t%s\t%s\t", m.ID, m.Type, m.Timestamp.UTC().Format("2006-01-02 15:04"))
		if scored {
			score := 0.0
			if m.Score != nil {
				score = *m.Score
			}
			row += fmt.Sprintf("%.3f\t", score)
		}
		fmt.Fprintln(tw, row+oneLine(m.Text, 80))
	}
	tw.Flush()
}

// oneLine cuts text to one line of at most n runes.
func oneLine(text string, n int) string {
	text = strings.Join(strings.Fields(text), " ")
	if r := []rune(text); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return text
}

func printMemory(out io.Writer, m admin.Memory, asJSON bool) error {
	if asJSON {
		return writeJSON(out, m)
	}
	fmt.Fprintf(out, "id:         %s\nnamespace:  %s\ntype:       %s\ntime (UTC): %s\n", m.ID, m.Namespace, m.Type, m.Timestamp.UTC().Format(time.RFC3339))
	if m.Model != "" {
		fmt.Fprintf(out, "model:      %s\n", m.Model)
	}
	fmt.Fprintf(out, "from:       %s\n", sourceLine(m.Metadata))
	if why := memory.PrivateWhy(memory.Memory{Metadata: m.Metadata}); memory.IsPrivate(memory.Memory{Metadata: m.Metadata}) {
		fmt.Fprintf(out, "private:    yes (%s): never sent to a model whose policy is shareable\n", strings.Join(why, ", "))
	}
	if m.LastUsed != nil {
		answers := "answers"
		if m.UsedCount == 1 {
			answers = "answer"
		}
		fmt.Fprintf(out, "used:       in %d %s, last %s\n", m.UsedCount, answers, m.LastUsed.UTC().Format(time.RFC3339))
	} else {
		fmt.Fprintf(out, "used:       never\n")
	}
	if len(m.Metadata) > 0 {
		md, _ := json.Marshal(m.Metadata)
		fmt.Fprintf(out, "metadata:   %s\n", md)
	}
	fmt.Fprintf(out, "\n%s\n", m.Text)
	return nil
}

// sourceLine says where a memory came from (metadata.source) in a line:
// "chat (ollama-chat, chat trip-1, ollama/0.24.0, llama3)"; "unknown" for
// one written before vera kept it.
func sourceLine(md map[string]any) string {
	src, _ := md[memory.MetaSource].(map[string]any)
	via, _ := src["via"].(string)
	if via == "" {
		return "unknown"
	}
	var parts []string
	for _, k := range []string{"dialect", "chat_id", "client", "model", "request_id"} {
		if v, _ := src[k].(string); v != "" {
			if k == "chat_id" {
				v = "chat " + v
			}
			if k == "request_id" {
				v = "request " + v
			}
			parts = append(parts, v)
		}
	}
	if chats, _ := src["chats"].([]any); len(chats) > 0 {
		parts = append(parts, fmt.Sprintf("from %d chats", len(chats)))
	}
	if from, _ := src["from"].(string); from != "" {
		until, _ := src["until"].(string)
		parts = append(parts, "turns of "+from+" to "+until)
	}
	if len(parts) == 0 {
		return via
	}
	return via + " (" + strings.Join(parts, ", ") + ")"
}

// importVeraAICmd runs `vera memories import --from-vera-ai`.
func importVeraAICmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("vera memories import", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fromVeraAI := fs.Bool("from-vera-ai", false, "")
	from := fs.String("url", "", "")
	collection := fs.String("collection", "memories", "")
	ns := fs.String("namespace", memory.DefaultNamespace, "")
	var flags config.Flags
	configFlags(fs, &flags)
	if err := fs.Parse(args); err != nil {
		return usageError{err.Error()}
	}
	switch {
	case fs.NArg() > 0:
		return usageError{fmt.Sprintf("memories import: unexpected argument %q", fs.Arg(0))}
	case !*fromVeraAI:
		return usageError{"memories import: want a JSONL file, or --from-vera-ai"}
	case *from == "":
		return usageError{"memories import --from-vera-ai: --url (the Qdrant holding the Vera-AI collection) is required"}
	case strings.TrimSpace(*ns) == "":
		return usageError{"memories import: --namespace must not be empty"}
	}
	cfg, err := config.Load(flags, getenv)
	if err != nil {
		return err
	}
	a, err := newApp(ctx, cfg, newLogger(stderr, cfg.General.Debug), appOptions{Store: true, Tokenizer: true})
	if errors.Is(err, embedded.ErrInUse) {
		return fmt.Errorf("stop vera before importing into its embedded store: %w", err)
	}
	if err != nil {
		return err
	}
	defer a.Close()
	rep, err := importVeraAI(ctx, a, *from, *collection, *ns)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(stdout)
	return enc.Encode(rep)
}

// importVeraAI copies a Vera-AI collection into the app's store (the one
// the config selects), re-embedding each memory with vera's model.
func importVeraAI(ctx context.Context, a *app, from, collection, ns string) (veraai.Report, error) {
	model := a.cfg.General.EmbeddingModel
	embedder, tok := a.embedder, a.tok
	dim, embedErr := memory.Probe(ctx, embedder)

	var space memory.VectorSpacer = a.local
	if q := a.qdrant; q != nil {
		if _, src, _ := qdrant.ClientConfig(from); src == q.Addr() && collection == q.Collection() {
			return veraai.Report{}, fmt.Errorf("the Vera-AI collection %q is the one vera is configured to use: set general.qdrant_collection (VERA_QDRANT_COLLECTION) to another name", collection)
		}
		if embedErr != nil {
			return veraai.Report{}, fmt.Errorf("importing into Qdrant needs the embedding model to create the collection: %w", embedErr)
		}
		space = q
	}
	if embedErr == nil {
		if _, err := space.VectorSpace(ctx, model, dim); err != nil {
			return veraai.Report{}, err
		}
	}
	store := a.store
	withVectors := 0
	rep, err := veraai.Read(ctx, from, a.cfg.QdrantAPIKey, collection, ns, 64, func(ms []memory.Memory) error {
		texts := make([]string, len(ms))
		for i := range ms {
			// Capped as vera's own memories are: an exchange as a turn,
			// anything else as a statement.
			if u, as, ok := memory.ParseExchange(ms[i].Text); ok {
				ms[i].Text, ms[i].Tokens = memory.CapExchange(tok, u, as, a.cfg.Memory.MaxTurnTokens)
			} else {
				ms[i].Text, ms[i].Tokens, _ = memory.CapText(tok, ms[i].Text, a.cfg.Memory.MaxTurnTokens)
			}
			texts[i] = ms[i].Text
			memory.Classify(&ms[i])
		}
		if embedErr == nil {
			// Without vectors now, the backfill of a running vera makes them.
			if vecs, err := embedder.Embed(ctx, texts); err == nil {
				for i := range ms {
					ms[i].Vector = vecs[i]
				}
				withVectors += len(ms)
			}
		}
		var fresh []memory.Memory // new here: an import run again changes nothing
		for _, m := range ms {
			if _, err := store.Get(ctx, m.ID); errors.Is(err, memory.ErrNotFound) {
				fresh = append(fresh, m)
			}
		}
		if err := store.Upsert(ctx, ms...); err != nil {
			return err
		}
		a.history.Record(ctx, memory.ViaImport, memory.Created, fresh...)
		return nil
	})
	rep.Embedded = withVectors
	return rep, err
}
