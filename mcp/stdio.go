package mcp

import (
	"context"
	"fmt"
	"io"
	"net/http"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Call runs one tool call somewhere: on a running vera's /mcp, or on the
// store opened for the call.
type Call func(ctx context.Context, tool string, args any) (*sdk.CallToolResult, error)

// Tools lists the tools with their schemas, as /mcp lists them.
func (s *Server) Tools(ctx context.Context) ([]*sdk.Tool, error) {
	cs, done, err := s.local(ctx, "")
	if err != nil {
		return nil, err
	}
	defer done()
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		return nil, err
	}
	return res.Tools, nil
}

// Call runs a tool for ns in-process, as /mcp would.
func (s *Server) Call(ctx context.Context, ns, tool string, args any) (*sdk.CallToolResult, error) {
	cs, done, err := s.local(ctx, ns)
	if err != nil {
		return nil, err
	}
	defer done()
	return cs.CallTool(ctx, &sdk.CallToolParams{Name: tool, Arguments: args})
}

// local connects a client to ns's tools in memory.
func (s *Server) local(ctx context.Context, ns string) (*sdk.ClientSession, func(), error) {
	st, ct := sdk.NewInMemoryTransports()
	ss, err := s.server(ns).Connect(ctx, st, nil)
	if err != nil {
		return nil, nil, err
	}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "vera", Version: s.Version}, nil).Connect(ctx, ct, nil)
	if err != nil {
		ss.Close()
		return nil, nil, err
	}
	return cs, func() { cs.Close(); ss.Close() }, nil
}

// Remote is a session with a running vera's /mcp.
type Remote struct {
	session *sdk.ClientSession
}

// Dial connects to the /mcp at url, sending header with every request
// (the namespace header, an API key).
func Dial(ctx context.Context, url string, header http.Header, transport http.RoundTripper) (*Remote, error) {
	c := sdk.NewClient(&sdk.Implementation{Name: "vera-mcp-bridge", Version: "1"}, nil)
	s, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: url, DisableStandaloneSSE: true, MaxRetries: -1,
		HTTPClient: &http.Client{Transport: headerRoundTripper{header: header, next: transport}}}, nil)
	if err != nil {
		return nil, fmt.Errorf("reaching vera's /mcp at %s: %w", url, err)
	}
	return &Remote{session: s}, nil
}

// Call implements Call.
func (r *Remote) Call(ctx context.Context, tool string, args any) (*sdk.CallToolResult, error) {
	return r.session.CallTool(ctx, &sdk.CallToolParams{Name: tool, Arguments: args})
}

// Close ends the session.
func (r *Remote) Close() error { return r.session.Close() }

// headerRoundTripper sends header with every request.
type headerRoundTripper struct {
	header http.Header
	next   http.RoundTripper
}

func (h headerRoundTripper) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h.header {
		r.Header[k] = v
	}
	next := h.next
	if next == nil {
		next = http.DefaultTransport
	}
	return next.RoundTrip(r)
}

// Serve serves tools over in and out (stdio), each call run by call.
func Serve(ctx context.Context, version string, tools []*sdk.Tool, call Call, in io.Reader, out io.Writer) error {
	srv := sdk.NewServer(&sdk.Implementation{Name: "vera", Title: "vera memory", Version: version},
		&sdk.ServerOptions{Instructions: instructions})
	for _, t := range tools {
		name := t.Name
		srv.AddTool(t, func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return call(ctx, name, req.Params.Arguments)
		})
	}
	return srv.Run(ctx, &sdk.IOTransport{Reader: io.NopCloser(in), Writer: nopWriteCloser{out}})
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
