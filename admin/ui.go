package admin

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
)

// The admin page: static files in the binary, no build step, no
// outside fonts or scripts. It talks to the admin routes, which ask for
// the token; the page itself needs none.
//
//go:embed ui/index.html ui/app.js ui/style.css
var uiFiles embed.FS

// uiCSP keeps the page to its own files: no inline script or style, so a
// memory's text that slipped into the markup could not run.
const uiCSP = "default-src 'self'; style-src 'self'; script-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'"

// uiFile is one file of the page, read once.
type uiFile struct {
	body  []byte
	ctype string
	etag  string
}

// mountUI registers the page: /ui redirects to /ui/, which serves
// index.html; /ui/app.js and /ui/style.css are the rest.
func (s *Server) mountUI(e *gin.Engine) {
	// Content types are set here rather than guessed from the system's
	// MIME tables, which differ between hosts.
	types := map[string]string{
		"index.html": "text/html; charset=utf-8",
		"app.js":     "text/javascript; charset=utf-8",
		"style.css":  "text/css; charset=utf-8",
	}
	files := make(map[string]uiFile, len(types))
	for name, ctype := range types {
		b, err := uiFiles.ReadFile("ui/" + name)
		if err != nil {
			panic("admin: embedded page file missing: " + name) // a build without the files is broken
		}
		sum := sha256.Sum256(b)
		files[name] = uiFile{body: b, ctype: ctype, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
	}
	redirect := func(c *gin.Context) { c.Redirect(http.StatusMovedPermanently, "/ui/") }
	serve := func(c *gin.Context) { serveUI(c, files) }
	for _, method := range []string{http.MethodGet, http.MethodHead} {
		e.Handle(method, "/ui", redirect)
		e.Handle(method, "/ui/*filepath", serve)
	}
}

// serveUI answers one of the page's files, or 404.
func serveUI(c *gin.Context, files map[string]uiFile) {
	h := c.Writer.Header()
	h.Set("Content-Security-Policy", uiCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	name := strings.TrimPrefix(c.Param("filepath"), "/")
	if name == "" {
		name = "index.html"
	}
	f, ok := files[name]
	if !ok {
		writeError(c.Writer, httpError(http.StatusNotFound, "no such file in the admin page: /ui/"+name))
		return
	}
	h.Set("Content-Type", f.ctype)
	h.Set("ETag", f.etag)
	// Revalidated each time (the ETag makes that cheap), so a new vera's
	// page is never mixed with an old script from the cache.
	h.Set("Cache-Control", "no-cache")
	http.ServeContent(c.Writer, c.Request, name, time.Time{}, bytes.NewReader(f.body))
}
