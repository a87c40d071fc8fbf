// Command train makes the tier classifier's weights from the labelled
// corpus: it chooses the hyperparameters by a grouped cross-validation of
// the corpus, trains on all of it, and writes the model. proxy/tier runs
// it through `go generate`; a test there runs it again and compares.
//
//	go run ./proxy/tier/learn/train -o proxy/tier/model.json eval/testdata/routing-corpus.jsonl
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/vera-proxy/vera/proxy/tier/learn"
)

func main() {
	out := flag.String("o", "model.json", "where to write the model")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: train [-o model.json] CORPUS.jsonl")
		os.Exit(2)
	}
	if err := run(flag.Arg(0), *out); err != nil {
		fmt.Fprintln(os.Stderr, "train:", err)
		os.Exit(1)
	}
}

func run(corpus, out string) error {
	f, err := os.Open(corpus)
	if err != nil {
		return err
	}
	defer f.Close()
	examples, err := learn.ReadExamples(f)
	if err != nil {
		return fmt.Errorf("%s: %w", corpus, err)
	}
	return os.WriteFile(out, learn.Generate(examples).Marshal(), 0o644)
}
