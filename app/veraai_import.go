package app

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/vera-proxy/vera/config"
	"github.com/vera-proxy/vera/memory"
	"github.com/vera-proxy/vera/memory/embedded"
	"github.com/vera-proxy/vera/memory/qdrant"
	"github.com/vera-proxy/vera/memory/veraai"
)

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
		return UsageError{err.Error()}
	}
	switch {
	case fs.NArg() > 0:
		return UsageError{fmt.Sprintf("memories import: unexpected argument %q", fs.Arg(0))}
	case !*fromVeraAI:
		return UsageError{"memories import: want a JSONL file, or --from-vera-ai"}
	case *from == "":
		return UsageError{"memories import --from-vera-ai: --url (the Qdrant holding the Vera-AI collection) is required"}
	case strings.TrimSpace(*ns) == "":
		return UsageError{"memories import: --namespace must not be empty"}
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
