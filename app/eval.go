package app

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/vera-proxy/vera/config"
	"github.com/vera-proxy/vera/eval"
	"github.com/vera-proxy/vera/eval/locomo"
	"github.com/vera-proxy/vera/eval/routing"
	"github.com/vera-proxy/vera/memory"
	"github.com/vera-proxy/vera/prompts"
	"github.com/vera-proxy/vera/proxy/tier"
)

// evalCmd runs `vera eval locomo [--budget N] [--embedder ollama|none]
// FILE...` or `vera eval routing [--embedder ollama|none] [--cv K] [FILE]`.
func evalCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "routing" {
		return evalRouting(ctx, args[1:], getenv, stdout, stderr)
	}
	if len(args) == 0 || args[0] != "locomo" {
		return UsageError{"eval: want `vera eval locomo [--budget N] [--embedder ollama|none] [--cv] FILE...` or `vera eval routing [--embedder ollama|none] [--cv K] [FILE]`"}
	}
	fs := flag.NewFlagSet("vera eval locomo", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	budget := fs.Int("budget", 2000, "")
	emb := fs.String("embedder", "ollama", "")
	cv := fs.Bool("cv", false, "")
	var flags config.Flags
	configFlags(fs, &flags)
	files, err := parseFiles(fs, args[1:])
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return UsageError{"eval locomo: no FILE given"}
	}
	if *budget <= 0 {
		return UsageError{"eval locomo: --budget must be positive"}
	}
	var convs []*locomo.Conversation
	for _, f := range files {
		c, err := locomo.Load(f)
		if err != nil {
			return err
		}
		convs = append(convs, c)
	}
	if *emb != "none" && *emb != "ollama" {
		return UsageError{fmt.Sprintf("eval locomo: --embedder must be ollama or none, not %q", *emb)}
	}
	cfg, err := config.Load(flags, getenv)
	if err != nil {
		return err
	}
	// The conversations go into a store of their own, removed afterwards.
	dir, err := os.MkdirTemp("", "vera-eval")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cfg.Memory.DataDir, cfg.QdrantURL = dir, nil
	a, err := newApp(ctx, cfg, newLogger(stderr, cfg.General.Debug), appOptions{Store: true, Tokenizer: true})
	if err != nil {
		return err
	}
	defer a.Close()
	return runLocomo(ctx, a, convs, *emb == "ollama", *budget, *cv, stdout)
}

// runLocomo runs the LoCoMo benchmark on convs in the app's store (with
// the embedder when withEmbedder), or its cross-validation with cv, and
// prints the result as JSON.
func runLocomo(ctx context.Context, a *app, convs []*locomo.Conversation, withEmbedder bool, budget int, cv bool, stdout io.Writer) error {
	var embedder memory.Embedder
	if withEmbedder {
		if _, err := memory.Probe(ctx, a.embedder); err != nil {
			return fmt.Errorf("eval locomo: %w (use --embedder none for lexical retrieval only)", err)
		}
		embedder = a.embedder
	}
	var res any
	var err error
	if cv {
		res, err = locomo.CrossValidate(ctx, convs, a.local, embedder, a.tok, budget, locomo.Grid)
	} else {
		res, err = locomo.Run(ctx, convs, a.local, embedder, a.tok, budget)
	}
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return err
		}
		return fmt.Errorf("eval locomo: %w", err)
	}
	return json.NewEncoder(stdout).Encode(res)
}

// evalRouting runs `vera eval routing [--embedder ollama|none] [--cv K]
// [FILE]`: the tier classifier on labelled queries (the older shipped set
// without FILE), as JSON on stdout; with --cv, the learned stage's
// cross-validation instead (on the shipped corpus without FILE).
func evalRouting(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("vera eval routing", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	emb := fs.String("embedder", "ollama", "")
	cv := fs.Int("cv", 0, "")
	var flags config.Flags
	configFlags(fs, &flags)
	files, err := parseFiles(fs, args)
	if err != nil {
		return err
	}
	if len(files) > 1 {
		return UsageError{"eval routing: at most one FILE"}
	}
	if *cv != 0 {
		embSet := false
		fs.Visit(func(f *flag.Flag) { embSet = embSet || f.Name == "embedder" })
		if embSet && *emb != "none" {
			return UsageError{"eval routing: --cv cross-validates the learned stage alone, without the embedding model: leave --embedder out"}
		}
		return evalRoutingCV(ctx, *cv, files, stdout)
	}
	if *emb != "none" && *emb != "ollama" {
		return UsageError{fmt.Sprintf("eval routing: --embedder must be ollama or none, not %q", *emb)}
	}
	data := eval.RoutingSet
	if len(files) == 1 {
		b, err := os.ReadFile(files[0])
		if err != nil {
			return fmt.Errorf("eval routing: %w", err)
		}
		data = b
	}
	qs, err := routing.Load(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("eval routing: %w", err)
	}
	cfg, err := config.Load(flags, getenv)
	if err != nil {
		return err
	}
	var embedder tier.Embedder
	var examples func() map[tier.Tier][]string
	if *emb == "ollama" {
		a, err := newApp(ctx, cfg, newLogger(stderr, cfg.General.Debug), appOptions{})
		if err != nil {
			return err
		}
		defer a.Close()
		if _, err := memory.Probe(ctx, a.embedder); err != nil {
			return fmt.Errorf("eval routing: %w (use --embedder none for the rules alone)", err)
		}
		embedder = a.embedder
		dir := prompts.New(cfg.Prompts.Dir)
		examples = func() map[tier.Tier][]string { return tierExamples(dir) }
	}
	r, err := newRouter(cfg, embedder, examples)
	if err != nil {
		return err
	}
	return json.NewEncoder(stdout).Encode(routing.Run(ctx, r, qs, *emb))
}

// evalRoutingCV runs `vera eval routing --cv K [FILE]`: the learned
// stage's grouped K-fold cross-validation on FILE, or on the shipped
// corpus with its labels' agreement and the shipped router on the older
// set.
func evalRoutingCV(ctx context.Context, k int, files []string, stdout io.Writer) error {
	data, shipped := eval.RoutingCorpus, len(files) == 0
	if !shipped {
		b, err := os.ReadFile(files[0])
		if err != nil {
			return fmt.Errorf("eval routing: %w", err)
		}
		data = b
	}
	examples, err := routing.ReadExamples(data)
	if err != nil {
		return fmt.Errorf("eval routing: %w", err)
	}
	rep, err := routing.CrossValidate(examples, k)
	if err != nil {
		return UsageError{"eval routing: " + err.Error()}
	}
	if shipped {
		second, err := routing.ReadExamples(eval.RoutingSecond)
		if err != nil {
			return fmt.Errorf("eval routing: the second labelling: %w", err)
		}
		if rep.Agreement, err = routing.Agree(examples, second); err != nil {
			return fmt.Errorf("eval routing: %w", err)
		}
		// The shipped router as it ships: no rules of the user's, and
		// complex allowed.
		r, err := tier.New(nil, nil)
		if err != nil {
			return err
		}
		if rep.Older, err = routing.Older(ctx, r, eval.RoutingSet); err != nil {
			return fmt.Errorf("eval routing: the older set: %w", err)
		}
	}
	return json.NewEncoder(stdout).Encode(rep)
}

// parseFiles parses args with fs and returns the files among them: flags
// may come before or after the files.
func parseFiles(fs *flag.FlagSet, args []string) ([]string, error) {
	var files []string
	for rest := args; ; {
		if err := fs.Parse(rest); err != nil {
			return nil, UsageError{err.Error()}
		}
		if fs.NArg() == 0 {
			return files, nil
		}
		files = append(files, fs.Arg(0))
		rest = fs.Args()[1:]
	}
}
