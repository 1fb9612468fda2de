package e2e

import (
	"regexp"
	"strings"
	"testing"

	"github.com/moby/moby/client"
)

const browserProfiles = `profiles:
  - id: browser-python
    pids_limit: 512
    containers:
      - name: ship
        image: "ship:latest"
        runtime_type: ship
        runtime_port: 8123
        resources: {cpus: 1.0, memory: "1g"}
        capabilities: [python, shell, filesystem]
        primary_for: [python, shell, filesystem]
        env: {SHIP_NO_KERNEL: "1"} # as the default profile: the kernel starts on the first python call
      - name: browser
        image: "gull:latest"
        runtime_type: gull
        runtime_port: 8115
        resources: {cpus: 1.0, memory: "1g"}
        capabilities: [browser]
`

// The page ship serves: a form whose submit writes the greeting into the title.
const formPage = `<!doctype html><html><head><title>Form</title></head><body>
<form id="f" onsubmit="document.title = 'Hello, ' + document.getElementById('name').value; return false;">
<label for="name">Name</label><input id="name" name="name" type="text">
<button type="submit">Greet</button></form></body></html>`

func (b *Bay) browser(id, cmd string) Response {
	b.t.Helper()
	return expect(b.t, b.do("POST", "/v1/sandboxes/"+id+"/browser/exec", map[string]any{"cmd": cmd, "timeout": 60}, nil), 200, "browser "+cmd)
}

func (b *Bay) browserOK(id, cmd string) string {
	b.t.Helper()
	r := b.browser(id, cmd)
	if r.Get("success") != true {
		b.t.Fatalf("browser %q: %s", cmd, r)
	}
	return r.Str("output")
}

// serveSite starts a static HTTP server on port 8000 in ship's container, detached from the
// shell call, and waits until it answers.
func serveSite(t *testing.T, b *Bay, id string) {
	t.Helper()
	b.shellOK(id, "setsid python3 -m http.server 8000 --directory /workspace/site >/dev/null 2>&1 < /dev/null &")
	b.shellOK(id, "for i in $(seq 100); do python3 -c 'import urllib.request; urllib.request.urlopen(\"http://127.0.0.1:8000/\")' 2>/dev/null && exit 0; sleep 0.1; done; exit 1")
}

var refRE = regexp.MustCompile(`(?m)^\s*- (\w+) .*\[ref=(e\d+)\]`)

// refOf returns the ref of the first element of role in an interactive snapshot.
func refOf(t *testing.T, snapshot, role string) string {
	t.Helper()
	for _, m := range refRE.FindAllStringSubmatch(snapshot, -1) {
		if m[1] == role {
			return "@" + m[2]
		}
	}
	t.Fatalf("no %s in the snapshot:\n%s", role, snapshot)
	return ""
}

// The seed's collaboration flow: ship serves a form from the shared workspace, gull fills and
// submits it, the screenshot it takes lands in the workspace where python reads it; a batch
// that fails midway says so consistently in its answer and in the history; the browser's
// profile (a cookie) survives a stop and resume.
func TestBrowserCollaboration(t *testing.T) {
	t.Parallel()
	b := startBay(t, bayOptions{profiles: browserProfiles})
	id := b.create(map[string]any{"profile": "browser-python"}, nil).Str("id")
	b.writeFile(id, "site/index.html", formPage)
	serveSite(t, b, id)

	contains(t, b.browserOK(id, "open http://ship:8000/index.html"), "Form", "open")
	snap := b.browserOK(id, "snapshot -i")
	input, button := refOf(t, snap, "textbox"), refOf(t, snap, "button")
	b.browserOK(id, "fill "+input+" Ada")
	b.browserOK(id, "click "+button)
	if title := strings.TrimSpace(b.browserOK(id, "get title")); title != "Hello, Ada" {
		t.Fatalf("title after submitting the form = %q", title)
	}
	b.browserOK(id, "screenshot shots/form.png")
	size := b.pythonOK(id, `import struct
with open('/workspace/shots/form.png', 'rb') as f:
    head = f.read(24)
assert head[:8] == b'\x89PNG\r\n\x1a\n', head[:8]
print(struct.unpack('>II', head[16:24]))`)
	if !regexp.MustCompile(`^\(\d+, \d+\)$`).MatchString(size) || size == "(0, 0)" {
		t.Fatalf("screenshot size read by python = %q", size)
	}

	// A failing command: success false with the command's stderr, recorded as such.
	fail := b.browser(id, "click @e999")
	if fail.Get("success") != false || fail.Get("exit_code") == float64(0) || fail.Str("error") == "" {
		t.Fatalf("a failing command: %s", fail)
	}

	// A batch stopping at its failing step: the answer and the history agree.
	batch := expect(t, b.do("POST", "/v1/sandboxes/"+id+"/browser/exec_batch", map[string]any{
		"commands": []string{"get title", "click @e999", "get url"}, "timeout": 60}, nil), 200, "batch")
	results, _ := batch.Get("results").([]any)
	if batch.Get("success") != false || batch.Get("total_steps") != float64(3) || batch.Get("completed_steps") != float64(2) ||
		len(results) != 2 || batch.Str("execution_id") == "" {
		t.Fatalf("batch stopping on its error: %s", batch)
	}
	h := expect(t, b.do("GET", "/v1/sandboxes/"+id+"/history?exec_type=browser_batch", nil, nil), 200, "history")
	entries, _ := h.Get("entries").([]any)
	if len(entries) != 1 {
		t.Fatalf("browser_batch history: %s", h)
	}
	e := entries[0].(map[string]any)
	if e["id"] != batch.Str("execution_id") || e["success"] != false || e["code"] != "get title\nclick @e999\nget url" {
		t.Fatalf("history entry %v does not match the batch %s", e, batch)
	}

	// The profile lives in the cargo: a cookie set before a stop is there after the resume.
	b.browserOK(id, `eval "(() => { document.cookie = 'seen=yes; max-age=86400; path=/'; return document.cookie; })()"`)
	expect(t, b.do("POST", "/v1/sandboxes/"+id+"/stop", nil, nil), 200, "stop")
	serveSite(t, b, id)
	b.browserOK(id, "open http://ship:8000/index.html")
	if got := b.browserOK(id, "eval document.cookie"); !strings.Contains(got, "seen=yes") {
		t.Fatalf("cookie after stop and resume: %q", got)
	}
}

// A profile with chromium_sandbox keeps Chromium's own sandbox: its renderers run without
// --no-sandbox (in namespaces of their own) and the browser works; the gull container keeps
// every other hardening.
func TestBrowserChromiumSandbox(t *testing.T) {
	t.Parallel()
	cli := docker(t)
	profiles := strings.Replace(browserProfiles, "        capabilities: [browser]\n",
		"        capabilities: [browser]\n        chromium_sandbox: true\n", 1)
	b := startBay(t, bayOptions{profiles: profiles})
	id := b.create(map[string]any{"profile": "browser-python"}, nil).Str("id")
	contains(t, b.browserOK(id, "open data:text/html,<title>Sandboxed</title>"), "Sandboxed", "open")
	if got := strings.TrimSpace(b.browserOK(id, "get title")); got != "Sandboxed" {
		t.Fatalf("title %q", got)
	}
	var gull string
	for _, c := range sessionContainers(t, cli, id) {
		if name := strings.Fields(c)[0]; strings.HasSuffix(name, "-browser") {
			gull = name
		}
	}
	if gull == "" {
		t.Fatalf("no browser container among %v", sessionContainers(t, cli, id))
	}
	args := execIn(t, cli, gull, "sh", "-c", "cat /proc/[0-9]*/cmdline | tr '\\0' ' '")
	if strings.Contains(args, "--no-sandbox") || !strings.Contains(args, "--type=renderer") {
		t.Fatalf("Chromium's processes in the sandboxed profile:\n%s", args)
	}
}

// The browser's container holds the sandbox's network namespace (ship shares it). Restarted
// behind bay's back, it comes back with a new namespace while ship stays in the old one, which
// has lost its interfaces: bay must not keep calling the stranded ship. The next calls are
// answered by a new session of both runtimes, with the workspace intact.
func TestBrowserContainerRestarted(t *testing.T) {
	t.Parallel()
	cli := docker(t)
	b := startBay(t, bayOptions{profiles: browserProfiles})
	id := b.create(map[string]any{"profile": "browser-python"}, nil).Str("id")
	b.writeFile(id, "kept.txt", "still here")
	contains(t, b.browserOK(id, "open data:text/html,<title>Before</title>"), "Before", "open")
	before := sessionContainers(t, cli, id)
	var gull string
	for _, c := range before {
		if f := strings.Fields(c); strings.HasSuffix(f[0], "-browser") && f[1] == "running" {
			gull = f[0]
		}
	}
	if gull == "" {
		t.Fatalf("no running browser container among %v", before)
	}
	grace := 1
	if _, err := cli.ContainerRestart(t.Context(), gull, client.ContainerRestartOptions{Timeout: &grace}); err != nil {
		t.Fatal(err)
	}
	if got := b.shell(id, map[string]any{"command": "cat kept.txt"}); got.Status != 200 || got.Str("output") != "still here" {
		t.Fatalf("shell after the browser container's restart: %s", got)
	}
	contains(t, b.browserOK(id, "open data:text/html,<title>After</title>"), "After", "open after the restart")
	oldSession := strings.Fields(before[0])[2]
	for _, c := range sessionContainers(t, cli, id) {
		if strings.Fields(c)[2] == oldSession {
			t.Errorf("a container of the stranded session is left: %s (now %v)", c, sessionContainers(t, cli, id))
		}
	}
}
