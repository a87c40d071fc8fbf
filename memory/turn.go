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
}
