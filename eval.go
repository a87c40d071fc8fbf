package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/vera-proxy/vera/config"
	"github.com/vera-proxy/vera/eval/locomo"
	"github.com/vera-proxy/vera/memory"
)

// evalCmd runs `vera eval locomo [--budget N] [--embedder ollama|none] FILE...`.
func evalCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "locomo" {
		return usageError{"eval: want `vera eval locomo [--budget N] [--embedder ollama|none] FILE...`"}
	}
	fs := flag.NewFlagSet("vera eval locomo", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	budget := fs.Int("budget", 2000, "")
	emb := fs.String("embedder", "ollama", "")
	var flags config.Flags
	fs.StringVar(&flags.ConfigPath, "config", "", "")
	fs.StringVar(&flags.OllamaURL, "ollama-url", "", "")
	// Flags may come before or after the files.
	var files []string
	rest := args[1:]
	for {
		if err := fs.Parse(rest); err != nil {
			return usageError{err.Error()}
		}
		if fs.NArg() == 0 {
			break
		}
		files = append(files, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	if len(files) == 0 {
		return usageError{"eval locomo: no FILE given"}
	}
	if *budget <= 0 {
		return usageError{"eval locomo: --budget must be positive"}
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
		return usageError{fmt.Sprintf("eval locomo: --embedder must be ollama or none, not %q", *emb)}
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
	var embedder memory.Embedder
	if *emb == "ollama" {
		if _, err := memory.Probe(ctx, a.embedder); err != nil {
			return fmt.Errorf("eval locomo: %w (use --embedder none for lexical retrieval only)", err)
		}
		embedder = a.embedder
	}
	res, err := locomo.Run(ctx, convs, a.local, embedder, a.tok, *budget)
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return err
		}
		return fmt.Errorf("eval locomo: %w", err)
	}
	enc := json.NewEncoder(stdout)
	return enc.Encode(res)
}
