package app

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/vera-proxy/vera/admin"
	"github.com/vera-proxy/vera/curator"
	"github.com/vera-proxy/vera/memory"
	"github.com/vera-proxy/vera/prompts"
)

// openMemory opens the store and starts the writer and the embedder probe.
// The store is the embedded file, or Qdrant when general.qdrant_host is
// set; either way finished turns are first committed to the local file's
// queue, so a Qdrant outage loses nothing.
func (a *app) openMemory(ctx context.Context, background bool) error {
	if err := a.openLocal(ctx, background); err != nil {
		return err
	}
	model := a.cfg.General.EmbeddingModel
	var space memory.VectorSpacer = a.local
	if a.cfg.QdrantURL != nil {
		if err := a.openQdrant(ctx); err != nil {
			return err
		}
		if err := checkVectorSpace(ctx, a.qdrant, a.embedder, model, a.logger); err != nil {
			return err
		}
		space = a.qdrant
	}
	a.prompts = prompts.New(a.cfg.Prompts.Dir)
	admin.RegisterStore(a.metrics, a.store, a.local)
	a.gate = memory.NewGate(a.embedder, model, space, a.logger)
	if err := a.startHistory(ctx); err != nil {
		return err
	}
	a.startWriter()
	a.backfillTokens()
	a.startDirectory()
	a.startUsage()
	a.builder = a.newBuilder()
	a.commands = &memory.Commands{Store: a.store, Queue: a.local, Skip: a.writer.Forget, Embed: a.gate, Tokens: a.tok, Phrases: a.prompts.Commands,
		MaxTokens: a.cfg.Memory.MaxTurnTokens, History: a.history, Withheld: a.withheld}
	a.curator = a.newCurator()
	a.withheld.Rewrite = a.rewriteWithheld
	if a.qdrant != nil {
		a.logger.Info("memory", slog.String("backend", "qdrant"), slog.String("qdrant", a.qdrant.Addr()),
			slog.String("collection", a.qdrant.Collection()), slog.String("queue", a.local.Path()), slog.String("embedding_model", model))
	} else {
		a.logger.Info("memory", slog.String("backend", "embedded"), slog.String("path", a.local.Path()), slog.String("embedding_model", model))
	}
	return nil
}

// startWriter starts the writer, and the gate's first probe.
func (a *app) startWriter() {
	a.writer = memory.NewWriter(a.store, a.local, a.gate, a.tok, a.logger)
	a.writer.MaxTurnTokens = a.cfg.Memory.MaxTurnTokens
	a.writer.History = a.history
	a.writer.Start()
	a.bgWork.Go(func() {
		a.gate.Settle(a.bg, 30*time.Second)
		// A write that raced the first probe failed with "not available":
		// retry it now, not at the writer's next retry, so health is right.
		a.writer.Nudge()
	})
}

// startDirectory keeps who each namespace is in the local file, flushed
// every few seconds and when the app closes.
func (a *app) startDirectory() {
	a.directory = memory.NewDirectory(a.local)
	a.flushEvery(10*time.Second, "keeping the namespaces seen", a.directory.Flush)
}

// startUsage counts the answers each memory was injected into, in the
// local file, written every two seconds off the chat path and when the
// app closes.
func (a *app) startUsage() {
	a.usage = memory.NewUsage(a.local)
	a.flushEvery(2*time.Second, "counting the memories used", a.usage.Flush)
}

// startHistory keeps the history of every memory in the local file (what
// a failing write refused is written again every two seconds), and reads
// what is withheld from chats.
func (a *app) startHistory(ctx context.Context) error {
	a.history = memory.NewHistory(a.local)
	a.flushEvery(2*time.Second, "keeping the history of memories", a.history.Flush)
	var err error
	a.withheld, err = memory.NewWithheld(ctx, a.local, a.store)
	return err
}

// rewriteWithheld has the curator rewrite namespace ns's withheld
// memories now, in the background; while another run goes it tries again
// every 30 s, for half an hour (the scheduled runs rewrite them too).
func (a *app) rewriteWithheld(ns string) {
	if a.bg.Err() != nil {
		return // closing: the next start rewrites them
	}
	a.bgWork.Go(func() {
		for range 60 {
			if a.curator.RewriteWithheld(a.bg, ns).Status != curator.StatusBusy {
				return
			}
			select {
			case <-a.bg.Done():
				return
			case <-time.After(30 * time.Second):
			}
		}
	})
}

// flushEvery runs flush in the background every period, and once more
// when the app closes; what fails is logged as what.
func (a *app) flushEvery(period time.Duration, what string, flush func(context.Context) error) {
	a.bgWork.Go(func() {
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-a.bg.Done():
				ctx, cancel := context.WithTimeout(context.WithoutCancel(a.bg), 5*time.Second)
				defer cancel()
				if err := flush(ctx); err != nil {
					a.logger.Warn(what, slog.Any("error", err))
				}
				return
			case <-t.C:
				if err := flush(a.bg); err != nil && a.bg.Err() == nil {
					a.logger.Warn(what, slog.Any("error", err))
				}
			}
		}
	})
}

// backfillTokens counts, in the background, the tokens of turns stored by
// earlier versions, whose queue lost their counts.
func (a *app) backfillTokens() {
	ti, terms := a.store.(memory.TermsIndexer)
	tc, tokens := a.store.(memory.TokenCounter)
	if !terms && !tokens {
		return
	}
	a.bgWork.Go(func() {
		// One after the other: re-indexing writes memories whole, and
		// must not race with the counts being set.
		if terms {
			n, err := memory.BackfillTerms(a.bg, ti)
			switch {
			case err != nil && a.bg.Err() == nil:
				a.logger.Warn("indexing stored memories for this version's lexical search", slog.Int("indexed", n), slog.Any("error", err))
			case n > 0:
				a.logger.Info("indexed stored memories for this version's lexical search", slog.Int("indexed", n))
			}
		}
		if tokens {
			n, err := memory.BackfillTokens(a.bg, tc, a.tok.Count)
			switch {
			case err != nil && a.bg.Err() == nil:
				a.logger.Warn("counting the tokens of stored memories", slog.Int("counted", n), slog.Any("error", err))
			case n > 0:
				a.logger.Info("counted the tokens of stored memories", slog.Int("counted", n))
			}
		}
	})
}

func (a *app) newBuilder() *memory.Builder {
	l := a.cfg.Layers
	b := memory.NewBuilder(a.store, a.gate, a.tok)
	b.SemanticBudget = l.SemanticTokenBudget
	b.RecentBudget = l.ContextTokenBudget
	b.Threshold = l.SemanticScoreThreshold
	b.RecentTurns = l.RecentTurns
	b.RulesBudget = l.RulesTokenBudget
	b.ProfileBudget = l.ProfileTokenBudget
	b.SystemPrompt = a.prompts.System
	b.Withheld = a.withheld
	return b
}

func (a *app) newCurator() *curator.Curator {
	name := a.cfg.Curator.CuratorModel
	model := curator.NewOllamaModel(a.ollama, name)
	// Room for a batch (3000 tokens), the prompt, the curated sample and
	// the answer; Ollama's default 4096 would cut the batch.
	model.NumCtx = 8192
	if base, tag, _ := strings.Cut(name, ":"); strings.HasSuffix(base, "-cloud") || strings.HasSuffix(tag, "-cloud") || tag == "cloud" {
		a.logger.Warn("curator.curator_model is one of Ollama's cloud models: every raw turn, private ones too, leaves this machine to be curated; pick a local model to keep them here",
			slog.String("curator_model", name))
	}
	c := &curator.Curator{
		Store: a.store, Model: model, Embedder: a.gate, Tokens: a.tok, Prompts: a.prompts,
		ModelName: name, Location: a.cfg.CuratorLocation, Log: a.logger,
		Observe:       curator.NewMetrics(a.metrics).Observe,
		ProfileTokens: a.cfg.Layers.ProfileTokenBudget,
		MaxTokens:     a.cfg.Memory.MaxTurnTokens,
		History:       a.history,
		Withheld:      a.withheld,
	}
	if q := a.qdrant; q != nil {
		// Instances sharing the collection curate one at a time. A run
		// that outlives the TTL (a crashed holder) frees the lock.
		c.Lock = func(ctx context.Context) (func(), bool, error) { return q.Lock(ctx, "curator", 2*time.Hour) }
	}
	return c
}

// schedule starts the curator's schedule.
func (a *app) schedule() error {
	sched, err := a.curator.Schedule(a.bg, a.cfg.CuratorSpec, a.curator.Location)
	if err != nil {
		return err
	}
	a.sched = sched
	a.logger.Info("curator", slog.String("schedule", a.cfg.CuratorSpec), slog.String("timezone", a.curator.Location.String()),
		slog.String("model", a.curator.ModelName), slog.Time("next_run", sched.Next()))
	for _, ns := range a.withheld.Namespaces() {
		a.rewriteWithheld(ns) // withheld before a restart, or by `vera memories` on the store
	}
	return nil
}
