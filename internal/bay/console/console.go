// Package console serves bay's web console at /console: static files embedded in the bay
// binary (no separate server, no build step, nothing from a CDN). The console signs in with
// an API key that the page keeps in sessionStorage and sends as "Authorization: Bearer" on
// every call of the public API v1 (the terminal WebSocket offers it as a subprotocol, since a
// browser cannot set headers on one); there is no cookie and no other ambient credential, so
// a cross-site page cannot make calls as the console's user. Every answer carries a strict
// Content-Security-Policy: scripts, styles, images and connections from bay itself only, no
// inline script or style, no framing.
package console

import (
	"bytes"
	"embed"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"time"
)

// Prefix is the URL path the console is served under.
const Prefix = "/console/"

//go:embed static
var static embed.FS

// CSP is the Content-Security-Policy of every console answer. data: and blob: images are the
// plots a Python call returns (base64 in JSON) and the workspace images the file browser shows
// from a download it made itself; connect-src 'self' covers the terminal WebSocket on the same
// host (CSP 3: 'self' matches ws: and wss: of the page's origin).
const CSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; " +
	"connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// modTime is when the binary was started: the embedded files carry no time of their own.
var modTime = time.Now()

// Handler serves the console's files under Prefix. Unknown files are 404 with a plain body;
// any method but GET and HEAD is 405. The console itself routes with the URL fragment, so
// every page is index.html.
func Handler() http.Handler {
	files, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embed pattern above guarantees the directory
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", CSP)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		h.Set("Cache-Control", "no-cache")
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			h.Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		name := strings.TrimPrefix(r.URL.Path, Prefix)
		if name == "" {
			name = "index.html"
		}
		name = path.Clean(name)
		if !fs.ValidPath(name) || strings.HasPrefix(name, ".") {
			http.NotFound(w, r)
			return
		}
		b, err := fs.ReadFile(files, name)
		if err != nil {
			http.NotFound(w, r)
			return
		}
		if ct := mime.TypeByExtension(path.Ext(name)); ct != "" {
			h.Set("Content-Type", ct)
		} else {
			h.Set("Content-Type", "application/octet-stream")
		}
		http.ServeContent(w, r, name, modTime, bytes.NewReader(b))
	})
}
