package memory

import (
	"context"
	"fmt"
)

// TokenCounter is a store that can list the memories whose token count is
// unknown (Tokens 0: stored before counts were kept, or by a path that did
// not count) and set their counts. Both backends implement it.
type TokenCounter interface {
	// ZeroTokens pages, in a stable order and across every namespace,
	// through the memories whose Tokens is 0, each with at least its ID
	// and Text. An empty cursor starts at the beginning; an empty next
	// cursor means the end. Setting the counts of a page does not disturb
	// the paging.
	ZeroTokens(ctx context.Context, cursor string, limit int) (page []Memory, next string, err error)
	// SetTokens sets the token count of each memory by ID, and nothing
	// else (text, vector and the rest stay as they are). Only counts still
	// unknown are set, so a count written meanwhile by an Upsert wins.
	// Unknown IDs and counts below 1 are ignored.
	SetTokens(ctx context.Context, counts map[string]int) error
}

// backfillPage is how many memories BackfillTokens counts per round trip.
const backfillPage = 256

// BackfillTokens counts the tokens of every stored memory whose count is
// unknown, a page at a time, until none is left or ctx ends; count is the
// tokenizer (text.Tokenizer.Count). It is meant to run in the background after
// start: memories without a count are still usable meanwhile (the context
// builder counts them on the fly). A memory whose text counts 0 tokens (an
// empty text) is recorded as 1, so it is not counted again at every start.
// It returns how many counts it wrote, and ctx's error if ctx ended first.
func BackfillTokens(ctx context.Context, s TokenCounter, count func(string) int) (int, error) {
	return backfill(ctx, "token backfill", s.ZeroTokens, func(page []Memory) error {
		counts := make(map[string]int, len(page))
		for _, m := range page {
			counts[m.ID] = max(count(m.Text), 1)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		return s.SetTokens(ctx, counts)
	})
}

// backfill pages through what pageOf lists, a page at a time, applying
// fix to each, until none is left or ctx ends; it returns how many
// memories it fixed.
func backfill(ctx context.Context, what string, pageOf func(ctx context.Context, cursor string, limit int) ([]Memory, string, error), fix func([]Memory) error) (int, error) {
	done := 0
	cursor := ""
	for {
		if err := ctx.Err(); err != nil {
			return done, err
		}
		page, next, err := pageOf(ctx, cursor, backfillPage)
		if err != nil {
			return done, fmt.Errorf("%s: %w", what, err)
		}
		if len(page) > 0 {
			if err := fix(page); err != nil {
				if ctx.Err() != nil {
					return done, ctx.Err()
				}
				return done, fmt.Errorf("%s: %w", what, err)
			}
			done += len(page)
		}
		if next == "" {
			return done, nil
		}
		if next == cursor {
			// A store that does not move on would loop forever.
			return done, fmt.Errorf("%s: the store returned cursor %q again", what, next)
		}
		cursor = next
	}
}

// TermsIndexer is a store that keeps the terms of lexical search with each
// memory (Qdrant's sparse vectors), built by Terms: it lists the memories
// whose terms an older version of Terms built, and indexes them again.
// The embedded store builds its index at start and needs neither.
type TermsIndexer interface {
	// StaleTerms pages through the memories indexed by another
	// text.TermsVersion, each with at least its ID and Text, across every
	// namespace.
	StaleTerms(ctx context.Context, cursor string, limit int) (page []Memory, next string, err error)
	// Reindex indexes memories again with this version of Terms, writing
	// nothing else: a change made meanwhile stays.
	Reindex(ctx context.Context, ms ...Memory) error
}

// BackfillTerms indexes again, a page at a time, every memory a former
// version of Terms indexed, until none is left or ctx ends. Meanwhile
// lexical search still finds those memories by the words both versions
// share. It returns how many it indexed.
func BackfillTerms(ctx context.Context, s TermsIndexer) (int, error) {
	return backfill(ctx, "terms backfill", s.StaleTerms, func(page []Memory) error { return s.Reindex(ctx, page...) })
}
