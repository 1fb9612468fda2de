package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/shipyard-dev/shipyard/internal/gull/cdp"
)

// chromiumBinary is the headless Chromium scripts/install-deps.sh installs (CHROMIUM overrides).
func chromiumBinary() string {
	if b := os.Getenv("CHROMIUM"); b != "" {
		return b
	}
	return "/usr/lib/chromium/chromium-headless-shell"
}

// page is one tab of a headless Chromium the test started, driven over the DevTools pipe
// (internal/gull/cdp), with every console error, uncaught exception and Content-Security-
// Policy violation recorded.
type page struct {
	t       *testing.T
	conn    *cdp.Conn
	session string

	mu       sync.Mutex
	problems []string
}

// startChromium starts Chromium with a fresh profile and attaches to its first tab. A missing
// Chromium fails the test.
func startChromium(t *testing.T, downloads string) *page {
	t.Helper()
	bin := chromiumBinary()
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("the console tests need headless Chromium at %s (scripts/install-deps.sh installs it; CHROMIUM names another): %v", bin, err)
	}
	cmdR, cmdW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"--headless", "--remote-debugging-pipe", "--user-data-dir=" + t.TempDir(),
		"--no-first-run", "--no-default-browser-check", "--disable-gpu", "--disable-dev-shm-usage",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-extensions",
		"--hide-scrollbars", "--mute-audio", "--window-size=1280,800", "about:blank"}
	if os.Geteuid() == 0 {
		args = append(args, "--no-sandbox") // Chromium refuses its sandbox as root
	}
	cmd := exec.Command(bin, args...)
	cmd.ExtraFiles = []*os.File{cmdR, outW}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	cmd.WaitDelay = 2 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	cmdR.Close()
	outW.Close()
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	conn := cdp.New(outR, cmdW)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = conn.Call(ctx, "", "Browser.close", nil, nil)
		cancel()
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
		outR.Close()
		cmdW.Close()
	})
	p := &page{t: t, conn: conn}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var targets struct {
		TargetInfos []struct{ TargetID, Type string } `json:"targetInfos"`
	}
	if err := conn.Call(ctx, "", "Target.getTargets", nil, &targets); err != nil {
		t.Fatalf("chromium: %v\n%s", err, stderr.String())
	}
	target := ""
	for _, ti := range targets.TargetInfos {
		if ti.Type == "page" {
			target = ti.TargetID
		}
	}
	if target == "" {
		t.Fatalf("chromium has no page: %+v", targets)
	}
	var att struct {
		SessionID string `json:"sessionId"`
	}
	if err := conn.Call(ctx, "", "Target.attachToTarget", map[string]any{"targetId": target, "flatten": true}, &att); err != nil {
		t.Fatal(err)
	}
	p.session = att.SessionID
	events, _ := conn.Subscribe("Runtime.consoleAPICalled", "Runtime.exceptionThrown", "Log.entryAdded")
	go p.watch(events)
	for _, m := range []string{"Page.enable", "Runtime.enable", "Log.enable"} {
		p.call(m, nil, nil)
	}
	// A violation of the page's Content-Security-Policy is recorded by the page itself too.
	p.call("Page.addScriptToEvaluateOnNewDocument", map[string]any{"source": `window.__csp = [];
document.addEventListener('securitypolicyviolation', (e) => window.__csp.push(e.violatedDirective + ' ' + e.blockedURI));`}, nil)
	if downloads != "" {
		p.browserCall("Browser.setDownloadBehavior", map[string]any{"behavior": "allow", "downloadPath": downloads}, nil)
	}
	return p
}

// watch records the problems the page reports. A failed request is one only when the test
// did not declare it expected (allowed404).
func (p *page) watch(events <-chan cdp.Event) {
	for ev := range events {
		var msg string
		switch ev.Method {
		case "Runtime.consoleAPICalled":
			var e struct {
				Type string `json:"type"`
				Args []struct {
					Value       any    `json:"value"`
					Description string `json:"description"`
				} `json:"args"`
			}
			_ = json.Unmarshal(ev.Params, &e)
			if e.Type != "error" && e.Type != "assert" && e.Type != "warning" {
				continue
			}
			var parts []string
			for _, a := range e.Args {
				parts = append(parts, fmt.Sprint(a.Value, a.Description))
			}
			msg = "console." + e.Type + ": " + strings.Join(parts, " ")
		case "Runtime.exceptionThrown":
			var e struct {
				ExceptionDetails struct {
					Text      string `json:"text"`
					Exception struct {
						Description string `json:"description"`
					} `json:"exception"`
				} `json:"exceptionDetails"`
			}
			_ = json.Unmarshal(ev.Params, &e)
			msg = "exception: " + e.ExceptionDetails.Text + " " + e.ExceptionDetails.Exception.Description
		case "Log.entryAdded":
			var e struct {
				Entry struct {
					Source, Level, Text, URL string
				} `json:"entry"`
			}
			_ = json.Unmarshal(ev.Params, &e)
			if e.Entry.Level != "error" && e.Entry.Level != "warning" {
				continue
			}
			if e.Entry.Source == "network" && allowed404(e.Entry.URL, e.Entry.Text) {
				continue
			}
			msg = "log " + e.Entry.Source + "/" + e.Entry.Level + ": " + e.Entry.Text + " " + e.Entry.URL
		}
		p.mu.Lock()
		p.problems = append(p.problems, msg)
		p.mu.Unlock()
	}
}

// optionalEndpoints are the endpoints of features this bay may not have yet: the console asks
// for them and shows a notice on 404, which the browser logs as a failed request.
var optionalEndpoints = []string{"/metrics", "/jobs", "/network", "/network/events", "/v1/sandbox/execs", "/v1/skills", "/readyz"}

func allowed404(url, text string) bool {
	if !strings.Contains(text, "404") {
		return false
	}
	path := url
	if i := strings.Index(path, "?"); i >= 0 {
		path = path[:i]
	}
	for _, e := range optionalEndpoints {
		if strings.HasSuffix(path, e) {
			return true
		}
	}
	return false
}

// takeProblems returns and forgets what the page reported, the CSP violations it saw included.
func (p *page) takeProblems() []string {
	var csp []string
	_ = p.evalErr(`window.__csp || []`, &csp)
	p.eval(`window.__csp = []`, nil)
	p.mu.Lock()
	defer p.mu.Unlock()
	out := p.problems
	p.problems = nil
	for _, v := range csp {
		out = append(out, "CSP violation: "+v)
	}
	return out
}

func (p *page) call(method string, params, result any) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.conn.Call(ctx, p.session, method, params, result); err != nil {
		p.t.Fatalf("%s: %v", method, err)
	}
}

func (p *page) browserCall(method string, params, result any) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.conn.Call(ctx, "", method, params, result); err != nil {
		p.t.Fatalf("%s: %v", method, err)
	}
}

// evalErr evaluates expr in the page (awaiting a promise) and decodes its value into out.
func (p *page) evalErr(expr string, out any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var res struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		ExceptionDetails *struct {
			Text      string `json:"text"`
			Exception struct {
				Description string `json:"description"`
			} `json:"exception"`
		} `json:"exceptionDetails"`
	}
	err := p.conn.Call(ctx, p.session, "Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true, "awaitPromise": true}, &res)
	if err != nil {
		return err
	}
	if res.ExceptionDetails != nil {
		return fmt.Errorf("%s: %s %s", expr, res.ExceptionDetails.Text, res.ExceptionDetails.Exception.Description)
	}
	if out != nil && len(res.Result.Value) > 0 {
		return json.Unmarshal(res.Result.Value, out)
	}
	return nil
}

func (p *page) eval(expr string, out any) {
	p.t.Helper()
	if err := p.evalErr(expr, out); err != nil {
		p.t.Fatal(err)
	}
}

// waitFor polls a JavaScript condition until it is truthy.
func (p *page) waitFor(what, cond string, timeout time.Duration) {
	p.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		var ok bool
		err := p.evalErr("!!("+cond+")", &ok)
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			var body string
			_ = p.evalErr(`document.querySelector('main').innerText.slice(0, 2000) + '\n' + document.getElementById('notice').innerText`, &body)
			p.t.Fatalf("waiting for %s (%s): %v\npage:\n%s", what, cond, err, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// navigate loads url and waits for the document to be complete.
func (p *page) navigate(url string) {
	p.t.Helper()
	p.call("Page.navigate", map[string]any{"url": url}, nil)
	p.waitFor("the page to load", `document.readyState === 'complete' && location.href === `+jsString(url), 30*time.Second)
}

// viewport sets the window's size in CSS pixels.
func (p *page) viewport(w, h int) {
	p.t.Helper()
	p.call("Emulation.setDeviceMetricsOverride", map[string]any{"width": w, "height": h, "deviceScaleFactor": 1, "mobile": false}, nil)
}

// screenshot saves a PNG of the whole page (at most 3000 px tall) as dir/name.png.
func (p *page) screenshot(dir, name string) {
	p.t.Helper()
	var m struct {
		Content struct {
			Width  float64 `json:"width"`
			Height float64 `json:"height"`
		} `json:"cssContentSize"`
	}
	p.call("Page.getLayoutMetrics", nil, &m)
	clip := map[string]any{"x": 0, "y": 0, "width": m.Content.Width, "height": min(m.Content.Height, 3000), "scale": 1}
	var res struct {
		Data string `json:"data"`
	}
	p.call("Page.captureScreenshot", map[string]any{"format": "png", "captureBeyondViewport": true, "clip": clip}, &res)
	b, err := base64.StdEncoding.DecodeString(res.Data)
	if err != nil {
		p.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), b, 0o644); err != nil {
		p.t.Fatal(err)
	}
}

// key sends one key press (keyDown with its text, then keyUp) to the focused element.
func (p *page) key(key, code string, keyCode int, text string) {
	p.t.Helper()
	down := map[string]any{"type": "keyDown", "key": key, "code": code, "windowsVirtualKeyCode": keyCode}
	if text != "" {
		down["text"] = text
	}
	p.call("Input.dispatchKeyEvent", down, nil)
	p.call("Input.dispatchKeyEvent", map[string]any{"type": "keyUp", "key": key, "code": code, "windowsVirtualKeyCode": keyCode}, nil)
}

// setFiles gives the file input matched by selector the local files.
func (p *page) setFiles(selector string, files ...string) {
	p.t.Helper()
	var doc struct {
		Root struct {
			NodeID int `json:"nodeId"`
		} `json:"root"`
	}
	p.call("DOM.getDocument", nil, &doc)
	var q struct {
		NodeID int `json:"nodeId"`
	}
	p.call("DOM.querySelector", map[string]any{"nodeId": doc.Root.NodeID, "selector": selector}, &q)
	if q.NodeID == 0 {
		p.t.Fatalf("no element %s", selector)
	}
	p.call("DOM.setFileInputFiles", map[string]any{"nodeId": q.NodeID, "files": files}, nil)
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
