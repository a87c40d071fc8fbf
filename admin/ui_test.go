package admin

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The page is served from the binary with its CSP, its own content types
// and no token (it is static; the API it calls asks for one).
func TestUIServesThePage(t *testing.T) {
	s := newTestServer(t, "http://127.0.0.1:1")
	s.Token = "s3cret"
	h := handler(s)
	tests := []struct {
		name, method, path string
		code               int
		ctype, location    string
		body               string // a substring of the body
	}{
		{"page", "GET", "/ui/", http.StatusOK, "text/html; charset=utf-8", "", `<script src="app.js" defer></script>`},
		{"page by name", "GET", "/ui/index.html", http.StatusOK, "text/html; charset=utf-8", "", `id="token-form"`},
		{"script", "GET", "/ui/app.js", http.StatusOK, "text/javascript; charset=utf-8", "", "textContent"},
		{"style", "GET", "/ui/style.css", http.StatusOK, "text/css; charset=utf-8", "", ":focus-visible"},
		{"head", "HEAD", "/ui/", http.StatusOK, "text/html; charset=utf-8", "", ""},
		{"redirect", "GET", "/ui", http.StatusMovedPermanently, "", "/ui/", ""},
		{"redirect head", "HEAD", "/ui", http.StatusMovedPermanently, "", "/ui/", ""},
		{"unknown file", "GET", "/ui/nope.js", http.StatusNotFound, "application/json; charset=utf-8", "", "no such file"},
		{"no directory walk", "GET", "/ui/../admin.go", http.StatusNotFound, "application/json; charset=utf-8", "", "no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(tt.method, tt.path, nil)
			req.RemoteAddr = "192.0.2.7:5000" // not loopback: the page needs no token anyway
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			require.Equal(t, tt.code, w.Code, w.Body.String())
			if tt.location != "" {
				assert.Equal(t, tt.location, w.Header().Get("Location"))
				return
			}
			assert.Equal(t, uiCSP, w.Header().Get("Content-Security-Policy"))
			assert.Equal(t, "nosniff", w.Header().Get("X-Content-Type-Options"))
			assert.Equal(t, tt.ctype, w.Header().Get("Content-Type"))
			if tt.method == "HEAD" {
				assert.Empty(t, w.Body.String())
			}
			assert.Contains(t, w.Body.String(), tt.body)
		})
	}
	assert.Equal(t,
		"default-src 'self'; style-src 'self'; script-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'",
		uiCSP, "the policy of the issue")
}

// A revalidation with the ETag is answered 304, so a reload costs nothing.
func TestUIRevalidates(t *testing.T) {
	h := handler(newTestServer(t, "http://127.0.0.1:1"))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/ui/app.js", nil))
	etag := w.Header().Get("ETag")
	require.NotEmpty(t, etag)
	req := httptest.NewRequest("GET", "/ui/app.js", nil)
	req.Header.Set("If-None-Match", etag)
	w = httptest.NewRecorder()
	h.ServeHTTP(w, req)
	assert.Equal(t, http.StatusNotModified, w.Code)
}

// The CSP allows no inline script or style: the page must hold none, or it
// would break in the browser without a test noticing.
func TestUIHasNoInlineScriptOrStyle(t *testing.T) {
	b, err := uiFiles.ReadFile("ui/index.html")
	require.NoError(t, err)
	html := string(b)
	assert.NotRegexp(t, regexp.MustCompile(`<script(\s[^>]*)?>[^<]+</script>`), html, "inline script")
	assert.NotRegexp(t, regexp.MustCompile(`<style`), html, "inline style element")
	assert.NotRegexp(t, regexp.MustCompile(`\sstyle=`), html, "style attribute")
	assert.NotRegexp(t, regexp.MustCompile(`\son[a-z]+=`), html, "inline event handler")
	assert.NotRegexp(t, regexp.MustCompile(`(src|href)="(https?:)?//`), html, "nothing from outside")
	js, err := uiFiles.ReadFile("ui/app.js")
	require.NoError(t, err)
	assert.NotContains(t, string(js), "innerHTML", "memory text is set with textContent only")
}
