package gull_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image/png"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shipyard-dev/shipyard/api/gullapi"
	"github.com/shipyard-dev/shipyard/internal/gull"
	"github.com/shipyard-dev/shipyard/internal/gull/gulltest"
)

const loginPage = `<!doctype html><html><head><title>Login</title></head><body>
<h1>Sign in</h1>
<form action="/done" method="get">
<label for="user">User</label><input id="user" name="user">
<label><input type="checkbox" id="remember" name="remember"> Remember me</label>
<select id="plan" name="plan"><option value="free">Free</option><option value="pro">Pro</option></select>
<button type="submit">Sign in</button>
</form>
<a href="/done?user=link">Skip</a>
<a href="#section2">Jump</a> <a href="/nocontent">Nothing</a>
<button type="button" id="framer" onclick="const f = document.createElement('iframe'); f.src = '/slowframe'; document.body.append(f)">Frame</button>
<div id="later" style="display:none">Later</div>
</body></html>`

// testSite serves the pages of the tests on 127.0.0.1.
func testSite(t *testing.T) *httptest.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("/login", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, loginPage)
	})
	mux.HandleFunc("/done", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<!doctype html><html><head><title>Welcome</title></head><body><p id="msg">Hello %s (%s, %s)</p></body></html>`,
			htmlEscape(r.FormValue("user")), htmlEscape(r.FormValue("plan")), htmlEscape(r.FormValue("remember")))
	})
	mux.HandleFunc("/nocontent", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	// A frame that loads slowly: clicks in the page must not wait for it.
	mux.HandleFunc("/slowframe", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(3 * time.Second):
		case <-r.Context().Done():
		}
		io.WriteString(w, "frame")
	})
	mux.HandleFunc("/setcookie", func(w http.ResponseWriter, r *http.Request) {
		http.SetCookie(w, &http.Cookie{Name: "sid", Value: "persist-me", Path: "/", Expires: time.Now().Add(24 * time.Hour)})
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, `<html><head><title>Cookie</title></head><body>set</body></html>`)
	})
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	return ts
}

func htmlEscape(s string) string {
	return strings.NewReplacer("<", "&lt;", ">", "&gt;", "&", "&amp;").Replace(s)
}

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

type daemon struct {
	t     *testing.T
	m     *gull.Main
	url   string
	token string
	stop  func()
}

// startGull runs the daemon on 127.0.0.1:0 against a real Chromium.
func startGull(t *testing.T, ws string) *daemon {
	t.Helper()
	return startGullToken(t, ws, "tok-123")
}

// startGullToken is startGull with another runtime token ("": none).
func startGullToken(t *testing.T, ws, token string) *daemon {
	t.Helper()
	cfg := gull.DefaultConfig()
	cfg.Listen = "127.0.0.1:0"
	cfg.Workspace = ws
	cfg.SkillsDir = filepath.Join(repoRoot(), "image", "gull", "skills")
	cfg.Chromium = gulltest.Chromium(t)
	cfg.Session = "sb-test"
	cfg.AuthToken = token
	cfg.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		cfg.Log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	m := gull.New(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- m.Run(ctx) }()
	select {
	case <-m.Ready():
	case err := <-errc:
		cancel()
		t.Fatalf("gull did not start: %v", err)
	case <-time.After(60 * time.Second):
		cancel()
		t.Fatal("gull did not start in 60s")
	}
	d := &daemon{t: t, m: m, url: "http://" + m.Addr(), token: cfg.AuthToken}
	stopped := false
	d.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-errc:
			if err != nil {
				t.Errorf("gull stopped with %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("gull did not stop in 30s")
		}
	}
	t.Cleanup(d.stop)
	d.waitHealth(func(h gullapi.HealthResponse) bool { return h.BrowserReady }, "browser_ready")
	return d
}

// stepMargin is what a test step allows beyond the daemon's own bound of
// the request (a command's timeout) on a loaded machine; a step that takes
// longer fails the test with what it waited for instead of hanging it.
const stepMargin = 30 * time.Second

// fetchJSON sends req, decodes the JSON answer into out and returns the
// status; no answer within limit fails the test.
func fetchJSON(t *testing.T, req *http.Request, limit time.Duration, out any) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(req.Context(), limit)
	defer cancel()
	what := req.Method + " " + req.URL.Path
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		if ctx.Err() != nil {
			t.Fatalf("%s: no answer in %v (gull hangs?): %v", what, limit, err)
		}
		t.Fatalf("%s: %v", what, err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		t.Fatalf("%s: decode: %v", what, err)
	}
	return resp.StatusCode
}

// post sends body to path; limit is the daemon's bound of the request (the
// command's or the batch's timeout), stepMargin is added.
func (d *daemon) post(path string, body any, out any, limit time.Duration) int {
	d.t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", d.url+path, bytes.NewReader(b))
	req.SetBasicAuth("gull", d.token)
	return fetchJSON(d.t, req, limit+stepMargin, out)
}

// exec runs cmd and fails the test unless it exits 0; it returns stdout.
func (d *daemon) exec(cmd string) string {
	d.t.Helper()
	r := d.run(cmd, 30)
	if r.ExitCode != 0 {
		d.t.Fatalf("%q: exit %d, stdout %q, stderr %q", cmd, r.ExitCode, r.Stdout, r.Stderr)
	}
	return r.Stdout
}

func (d *daemon) run(cmd string, timeout int) gullapi.ExecResponse {
	d.t.Helper()
	var r gullapi.ExecResponse
	if code := d.post(gullapi.PathExec, gullapi.ExecRequest{Cmd: &cmd, Timeout: &timeout}, &r, time.Duration(timeout)*time.Second); code != 200 {
		d.t.Fatalf("%q: HTTP %d", cmd, code)
	}
	return r
}

func (d *daemon) health() gullapi.HealthResponse {
	d.t.Helper()
	req, _ := http.NewRequest("GET", d.url+gullapi.PathHealth, nil)
	var h gullapi.HealthResponse
	fetchJSON(d.t, req, stepMargin, &h)
	return h
}

func (d *daemon) waitHealth(ok func(gullapi.HealthResponse) bool, what string) gullapi.HealthResponse {
	d.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		h := d.health()
		if ok(h) {
			return h
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("health never showed %s: %+v", what, h)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitExec runs cmd until ok accepts its stdout, for 30 s at most.
func (d *daemon) waitExec(cmd string, ok func(string) bool, what string) {
	d.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		out := d.exec(cmd)
		if ok(out) {
			return
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("%q never showed %s: %q", cmd, what, out)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// refOf finds the ref of the first snapshot line containing what.
func refOf(t *testing.T, snapshot, what string) string {
	t.Helper()
	for line := range strings.Lines(snapshot) {
		if strings.Contains(line, what) {
			if _, after, ok := strings.Cut(line, "[ref="); ok {
				ref, _, _ := strings.Cut(after, "]")
				return "@" + ref
			}
		}
	}
	t.Fatalf("no ref for %q in snapshot:\n%s", what, snapshot)
	return ""
}

func TestGullAgainstChromium(t *testing.T) {
	site := testSite(t)
	ws := t.TempDir()
	d := startGull(t, ws)

	h := d.health()
	if h.Status != "healthy" || !h.BrowserActive || h.Session != "sb-test" {
		t.Fatalf("health %+v", h)
	}
	// The built-in skill is in the workspace and in /meta.
	if _, err := os.Stat(filepath.Join(ws, "skills", "browser-automation", "references", "browser.md")); err != nil {
		t.Errorf("skill not installed: %v", err)
	}
	var meta map[string]any
	req, _ := http.NewRequest("GET", d.url+gullapi.PathMeta, nil)
	req.Header.Set("Authorization", "Bearer "+d.token)
	fetchJSON(t, req, stepMargin, &meta)
	if rt := meta["runtime"].(map[string]any); rt["name"] != "gull" || rt["api_version"] != "v1" {
		t.Errorf("meta runtime %v", rt)
	}
	if sk := meta["built_in_skills"].([]any); len(sk) != 1 || sk[0].(map[string]any)["name"] != "browser-automation" {
		t.Errorf("meta skills %v", sk)
	}
	if meta["capabilities"].(map[string]any)["browser"] == nil {
		t.Errorf("meta capabilities %v", meta["capabilities"])
	}

	// The core flow.
	out := d.exec("open " + site.URL + "/login")
	if out != "Login\n"+site.URL+"/login\n" {
		t.Errorf("open: %q", out)
	}
	snap := d.exec("snapshot -i")
	for _, want := range []string{`textbox "User"`, `checkbox "Remember me"`, `combobox`, `button "Sign in"`, `link "Skip"`} {
		if !strings.Contains(snap, want) {
			t.Errorf("snapshot -i lacks %q:\n%s", want, snap)
		}
	}
	if strings.Contains(snap, "heading") {
		t.Errorf("snapshot -i lists a heading:\n%s", snap)
	}
	user, remember, plan, submit := refOf(t, snap, `textbox "User"`), refOf(t, snap, "Remember me"), refOf(t, snap, "combobox"), refOf(t, snap, `button "Sign in"`)
	full := d.exec("snapshot")
	if !strings.Contains(full, `- heading "Sign in" [ref=e1] [level=1]`) {
		t.Errorf("full snapshot:\n%s", full)
	}
	snap = d.exec("snapshot -i") // refs of the interactive list again
	d.exec(`fill ` + user + ` "Ada <Lovelace>"`)
	if v := d.exec("get value " + user); v != "Ada <Lovelace>\n" {
		t.Errorf("value after fill: %q", v)
	}
	d.exec("check " + remember)
	if v := d.exec("is checked " + remember); v != "true\n" {
		t.Errorf("is checked: %q", v)
	}
	d.exec("uncheck " + remember)
	d.exec("check " + remember)
	if v := d.exec("select " + plan + " Pro"); v != "Selected pro\n" {
		t.Errorf("select: %q", v)
	}
	if v := d.exec("is visible #later"); v != "false\n" {
		t.Errorf("is visible before: %q", v)
	}
	d.exec(`eval "setTimeout(() => { document.getElementById('later').style.display = 'block' }, 200)"`)
	d.exec("wait #later")
	if v := d.exec("is visible #later"); v != "true\n" {
		t.Errorf("is visible after: %q", v)
	}
	d.exec("click " + submit)
	if v := d.exec("get title"); v != "Welcome\n" {
		t.Errorf("title after click: %q", v)
	}
	if v := d.exec("get text #msg"); v != "Hello Ada <Lovelace> (pro, on)\n" {
		t.Errorf("text after click: %q", v)
	}
	if v := d.exec("get url"); !strings.HasPrefix(v, site.URL+"/done?") {
		t.Errorf("url: %q", v)
	}
	// The refs of the old page are stale now.
	r := d.run("click "+submit, 10)
	if r.ExitCode != 1 || !strings.Contains(r.Stderr, "run snapshot again") {
		t.Errorf("stale ref: %+v", r)
	}
	out = d.exec("screenshot shots/done.png")
	if out != "Screenshot saved to "+filepath.Join(ws, "shots/done.png")+"\n" {
		t.Errorf("screenshot: %q", out)
	}
	checkPNG(t, filepath.Join(ws, "shots/done.png"), 1280, 720)

	// Keyboard: Enter in the form submits it.
	d.exec("back")
	d.exec("fill #user grace")
	d.exec("press Enter")
	if v := d.exec("get text #msg"); !strings.HasPrefix(v, "Hello grace") {
		t.Errorf("after Enter: %q", v)
	}
	d.exec("back")
	d.exec("wait --url **/login")
	if v := d.exec(`eval "document.querySelectorAll('input').length * 2"`); v != "4\n" {
		t.Errorf("eval: %q", v)
	}
	if v := d.exec(`eval "({a: [1, 'x']})"`); v != `{"a":[1,"x"]}`+"\n" {
		t.Errorf("eval object: %q", v)
	}
	// A dialog does not block the page.
	if v := d.exec(`eval "confirm('sure?')"`); v != "true\n" {
		t.Errorf("confirm: %q", v)
	}
	if r := d.run("eval nosuchvar.x", 10); r.ExitCode != 1 || !strings.Contains(r.Stderr, "ReferenceError") {
		t.Errorf("eval error: %+v", r)
	}
	if v := d.exec("get count input"); v != "2\n" {
		t.Errorf("count: %q", v)
	}
	if v := d.exec("get attr #user name"); v != "user\n" {
		t.Errorf("attr: %q", v)
	}
	// Clicks that start no new document do not wait for one.
	for _, link := range []string{"text=Jump", "text=Nothing", "#framer"} {
		t0 := time.Now()
		d.exec("click " + link)
		if el := time.Since(t0); el > 2*time.Second {
			t.Errorf("click %s took %v", link, el)
		}
	}
	if v := d.exec("get url"); !strings.HasSuffix(v, "/login#section2\n") {
		t.Errorf("url after the fragment link: %q", v)
	}
	// Back to the same document, and an open that gets no document (204).
	d.exec("back")
	if v := d.exec("get url"); !strings.HasSuffix(v, "/login\n") {
		t.Errorf("url after back: %q", v)
	}
	if r := d.run("open "+site.URL+"/nocontent", 10); r.ExitCode != 1 || !strings.Contains(r.Stderr, "cannot open") {
		t.Errorf("open of a 204: %+v", r)
	}
	if r := d.run("open http://127.0.0.1:1/", 10); r.ExitCode != 1 || !strings.HasPrefix(r.Stderr, "cannot open http://127.0.0.1:1/: net::ERR_") {
		t.Errorf("open of a closed port: %+v", r)
	}
	d.exec("open " + site.URL + "/login")
	d.exec("click text=Skip")
	if v := d.exec("get text #msg"); !strings.HasPrefix(v, "Hello link") {
		t.Errorf("after text= click: %q", v)
	}
	d.exec("wait --text link")
	// networkidle waits for the requests the page still makes. The request
	// starts within the eval: one started by a timer could start after the
	// wait found the page quiet on a loaded machine, which is right.
	d.exec(`eval "fetch('/slowframe'); 1"`)
	t0 := time.Now()
	if v := d.exec("wait --load networkidle"); v != "Network idle\n" {
		t.Errorf("wait networkidle: %q", v)
	}
	if el := time.Since(t0); el < 3*time.Second {
		t.Errorf("networkidle returned after %v, before the 3 s request ended", el)
	}
	if r := d.run("get text #nope", 10); r.ExitCode != 1 || r.Stderr != "element not found: #nope\n" {
		t.Errorf("missing element: %+v", r)
	}
	if r := d.run("wait #nope", 1); r.ExitCode != -1 || r.Stderr != "Command timed out after 1s" {
		t.Errorf("wait timeout: %+v", r)
	}
	if r := d.run("pdf ../escape.pdf", 10); r.ExitCode != 1 || !strings.Contains(r.Stderr, "outside the workspace") {
		t.Errorf("pdf outside: %+v", r)
	}
	d.exec("pdf docs/page.pdf")
	if b, err := os.ReadFile(filepath.Join(ws, "docs/page.pdf")); err != nil || !bytes.HasPrefix(b, []byte("%PDF-")) {
		t.Errorf("pdf: %v %.10q", err, b)
	}
	d.exec("set viewport 800 600")
	d.exec("screenshot " + filepath.Join(ws, "small.png"))
	checkPNG(t, filepath.Join(ws, "small.png"), 800, 600)

	// Tabs.
	d.exec("tab new " + site.URL + "/login")
	tabs := d.exec("tab")
	if !strings.Contains(tabs, "* [1] Login - "+site.URL+"/login") || !strings.Contains(tabs, "  [0] Welcome") {
		t.Errorf("tabs:\n%s", tabs)
	}
	d.exec("tab 0")
	if v := d.exec("get title"); v != "Welcome\n" {
		t.Errorf("title in tab 0: %q", v)
	}
	// A page that opens a window: the window is a tab too.
	d.exec(`eval "window.open('about:blank#popup'); 1"`)
	if tabs := d.exec("tab"); !strings.Contains(tabs, "[2] ") || !strings.Contains(tabs, "#popup") {
		t.Errorf("popup not listed:\n%s", tabs)
	}
	// A page that closes itself: the next command runs in the tab left.
	d.exec("tab 2")
	d.exec(`eval "setTimeout(() => window.close(), 0); 1"`)
	// The browser closes the page a moment later (longer on a loaded
	// machine); until then it is listed and commands address it.
	d.waitExec("tab", func(tabs string) bool { return !strings.Contains(tabs, "[2]") }, "the closed page gone from the tabs")
	if v := d.exec("get url"); strings.Contains(v, "#popup") {
		t.Errorf("url after the page closed itself: %q", v)
	}
	d.exec("tab close 1")
	if r := d.run("tab close", 10); r.ExitCode != 1 {
		t.Errorf("closing the last tab: %+v", r)
	}

	// A batch through the same browser.
	var br gullapi.ExecBatchResponse
	stop := false
	d.post(gullapi.PathExecBatch, gullapi.ExecBatchRequest{Commands: []string{"open " + site.URL + "/login", "fill #user batch", "click text=Sign in", "get title", "bogus"}, StopOnError: &stop}, &br, gullapi.DefaultBatchTimeout*time.Second)
	if br.TotalSteps != 5 || br.CompletedSteps != 5 || br.Success || br.Results[3].Stdout != "Welcome\n" || br.Results[4].ExitCode != 1 {
		t.Errorf("batch: %+v", br)
	}

	// A persistent cookie survives a restart of gull (Chromium is closed
	// gracefully and writes it to the profile).
	d.exec("open " + site.URL + "/setcookie")
	if c := d.exec("cookies"); !strings.Contains(c, "sid=persist-me") {
		t.Errorf("cookies: %q", c)
	}
	d.exec("cookies set extra 1")
	d.stop()
	// A lock left by a Chromium of another host must not block the profile.
	profile := filepath.Join(ws, ".browser", "profile")
	os.Remove(filepath.Join(profile, "SingletonLock"))
	if err := os.Symlink("some-other-host-4242", filepath.Join(profile, "SingletonLock")); err != nil {
		t.Fatal(err)
	}
	d2 := startGull(t, ws)
	if c := d2.exec("cookies"); !strings.Contains(c, "sid=persist-me") {
		t.Errorf("cookie lost across a restart: %q", c)
	}
	if v := d2.exec("session list"); v != "sb-test\n" {
		t.Errorf("session list: %q", v)
	}

	// Chromium dies: health says degraded, gull restarts it.
	pid := d2.m.Browser().PID()
	if pid == 0 {
		t.Fatal("no chromium pid")
	}
	if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	d2.waitHealth(func(h gullapi.HealthResponse) bool { return h.Status == "degraded" && !h.BrowserReady }, "degraded")
	d2.waitHealth(func(h gullapi.HealthResponse) bool { return h.Status == "healthy" && h.BrowserReady }, "healthy again")
	if d2.m.Browser().PID() == pid {
		t.Error("same pid after the restart")
	}
	d2.exec("open " + site.URL + "/login")

	// close closes the browser; the next command starts it again.
	if v := d2.exec("close"); v != "Browser closed\n" {
		t.Errorf("close: %q", v)
	}
	if h := d2.health(); h.BrowserActive || h.Status != "healthy" {
		t.Errorf("health after close: %+v", h)
	}
	if v := d2.exec("get url"); v != "about:blank\n" {
		t.Errorf("url after close: %q", v)
	}
}

func checkPNG(t *testing.T, path string, w, h int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot %s is not a PNG: %v", path, err)
	}
	if b := img.Bounds(); b.Dx() != w || b.Dy() != h {
		t.Errorf("screenshot %s is %dx%d, want %dx%d", path, b.Dx(), b.Dy(), w, h)
	}
}

// TestPageCannotDriveGull: a page in gull's own browser posts a command to
// gull on localhost (a token-less gull, so only the Origin and Host checks
// stand in the way); the command must not run.
func TestPageCannotDriveGull(t *testing.T) {
	site := testSite(t)
	d := startGullToken(t, t.TempDir(), "")
	d.exec("open " + site.URL + "/login")
	for _, target := range []string{d.url, strings.Replace(d.url, "127.0.0.1", "localhost", 1)} {
		js := fmt.Sprintf(`fetch(%q, {method: 'POST', mode: 'no-cors', headers: {'Content-Type': 'text/plain'}, body: JSON.stringify({cmd: 'cookies set pwned 1 --url %s'})}).then(() => 'sent', e => 'failed: ' + e)`,
			target+gullapi.PathExec, site.URL)
		if v := d.exec("eval " + shellQuote(js)); v != "sent\n" && !strings.HasPrefix(v, "failed") {
			t.Fatalf("fetch: %q", v)
		}
	}
	time.Sleep(300 * time.Millisecond)
	if c := d.exec("cookies"); strings.Contains(c, "pwned") {
		t.Fatalf("a page drove gull: %q", c)
	}
	// The same request without a browser's headers works (the check is
	// what refused it, not a broken request).
	d.exec("cookies set direct 1 --url " + site.URL)
	if c := d.exec("cookies"); !strings.Contains(c, "direct=1") {
		t.Fatalf("cookies: %q", c)
	}
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// TestClosingPagesDoNotHangGull: commands around pages that close (a page
// closing itself right after a command, or while a command waits on it, a
// closed tab still being torn down) end promptly: Chromium never answers a
// command in flight on a page that closes, and the runner's release of the
// command's objects used to wait for that answer forever.
func TestClosingPagesDoNotHangGull(t *testing.T) {
	site := testSite(t)
	d := startGull(t, t.TempDir())
	d.exec("open " + site.URL + "/login")
	for i := range 15 {
		d.exec("tab new")
		t0 := time.Now()
		d.exec(`eval "setTimeout(() => window.close(), 0); 1"`)
		if el := time.Since(t0); el > 10*time.Second {
			t.Errorf("%d: eval of a page closing itself took %v", i, el)
		}
		d.waitExec("tab", func(tabs string) bool { return !strings.Contains(tabs, "[1]") }, "the closed page gone")
		if v := d.exec("get url"); v != site.URL+"/login\n" {
			t.Fatalf("%d: url in the tab left: %q", i, v)
		}
	}
	// A command waiting on a page when it closes fails at once, saying so.
	d.exec("tab new")
	t0 := time.Now()
	r := d.run(`eval "setTimeout(() => window.close(), 20); new Promise(() => {})"`, 20)
	if r.ExitCode != 1 || !strings.Contains(r.Stderr, "page closed") || time.Since(t0) > 10*time.Second {
		t.Errorf("eval on a page that closes: %+v after %v", r, time.Since(t0))
	}
	// The next command right after `tab close` sees the closed tab gone.
	for i := range 5 {
		d.exec("tab new")
		d.exec("tab close 1")
		if tabs := d.exec("tab"); strings.Contains(tabs, "[1]") {
			t.Errorf("%d: closed tab listed:\n%s", i, tabs)
		}
	}
}
