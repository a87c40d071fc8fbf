package mcp

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The bridge's credentials go to the endpoint's own scheme and host only:
// a request anywhere else is refused before it is sent, whatever asked
// for it.
func TestBridgeSendsItsHeaderToItsHostOnly(t *testing.T) {
	var got []string
	next := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		got = append(got, r.URL.String()+" "+r.Header.Get("Authorization"))
		return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Request: r}, nil
	})
	rt := headerRoundTripper{scheme: "http", host: "127.0.0.1:11434", header: http.Header{"Authorization": {"Bearer k-one"}}, next: next}
	tests := []struct {
		url string
		ok  bool
	}{
		{"http://127.0.0.1:11434/mcp", true},
		{"http://evil.example/mcp", false},
		{"http://127.0.0.1:11435/mcp", false},
		{"https://127.0.0.1:11434/mcp", false},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			got = nil
			res, err := rt.RoundTrip(httptest.NewRequest(http.MethodPost, tt.url, nil))
			if !tt.ok {
				require.Error(t, err)
				assert.Contains(t, err.Error(), "only")
				assert.Empty(t, got, "nothing sent")
				return
			}
			require.NoError(t, err)
			res.Body.Close()
			assert.Equal(t, []string{tt.url + " Bearer k-one"}, got)
		})
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
