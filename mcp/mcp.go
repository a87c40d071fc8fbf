// Package mcp serves vera's memory to agents and tools over the Model
// Context Protocol (the official Go SDK): /mcp, the streamable HTTP
// transport, stateless. Its tools work on the namespace of the request's
// identity, through the same memory operations as the admin API.
package mcp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/vera-proxy/vera/httperr"
	"github.com/vera-proxy/vera/memory"
)

// Memories are the memory operations the tools use (memory.Service).
type Memories interface {
	Search(ctx context.Context, f memory.Filter, q string, limit int) ([]memory.Hit, error)
	Latest(ctx context.Context, f memory.Filter, limit int) ([]memory.Memory, error)
	Get(ctx context.Context, ns, id string) (memory.Memory, error)
	Add(ctx context.Context, m memory.Memory) (memory.Memory, error)
	Rewrite(ctx context.Context, m memory.Memory) (memory.Memory, error)
	// Withholds reports whether memory id is withheld from chats (written
	// by the curator from a memory since removed): agents do not read it
	// either.
	Withholds(id string) bool
}

// Server serves the tools over one Memories.
type Server struct {
	Memories Memories
	// Version is vera's, reported to clients.
	Version string
	// Metrics counts the calls; nil: none.
	Metrics *Metrics

	schemas *sdk.SchemaCache
}

// New returns a server over mem.
func New(mem Memories, version string) *Server {
	return &Server{Memories: mem, Version: version, schemas: sdk.NewSchemaCache()}
}

// Handler serves /mcp for the namespace namespace(r) tells (the same
// identity as a chat's); a request whose identity is refused gets refuse's
// answer. The SDK's own localhost check is off: vera's Origin and Host
// rules, which run before, are wider and already the MCP specification's.
func (s *Server) Handler(namespace func(*http.Request) (string, error), refuse func(http.ResponseWriter, *http.Request, error)) http.Handler {
	h := sdk.NewStreamableHTTPHandler(func(r *http.Request) *sdk.Server {
		ns, _ := r.Context().Value(nsKey{}).(string)
		return s.server(ns)
	}, &sdk.StreamableHTTPOptions{Stateless: true, JSONResponse: true, DisableLocalhostProtection: true})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ns, err := namespace(r)
		if err != nil {
			refuse(w, r, err)
			return
		}
		body, err := readBody(w, r)
		if err != nil {
			refuse(w, r, err)
			return
		}
		r = r.WithContext(context.WithValue(r.Context(), nsKey{}, ns))
		r.Body = body
		h.ServeHTTP(w, r)
	})
}

// readBody reads r's body whole before the SDK sees it, so that a body
// that fails (a stall, which the proxy's body idle limit ends, is 408; one
// over the SDK's own limit, 413) is answered as vera answers it on every
// route, where the SDK would answer a plain-text 400.
func readBody(w http.ResponseWriter, r *http.Request) (io.ReadCloser, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return r.Body, nil
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, sdk.DefaultMaxRequestBodyBytes))
	var tooBig *http.MaxBytesError
	switch {
	case err == nil:
		return io.NopCloser(bytes.NewReader(body)), nil
	case errors.As(err, &tooBig):
		w.Header().Set("Connection", "close")
		return nil, httperr.New(http.StatusRequestEntityTooLarge, fmt.Sprintf("request body too large: the limit is %d bytes", tooBig.Limit), nil)
	case httperr.Status(err) != http.StatusInternalServerError:
		return nil, err // a stall's 408
	}
	return nil, httperr.New(http.StatusBadRequest, "reading the request body", err)
}

// nsKey holds the namespace of an /mcp request in its context, read once.
type nsKey struct{}

// server is the MCP server of one namespace's tools.
func (s *Server) server(ns string) *sdk.Server {
	srv := sdk.NewServer(&sdk.Implementation{Name: "vera", Title: "vera memory", Version: s.Version},
		&sdk.ServerOptions{SchemaCache: s.schemas, Instructions: instructions})
	t := tools{s: s, ns: ns}
	sdk.AddTool(srv, searchTool, observed(s, "search_memories", t.search))
	sdk.AddTool(srv, addTool, observed(s, "add_memory", t.add))
	sdk.AddTool(srv, updateTool, observed(s, "update_memory", t.update))
	sdk.AddTool(srv, forgetTool, observed(s, "forget_memory", t.forget))
	sdk.AddTool(srv, listTool, observed(s, "list_memories", t.list))
	return srv
}

// observed counts a tool's calls by status.
func observed[In, Out any](s *Server, name string, h sdk.ToolHandlerFor[In, Out]) sdk.ToolHandlerFor[In, Out] {
	return func(ctx context.Context, req *sdk.CallToolRequest, in In) (*sdk.CallToolResult, Out, error) {
		res, out, err := h(ctx, req, in)
		status := "ok"
		if err != nil || res != nil && res.IsError {
			status = "error"
		}
		s.Metrics.called(name, status)
		return res, out, err
	}
}
