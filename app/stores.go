package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/vera-proxy/vera/memory"
	"github.com/vera-proxy/vera/memory/embedded"
	"github.com/vera-proxy/vera/memory/qdrant"
)

// openStore opens the store the config selects: Qdrant when
// general.qdrant_host is set, else the embedded file.
func (a *app) openStore(ctx context.Context) error {
	if a.cfg.QdrantURL != nil {
		return a.openQdrant(ctx)
	}
	return a.openLocal(ctx, false)
}

// openLocal opens the embedded file in the data dir. It is the store
// unless Qdrant is opened too. In the background, its index loads after
// it returns.
func (a *app) openLocal(ctx context.Context, background bool) error {
	open := embedded.Open
	if background {
		open = embedded.Start
	}
	db, err := open(ctx, a.cfg.Memory.DataDir)
	if err != nil {
		return err
	}
	a.local = db
	if a.qdrant == nil {
		a.store = db
	}
	if background {
		a.bgWork.Go(func() {
			if err := db.Wait(a.bg); err != nil {
				if a.bg.Err() == nil {
					a.logger.Error("memory index", slog.Any("error", err))
				}
				return
			}
			from, took := db.LoadedFrom()
			p, _ := db.Loading()
			a.logger.Info("memory index loaded", slog.Int("memories", p.Total), slog.String("from", from), slog.Duration("took", took))
			// What loading read and dropped (texts, batches) goes back
			// to the system now, not at the next GC cycles.
			debug.FreeOSMemory()
		})
	}
	return nil
}

// openQdrant opens the Qdrant collection, which becomes the store.
func (a *app) openQdrant(ctx context.Context) error {
	q, err := qdrant.Open(ctx, qdrant.Options{URL: a.cfg.QdrantURL.String(), Collection: a.cfg.General.QdrantCollection, APIKey: a.cfg.QdrantAPIKey})
	if err != nil {
		return err
	}
	a.qdrant, a.store = q, q
	return nil
}

// checkVectorSpace makes a Qdrant collection that holds another model's
// vectors a startup error, as the issue of mixed sizes is best caught
// before the first chat. When the embedder or Qdrant cannot be reached yet,
// vera starts anyway (degraded) and the gate checks again later.
func checkVectorSpace(ctx context.Context, q *qdrant.Store, e memory.Embedder, model string, logger *slog.Logger) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	dim, err := memory.Probe(ctx, e)
	if err != nil {
		logger.Warn("embedder not available at start; the Qdrant collection is checked once it is", slog.Any("error", err))
		return nil
	}
	if _, err := q.VectorSpace(ctx, model, dim); err != nil && !errors.Is(err, memory.ErrUnavailable) {
		return err
	}
	return nil
}

// closeStores closes the stores opened so far; a second call does nothing.
func (a *app) closeStores() error {
	// The fields stay set: a /healthz still running after a forced
	// shutdown reads them (and finds the stores closed), it must not
	// find nil.
	if a.storesClosed {
		return nil
	}
	a.storesClosed = true
	var errs []error
	if a.qdrant != nil {
		errs = append(errs, a.qdrant.Close())
	}
	if a.local != nil {
		if err := a.local.Close(); err != nil {
			errs = append(errs, fmt.Errorf("closing the store: %w", err))
		}
	}
	return errors.Join(errs...)
}
