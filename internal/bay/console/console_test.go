package console

import (
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

func get(t *testing.T, method, path string) *httptest.ResponseRecorder {
	t.Helper()
	w := httptest.NewRecorder()
	Handler().ServeHTTP(w, httptest.NewRequest(method, path, nil))
	return w
}

func TestServesEmbeddedFilesWithCSP(t *testing.T) {
	for path, ctype := range map[string]string{
		"/console/":            "text/html",
		"/console/index.html":  "text/html",
		"/console/console.css": "text/css",
		"/console/js/app.js":   "text/javascript",
		"/console/js/term.js":  "text/javascript",
		"/console/favicon.svg": "image/svg+xml",
	} {
		w := get(t, "GET", path)
		if w.Code != 200 {
			t.Fatalf("%s: %d", path, w.Code)
		}
		if ct := w.Header().Get("Content-Type"); !strings.HasPrefix(ct, ctype) {
			t.Errorf("%s: Content-Type %q, want %s", path, ct, ctype)
		}
		if w.Header().Get("Content-Security-Policy") != CSP || w.Header().Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s: security headers %v", path, w.Header())
		}
	}
	if !strings.Contains(CSP, "default-src 'self'") || strings.Contains(CSP, "unsafe") {
		t.Fatalf("CSP is not strict: %s", CSP)
	}
}

func TestRefusesWhatIsNotAFile(t *testing.T) {
	for _, p := range []string{"/console/nope.js", "/console/../console.go", "/console/js/", "/console/.hidden", "/console/%2e%2e/console.go"} {
		if w := get(t, "GET", p); w.Code != http.StatusNotFound {
			t.Errorf("%s: %d, want 404", p, w.Code)
		}
	}
	if w := get(t, "POST", "/console/"); w.Code != http.StatusMethodNotAllowed || w.Header().Get("Allow") != "GET, HEAD" {
		t.Errorf("POST: %d %v", w.Code, w.Header())
	}
	if w := get(t, "HEAD", "/console/"); w.Code != 200 || w.Body.Len() != 0 {
		t.Errorf("HEAD: %d, %d bytes", w.Code, w.Body.Len())
	}
}

// TestNoInlineCodeAndNoOutsideAssets keeps the files within what the CSP allows: no inline
// script, handler or style attribute, no HTML built from strings, nothing loaded from another
// origin, and every asset index.html names exists.
func TestNoInlineCodeAndNoOutsideAssets(t *testing.T) {
	files, _ := fs.Sub(static, "static")
	inline := regexp.MustCompile(`(?i)<script(?:\s[^>]*)?>\s*[^<\s]|<style|\sstyle=|\son[a-z]+=|javascript:`)
	outside := regexp.MustCompile(`(?i)(src|href)=["'](https?:)?//|@import|url\(\s*['"]?https?:`)
	html := regexp.MustCompile(`\.(innerHTML|outerHTML)\s*=|insertAdjacentHTML|document\.write|\beval\(|new Function\(|setAttribute\(\s*['"]style`)
	err := fs.WalkDir(files, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, _ := fs.ReadFile(files, p)
		s := string(b)
		if strings.HasSuffix(p, ".html") && inline.MatchString(s) {
			t.Errorf("%s: inline script or style: %q", p, inline.FindString(s))
		}
		if outside.MatchString(s) {
			t.Errorf("%s: loads from another origin: %q", p, outside.FindString(s))
		}
		if strings.HasSuffix(p, ".js") && html.MatchString(s) {
			t.Errorf("%s: builds HTML or code from strings: %q", p, html.FindString(s))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	idx, _ := fs.ReadFile(files, "index.html")
	for _, m := range regexp.MustCompile(`(?:src|href)="([^"#][^"]*)"`).FindAllStringSubmatch(string(idx), -1) {
		if _, err := fs.Stat(files, m[1]); err != nil {
			t.Errorf("index.html names %s, which is not embedded", m[1])
		}
	}
}
