package proxy

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/vera-proxy/vera/curator"
)

type fakeCurator struct{ runs int }

func (f *fakeCurator) Run(context.Context, curator.Options) curator.Result {
	f.runs++
	return curator.Result{Status: "ok", Mode: curator.Daily}
}
func (f *fakeCurator) Last() map[string]curator.Result { return nil }
func (f *fakeCurator) Running() bool                   { return false }

func TestAdminAccess(t *testing.T) {
	tests := []struct {
		name, token, remote, auth string
		want                      int
	}{
		{"no token, loopback", "", "127.0.0.1:5000", "", http.StatusOK},
		{"no token, IPv6 loopback", "", "[::1]:5000", "", http.StatusOK},
		{"no token, from the network", "", "192.168.1.20:5000", "", http.StatusForbidden},
		{"token, none sent", "s3cret", "127.0.0.1:5000", "", http.StatusUnauthorized},
		{"token, wrong one", "s3cret", "127.0.0.1:5000", "Bearer nope", http.StatusUnauthorized},
		{"token, right one from the network", "s3cret", "192.168.1.20:5000", "Bearer s3cret", http.StatusOK},
		{"token, scheme in lower case", "s3cret", "192.168.1.20:5000", "bearer s3cret", http.StatusOK},
		{"token, scheme in upper case", "s3cret", "192.168.1.20:5000", "BEARER s3cret", http.StatusOK},
		{"token, another scheme", "s3cret", "192.168.1.20:5000", "Basic s3cret", http.StatusUnauthorized},
		{"token, no space", "s3cret", "192.168.1.20:5000", "Bearers3cret", http.StatusUnauthorized},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fc := &fakeCurator{}
			s := New(mustURL(t, "http://127.0.0.1:1"), NewTransport(0), nil)
			s.Curator, s.AdminToken = fc, tt.token
			req := httptest.NewRequest(http.MethodPost, "/curator/run", nil)
			req.RemoteAddr = tt.remote
			if tt.auth != "" {
				req.Header.Set("Authorization", tt.auth)
			}
			w := httptest.NewRecorder()
			s.Handler().ServeHTTP(w, req)
			assert.Equal(t, tt.want, w.Code, w.Body.String())
			assert.Equal(t, tt.want == http.StatusOK, fc.runs == 1)
		})
	}
}

func TestCuratorRunBadQuery(t *testing.T) {
	s := New(mustURL(t, "http://127.0.0.1:1"), NewTransport(0), nil)
	s.Curator = &fakeCurator{}
	req := httptest.NewRequest(http.MethodPost, "/curator/run?dry_run=perhaps", nil)
	req.RemoteAddr = "127.0.0.1:5000"
	w := httptest.NewRecorder()
	s.Handler().ServeHTTP(w, req)
	assert.Equal(t, http.StatusBadRequest, w.Code)
	assert.Contains(t, w.Body.String(), "dry_run")
}
