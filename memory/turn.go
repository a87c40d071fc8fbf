// Package memory is what vera remembers: finished chat turns, the stores
// that keep them and the context builder that injects them into new chats.
package memory

import "time"

// DefaultNamespace scopes requests that carry no namespace header.
const DefaultNamespace = "default"

// Turn is one finished exchange: the last user message and the assistant's
// whole answer (content only; thinking and tool calls are not kept).
type Turn struct {
	Namespace string
	Model     string
	User      string
	Assistant string
	Time      time.Time // UTC, when the answer finished
	// ID, when set, is the ID the turn is stored under (the caller
	// remembers it, to replace the turn later); empty: a new one.
	ID string
	// Replaces is the ID of a turn this one replaces (a regenerated or
	// edited answer): once this turn is stored, that one is
	// deleted, from the store or from the durable queue.
	Replaces string
	// Private lists the reasons of the private memories its request was
	// sent: the answer may repeat them, so the turn is private for them.
	Private []string
	// Source is where the turn came from (metadata.source); Via empty:
	// none recorded.
	Source Source
}

// MetaReplaces is the metadata key under which a turn carries the ID of
// the turn it replaces, through the durable queue and into the store.
const MetaReplaces = "replaces"
