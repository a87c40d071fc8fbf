package memory

import (
	"slices"

	"github.com/vera-proxy/vera/memory/private"
)

// Private memories: a memory whose text holds contact details, payment
// data, a secret or a password (the detectors, memory/private), or that
// the curator or the person marked, is private; a model's policy decides
// whether private memories go with its chats.

// Metadata keys of a private memory.
const (
	// MetaPrivate is true on a private memory.
	MetaPrivate = "private"
	// MetaPrivateWhy lists why: email, phone, card, iban, secret,
	// password (the detectors), curator, user.
	MetaPrivateWhy = "private_why"
)

// Why a memory was marked private by hand or by the curator.
const (
	ByCurator = "curator"
	ByUser    = "user"
)

// Policy is what a model is sent of memory.
type Policy string

// Policies (cloud.memory, [memory.models]).
const (
	// All memories: local models, by default.
	All Policy = "all"
	// Shareable memories only: none private. Cloud models, by default.
	Shareable Policy = "shareable"
	// None: nothing remembered goes with the chat (it is still recorded).
	None Policy = "none"
)

// Valid reports whether p is one of the policies.
func (p Policy) Valid() bool { return p == All || p == Shareable || p == None }

// IsPrivate reports whether m is private.
func IsPrivate(m Memory) bool {
	v, _ := m.Metadata[MetaPrivate].(bool)
	return v
}

// MarkPrivate returns md with the memory marked private for why (added to
// the reasons it had), or, with private false, unmarked: "private": false
// stays, so that the detectors do not mark again what a person unmarked.
// A copy: md is not changed.
func MarkPrivate(md map[string]any, private bool, why ...string) map[string]any {
	out := make(map[string]any, len(md)+2)
	for k, v := range md {
		out[k] = v
	}
	if !private {
		delete(out, MetaPrivateWhy)
		out[MetaPrivate] = false
		return out
	}
	reasons := PrivateWhy(Memory{Metadata: md})
	for _, w := range why {
		if !slices.Contains(reasons, w) {
			reasons = append(reasons, w)
		}
	}
	list := make([]any, len(reasons))
	for i, r := range reasons {
		list[i] = r
	}
	out[MetaPrivate], out[MetaPrivateWhy] = true, list
	return out
}

// PrivateWhy lists why m is private.
func PrivateWhy(m Memory) []string {
	var out []string
	switch l := m.Metadata[MetaPrivateWhy].(type) {
	case []string:
		out = append(out, l...)
	case []any:
		for _, x := range l {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
	}
	return out
}

// Unmarked reports whether a person unmarked m ("private": false).
func Unmarked(m Memory) bool {
	v, ok := m.Metadata[MetaPrivate].(bool)
	return ok && !v
}

// Classify marks m private for what the detectors (memory/private) find
// in its text, keeping the reasons it had; a memory a person unmarked
// stays unmarked. Every write path runs it: chat turns, commands, what is
// added or edited by hand, over MCP or imported, what the curator writes.
func Classify(m *Memory) {
	if Unmarked(*m) {
		return
	}
	if why := private.Detect(m.Text); len(why) > 0 {
		m.Metadata = MarkPrivate(m.Metadata, true, why...)
	}
}
