package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/vera-proxy/vera/memory"
)

// instructions tell a model what the server is for.
const instructions = "vera is the user's long-term memory, shared by their chats and tools. " +
	"Search it before answering anything that may depend on who the user is, what they said before, their people, projects, preferences or decisions. " +
	"Add a memory only for a durable fact about the user that they would want remembered, never for the content of the current task."

var (
	searchTool = &sdk.Tool{Name: "search_memories", Description: "Search the user's memories, scored as vera's own chats recall them (hybrid: meaning and words). " +
		"Use it before answering a question that may depend on the user's life, people, projects, preferences or earlier decisions. " +
		"A memory marked past was replaced by a newer one."}
	addTool = &sdk.Tool{Name: "add_memory", Description: "Remember a durable fact about the user (who they are, their people, work, preferences, decisions), " +
		"as one short self-contained sentence. Later chats and tools recall it. Not for the content of the current task or conversation."}
	updateTool = &sdk.Tool{Name: "update_memory", Description: "Correct a curated memory's text (by its id, from search_memories or list_memories). It is embedded again. " +
		"Only curated memories (distilled facts) can be corrected: chat turns are a record of what was said, " +
		"and rules and the profile are read-only here (they change through vera's curator, the user's own chat commands or the admin API)."}
	forgetTool = &sdk.Tool{Name: "forget_memory", Description: "Forget a curated memory or a chat turn (by its id): it is hidden, never recalled again, and taken out of running chats; an admin can restore it. " +
		"Rules and the profile are read-only here (they change through vera's curator, the user's own chat commands or the admin API)."}
	listTool = &sdk.Tool{Name: "list_memories", Description: "List the user's memories, newest first: type raw (chat turns), curated (distilled facts), rule, profile or forgotten; since an RFC 3339 time."}
)

// Memory is a MEMORY as the tools answer it: memory.JSON, as the admin
// API answers it (with the score of a search), and whether a newer memory
// replaced it.
type Memory struct {
	memory.JSON
	Past bool `json:"past,omitempty"`
}

func toMemory(m memory.Memory) Memory {
	return Memory{JSON: memory.JSONOf(m), Past: m.Metadata["superseded_by"] != nil}
}

// Found is the answer of search_memories and list_memories.
type Found struct {
	Memories []Memory `json:"memories"`
}

// ID is the answer of add_memory, update_memory and forget_memory.
type ID struct {
	ID string `json:"id"`
}

type searchIn struct {
	Query string `json:"query" jsonschema:"what to look for, as a question or keywords"`
	Limit int    `json:"limit,omitempty" jsonschema:"how many memories at most (1 to 50, default 10)"`
}

type addIn struct {
	Content string `json:"content" jsonschema:"the fact, one short self-contained sentence"`
	Private *bool  `json:"private,omitempty" jsonschema:"true: it never leaves this machine (never sent to a cloud model); vera also marks it when it finds contact details, payment data, secrets or passwords"`
}

type updateIn struct {
	ID      string `json:"id" jsonschema:"the memory's id"`
	Content string `json:"content,omitempty" jsonschema:"its new text (leave out to only mark it private)"`
	Private *bool  `json:"private,omitempty" jsonschema:"true: it never leaves this machine; only the person can unmark one (the admin page, API or CLI)"`
}

// privateArg checks an agent's private argument: it may mark a memory
// private, never unmark one (an agent steered by a document must not send
// a person's secrets to the cloud).
func privateArg(p *bool) error {
	if p != nil && !*p {
		return badArg("private", "an agent cannot unmark a private memory: only the person can (vera's page, admin API or `vera memories edit ID --private=false`)")
	}
	return nil
}

type forgetIn struct {
	ID string `json:"id" jsonschema:"the memory's id"`
}

type listIn struct {
	Type  string `json:"type,omitempty" jsonschema:"raw, curated, rule, profile or forgotten; default: raw and curated"`
	Limit int    `json:"limit,omitempty" jsonschema:"how many memories at most (1 to 200, default 20)"`
	Since string `json:"since,omitempty" jsonschema:"only memories from this RFC 3339 time on, such as 2026-11-22T10:00:00Z"`
}

// tools are one namespace's.
type tools struct {
	s  *Server
	ns string
}

// badArg is a tool error that names the argument.
func badArg(name, why string) error { return fmt.Errorf("argument %q: %s", name, why) }

func limitOf(n, def, max int) (int, error) {
	switch {
	case n == 0:
		return def, nil
	case n < 1 || n > max:
		return 0, badArg("limit", fmt.Sprintf("want a number from 1 to %d", max))
	}
	return n, nil
}

func (t tools) search(ctx context.Context, _ *sdk.CallToolRequest, in searchIn) (*sdk.CallToolResult, Found, error) {
	q := strings.TrimSpace(in.Query)
	if q == "" {
		return nil, Found{}, badArg("query", "must not be empty")
	}
	limit, err := limitOf(in.Limit, 10, 50)
	if err != nil {
		return nil, Found{}, err
	}
	hits, err := t.s.Memories.Search(ctx, memory.Filter{Namespace: t.ns, Types: []memory.Type{memory.Raw, memory.Curated}}, q, limit)
	if err != nil {
		return nil, Found{}, fmt.Errorf("searching memory: %w", err)
	}
	out := Found{Memories: []Memory{}}
	for _, h := range hits {
		if t.s.Memories.Withholds(h.ID) || memory.IsPrivate(h.Memory) {
			continue // an agent is often a cloud model's: private memories stay here
		}
		m := toMemory(h.Memory)
		score := h.Score
		m.Score = &score
		out.Memories = append(out.Memories, m)
	}
	return answer(fmt.Sprintf("%d memories match %q.", len(out.Memories), q), out), out, nil
}

func (t tools) add(ctx context.Context, req *sdk.CallToolRequest, in addIn) (*sdk.CallToolResult, ID, error) {
	ctx = memory.WithActor(ctx, memory.ViaMCP) // its changes are an agent's
	text := strings.TrimSpace(in.Content)
	if text == "" {
		return nil, ID{}, badArg("content", "must not be empty")
	}
	if err := privateArg(in.Private); err != nil {
		return nil, ID{}, err
	}
	src := memory.Source{Via: memory.ViaMCP}
	if req != nil && req.Session != nil {
		if p := req.Session.InitializeParams(); p != nil && p.ClientInfo != nil {
			src.Client = memory.ClientOf(p.ClientInfo.Name + "/" + p.ClientInfo.Version)
		}
	}
	md := memory.WithSource(nil, src)
	if in.Private != nil {
		md = memory.MarkPrivate(md, true, memory.ByUser)
	}
	m, err := t.s.Memories.Add(ctx, memory.Memory{ID: memory.NewID(), Namespace: t.ns, Type: memory.Curated, Text: text,
		Time: time.Now().UTC(), Model: "mcp", Metadata: md})
	if err != nil {
		return nil, ID{}, writeFailed(err)
	}
	out := ID{ID: m.ID}
	return answer("Remembered as "+m.ID+".", out), out, nil
}

// own reads a memory of the namespace, for the tools that change one.
func (t tools) own(ctx context.Context, id string) (memory.Memory, error) {
	id = strings.TrimSpace(id)
	if id == "" {
		return memory.Memory{}, badArg("id", "must not be empty")
	}
	m, err := t.s.Memories.Get(ctx, t.ns, id)
	if err != nil {
		if errors.Is(err, memory.ErrNotFound) {
			return m, badArg("id", fmt.Sprintf("no memory %q", id))
		}
		return m, fmt.Errorf("reading memory: %w", err)
	}
	return m, nil
}

// mayForget refuses the rules and the profile, forgotten ones included
// (a restore would bring them back). They are the system message of every
// chat of the namespace: an agent that could change them (steered by an
// injected document, a tool's output, or just confused) would speak as
// the operator to every later chat. They change through the curator, the
// user's own chat commands and the admin API only.
func mayForget(m memory.Memory) error {
	typ := m.Type
	if typ == memory.Forgotten {
		if from, _ := m.Metadata["forgotten_from"].(string); from != "" {
			typ = memory.Type(from)
		}
	}
	if typ == memory.Rule || typ == memory.Profile {
		return fmt.Errorf("memory %q is a %s: rules and the profile are read-only over MCP; "+
			"they change through vera's curator, the user's own chat commands or the admin API", m.ID, typ)
	}
	return nil
}

// mayRewrite allows curated memories only. A chat turn is a record of
// what was said: forgetting it is the user's call, rewriting it would make
// the record say what never was.
func mayRewrite(m memory.Memory) error {
	if err := mayForget(m); err != nil {
		return err
	}
	switch m.Type {
	case memory.Curated:
		return nil
	case memory.Raw:
		return fmt.Errorf("memory %q is a chat turn, a record of what was said: it is not rewritten "+
			"(forget_memory forgets it; add_memory adds the corrected fact)", m.ID)
	case memory.Forgotten:
		return fmt.Errorf("memory %q is forgotten: only an admin can restore it", m.ID)
	}
	return fmt.Errorf("memory %q is of type %s, which update_memory does not change", m.ID, m.Type)
}

func (t tools) update(ctx context.Context, _ *sdk.CallToolRequest, in updateIn) (*sdk.CallToolResult, ID, error) {
	ctx = memory.WithActor(ctx, memory.ViaMCP) // its changes are an agent's
	text := strings.TrimSpace(in.Content)
	if text == "" && in.Private == nil {
		return nil, ID{}, badArg("content", "must not be empty (forget_memory forgets a memory)")
	}
	if err := privateArg(in.Private); err != nil {
		return nil, ID{}, err
	}
	m, err := t.own(ctx, in.ID)
	if err != nil {
		return nil, ID{}, err
	}
	if err := mayRewrite(m); err != nil {
		return nil, ID{}, err
	}
	if text != "" {
		m.Text = text
	}
	if in.Private != nil {
		m.Metadata = memory.MarkPrivate(m.Metadata, true, memory.ByUser)
	}
	if _, err := t.s.Memories.Rewrite(ctx, m); err != nil {
		return nil, ID{}, writeFailed(err)
	}
	out := ID{ID: m.ID}
	return answer("Updated "+m.ID+".", out), out, nil
}

func (t tools) forget(ctx context.Context, _ *sdk.CallToolRequest, in forgetIn) (*sdk.CallToolResult, ID, error) {
	ctx = memory.WithActor(ctx, memory.ViaMCP) // its changes are an agent's
	m, err := t.own(ctx, in.ID)
	if err != nil {
		return nil, ID{}, err
	}
	if err := mayForget(m); err != nil {
		return nil, ID{}, err
	}
	out := ID{ID: m.ID}
	if m.Type == memory.Forgotten {
		return answer(m.ID+" is already forgotten (an admin can restore it).", out), out, nil
	}
	m.Hide(time.Now())
	if _, err := t.s.Memories.Rewrite(ctx, m); err != nil {
		return nil, ID{}, fmt.Errorf("writing memory: %w", err)
	}
	return answer("Forgot "+m.ID+" (an admin can restore it).", out), out, nil
}

func (t tools) list(ctx context.Context, _ *sdk.CallToolRequest, in listIn) (*sdk.CallToolResult, Found, error) {
	f := memory.Filter{Namespace: t.ns, Types: []memory.Type{memory.Raw, memory.Curated}}
	if typ := strings.TrimSpace(in.Type); typ != "" {
		if !memory.Type(typ).Valid() {
			return nil, Found{}, badArg("type", fmt.Sprintf("%q is not raw, curated, rule, profile or forgotten", typ))
		}
		f.Types = []memory.Type{memory.Type(typ)}
	}
	if in.Since != "" {
		since, err := time.Parse(time.RFC3339, in.Since)
		if err != nil {
			return nil, Found{}, badArg("since", fmt.Sprintf("%q is not an RFC 3339 time such as 2026-11-22T10:00:00Z", in.Since))
		}
		f.Since = since
	}
	limit, err := limitOf(in.Limit, 20, 200)
	if err != nil {
		return nil, Found{}, err
	}
	ms, err := t.s.Memories.Latest(ctx, f, limit)
	if err != nil {
		return nil, Found{}, fmt.Errorf("reading memory: %w", err)
	}
	out := Found{Memories: []Memory{}}
	for _, m := range ms {
		if !t.s.Memories.Withholds(m.ID) && !memory.IsPrivate(m) {
			out.Memories = append(out.Memories, toMemory(m))
		}
	}
	return answer(fmt.Sprintf("%d memories, newest first.", len(out.Memories)), out), out, nil
}

// writeFailed is the tool error of a memory not written: a text over
// memory.max_turn_tokens names the argument.
func writeFailed(err error) error {
	if errors.Is(err, memory.ErrTooLong) {
		return badArg("content", err.Error())
	}
	return fmt.Errorf("writing memory: %w", err)
}

// answer is a tool's result: a readable summary and the same JSON as its
// structured content, as the MCP specification asks of structured results.
func answer(summary string, v any) *sdk.CallToolResult {
	b, _ := json.Marshal(v)
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: summary + "\n" + string(b)}}}
}
