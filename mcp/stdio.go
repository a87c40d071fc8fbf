package mcp

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"

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

// Dial connects to the /mcp at endpoint, sending header with every request
// (the namespace header, an API key). It follows no redirect, and sends
// header to endpoint's own scheme and host only: the header holds a
// credential, and a redirect followed inside the transport would carry it
// to whatever host the redirect names (net/http drops credentials on a
// redirect to another host only when it set them itself).
func Dial(ctx context.Context, endpoint string, header http.Header, transport http.RoundTripper) (*Remote, error) {
	u, err := url.Parse(endpoint)
	if err != nil {
		return nil, fmt.Errorf("vera's /mcp at %s: %w", endpoint, err)
	}
	hc := &http.Client{CheckRedirect: NoRedirect, Transport: headerRoundTripper{scheme: u.Scheme, host: u.Host, header: header, next: transport}}
	c := sdk.NewClient(&sdk.Implementation{Name: "vera-mcp-bridge", Version: "1"}, nil)
	s, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: endpoint, DisableStandaloneSSE: true, MaxRetries: -1, HTTPClient: hc}, nil)
	if err != nil {
		return nil, fmt.Errorf("reaching vera's /mcp at %s: %w", endpoint, err)
	}
	return &Remote{session: s}, nil
}

// NoRedirect is the CheckRedirect of every client of `vera mcp`: vera
// never redirects, so a server that does is not vera (or sits behind
// something that is not), and nothing is sent on to where it points.
func NoRedirect(req *http.Request, via []*http.Request) error {
	return fmt.Errorf("the server at %s redirected to %s: vera mcp follows no redirect; give --url vera's own address",
		via[0].URL.Redacted(), req.URL.Redacted())
}

// Call implements Call.
func (r *Remote) Call(ctx context.Context, tool string, args any) (*sdk.CallToolResult, error) {
	return r.session.CallTool(ctx, &sdk.CallToolParams{Name: tool, Arguments: args})
}

// Close ends the session.
func (r *Remote) Close() error { return r.session.Close() }

// headerRoundTripper sends header with every request to scheme://host,
// and refuses a request to anywhere else.
type headerRoundTripper struct {
	scheme, host string
	header       http.Header
	next         http.RoundTripper
}

func (h headerRoundTripper) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Scheme != h.scheme || r.URL.Host != h.host {
		if r.Body != nil {
			r.Body.Close()
		}
		return nil, fmt.Errorf("vera mcp sends its requests to %s://%s only, not to %s", h.scheme, h.host, r.URL.Redacted())
	}
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
