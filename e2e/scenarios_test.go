package e2e

import (
	"bytes"
	"crypto/rand"
	"strings"
	"testing"
	"time"
)

// Scenario 1: interactive data analysis (Jupyter style): state within a session, stop/resume
// loses variables but keeps files, binary download.
func TestScenario1DataAnalysis(t *testing.T) {
	t.Parallel()
	cli := docker(t)
	b := startBay(t, bayOptions{})
	sb := b.create(map[string]any{}, nil)
	id := sb.Str("id")
	if sb.Str("status") != "idle" {
		t.Fatalf("new sandbox status = %q, want idle", sb.Str("status"))
	}
	if n := len(sessionContainers(t, cli, id)); n != 0 {
		t.Fatalf("lazy create started %d containers", n)
	}

	csv := "month,revenue\njan,100\nfeb,250\nmar,175\n"
	up := expect(t, b.upload(id, "sales.csv", []byte(csv)), 200, "upload sales.csv")
	if up.Str("status") != "ok" || up.Str("path") != "sales.csv" || up.Get("size") != float64(len(csv)) {
		t.Fatalf("upload response: %s", up)
	}

	out := b.pythonOK(id, "import pandas as pd; df = pd.read_csv('sales.csv'); df.head()")
	contains(t, out, "revenue", "df.head()")
	contains(t, out, "feb", "df.head()")
	// numpy 2 shows a scalar as np.int64(525); the value is what matters.
	if out := b.pythonOK(id, "df['revenue'].sum()"); out != "525" && out != "np.int64(525)" {
		t.Fatalf("revenue sum = %q, want 525", out)
	}
	b.pythonOK(id, "import matplotlib.pyplot as plt; df['revenue'].plot(); plt.savefig('chart.png')")
	png := expect(t, b.download(id, "chart.png"), 200, "download chart.png")
	if !bytes.HasPrefix(png.Body, []byte("\x89PNG\r\n\x1a\n")) {
		t.Fatalf("chart.png is not a PNG (%d bytes)", len(png.Body))
	}
	if ct := png.Header.Get("Content-Type"); ct != "application/octet-stream" {
		t.Fatalf("download Content-Type = %q", ct)
	}
	contains(t, png.Header.Get("Content-Disposition"), "chart.png", "Content-Disposition")
	b.shellOK(id, "echo scratch > /tmp/scratch-marker")

	expect(t, b.do("POST", "/v1/sandboxes/"+id+"/stop", nil, nil), 200, "stop")
	if st := b.get(id).Str("status"); st != "idle" {
		t.Fatalf("status after stop = %q, want idle", st)
	}
	if n := len(sessionContainers(t, cli, id)); n != 0 {
		t.Fatalf("stop left %d containers behind (stop removes them)", n)
	}

	r := b.python(id, "df.head()")
	if r.Get("success") != false || !strings.Contains(r.Str("error"), "NameError") {
		t.Fatalf("after resume df must be gone with a NameError: %s", r)
	}
	out = b.pythonOK(id, "import pandas as pd; df = pd.read_csv('sales.csv'); df.head()")
	contains(t, out, "revenue", "reload after resume")
	png2 := expect(t, b.download(id, "chart.png"), 200, "download chart.png after resume")
	if !bytes.Equal(png.Body, png2.Body) {
		t.Fatal("chart.png changed across stop/resume")
	}
	if out := b.shellOK(id, "test -e /tmp/scratch-marker && echo kept || echo fresh"); out != "fresh" {
		t.Fatalf("/tmp must be fresh after resume, got %q", out)
	}

	expect(t, b.do("DELETE", "/v1/sandboxes/"+id, nil, nil), 204, "delete")
	expectError(t, b.get(id), 404, "not_found", "get after delete")
}

// Scenario 2: script development (IDE style): overwrite, traceback on failure, read back.
func TestScenario2ScriptDevelopment(t *testing.T) {
	t.Parallel()
	docker(t)
	b := startBay(t, bayOptions{})
	id := b.create(nil, nil).Str("id")

	b.writeFile(id, "script.py", "print(1/0)")
	r := b.python(id, "exec(open('script.py').read())")
	if r.Get("success") != false {
		t.Fatalf("buggy script must fail: %s", r)
	}
	contains(t, r.Str("error"), "ZeroDivisionError: division by zero", "traceback")
	contains(t, r.Str("error"), "Traceback", "traceback")
	if r.Str("output") != "" {
		t.Fatalf("output of a failing script = %q, want empty", r.Str("output"))
	}

	b.writeFile(id, "script.py", "print('Hello, World!')")
	if out := b.pythonOK(id, "exec(open('script.py').read())"); out != "Hello, World!" {
		t.Fatalf("output = %q", out)
	}
	if got := b.readFile(id, "script.py"); got != "print('Hello, World!')" {
		t.Fatalf("read back %q", got)
	}
	expect(t, b.do("DELETE", "/v1/sandboxes/"+id, nil, nil), 204, "delete")
}

// Scenario 3: project init with dependencies kept in the workspace.
//
// Substitution: PyPI is unreachable here, so `pip install requests==2.31.0` cannot download.
// The same behaviour — pip installing a pinned requirement into /workspace/.libs, and the
// library surviving stop/resume — is tested with a wheel built in the test and uploaded into the
// workspace (`pip install --no-index --find-links wheels -r requirements.txt --target .libs`).
func TestScenario3DependenciesInWorkspace(t *testing.T) {
	t.Parallel()
	docker(t)
	b := startBay(t, bayOptions{})
	id := b.create(nil, nil).Str("id")

	b.writeFile(id, "requirements.txt", "shipyard-demo==2.31.0\n")
	b.writeFile(id, "src/main.py", "import shipyard_demo; print(shipyard_demo.__version__)")
	if _, err := os_stat_listing(b, id, "src"); err != nil {
		t.Fatal(err)
	}
	wheel := buildWheel(t, "shipyard_demo", "2.31.0")
	expect(t, b.upload(id, "wheels/shipyard_demo-2.31.0-py3-none-any.whl", wheel), 200, "upload wheel")

	r := b.python(id, "import subprocess; p = subprocess.run(['pip', 'install', '--no-index', '--find-links', 'wheels', '-r', 'requirements.txt', '--target', '/workspace/.libs'], capture_output=True, text=True); print(p.returncode); print(p.stdout[-300:]); print(p.stderr[-500:])")
	if r.Get("success") != true || !strings.HasPrefix(r.Str("output"), "0") {
		t.Fatalf("pip install --target failed: %s", r)
	}
	if out := b.pythonOK(id, "import sys; sys.path.insert(0, '/workspace/.libs'); exec(open('src/main.py').read())"); out != "2.31.0" {
		t.Fatalf("installed library version = %q", out)
	}
	expect(t, b.do("POST", "/v1/sandboxes/"+id+"/stop", nil, nil), 200, "stop")
	if out := b.pythonOK(id, "import sys; sys.path.insert(0, '/workspace/.libs'); import shipyard_demo; print(shipyard_demo.__version__)"); out != "2.31.0" {
		t.Fatalf("after resume: %q", out)
	}
	expect(t, b.do("DELETE", "/v1/sandboxes/"+id, nil, nil), 204, "delete")
}

// os_stat_listing checks that a directory exists through the directories endpoint.
func os_stat_listing(b *Bay, id, dir string) ([]any, error) {
	r := expect(b.t, b.do("GET", "/v1/sandboxes/"+id+"/filesystem/directories?path=.", nil, nil), 200, "list .")
	entries, _ := r.Get("entries").([]any)
	for _, e := range entries {
		m := e.(map[string]any)
		if m["name"] == dir && m["is_dir"] == true {
			return entries, nil
		}
	}
	b.t.Fatalf("directory %s was not created: %s", dir, r)
	return nil, nil
}

// Scenario 4: serverless quick run: three calls, lazy start, full cleanup.
func TestScenario4QuickRun(t *testing.T) {
	t.Parallel()
	cli := docker(t)
	b := startBay(t, bayOptions{})
	sb := b.create(nil, nil)
	id, cargo := sb.Str("id"), sb.Str("cargo_id")
	if len(sessionContainers(t, cli, id)) != 0 {
		t.Fatal("create must not start a container")
	}
	start := time.Now()
	if out := b.pythonOK(id, "print(2 * 21)"); out != "42" {
		t.Fatalf("output %q", out)
	}
	t.Logf("cold create -> first python result: %v", time.Since(start))
	if len(sessionContainers(t, cli, id)) != 1 {
		t.Fatal("first exec must start exactly one container")
	}
	expect(t, b.do("DELETE", "/v1/sandboxes/"+id, nil, nil), 204, "delete")
	if n := len(sessionContainers(t, cli, id)); n != 0 {
		t.Fatalf("delete left %d containers", n)
	}
	if volumeExists(t, cli, "bay-cargo-"+cargo) {
		t.Fatal("delete left the managed cargo volume")
	}
	expectError(t, b.get(id), 404, "not_found", "get after delete")
	expect(t, b.do("DELETE", "/v1/sandboxes/"+id, nil, nil), 204, "repeat delete")
}

// Scenario 5: long job with extend_ttl and idempotent retries; no revival after expiry.
func TestScenario5ExtendTTL(t *testing.T) {
	t.Parallel()
	docker(t)
	b := startBay(t, bayOptions{})
	before := time.Now().UTC()
	sb := b.create(map[string]any{"profile": "python-default", "ttl": 120}, nil)
	id := sb.Str("id")
	exp := mustTime(t, sb.Str("expires_at"))
	if d := exp.Sub(before); d < 115*time.Second || d > 125*time.Second {
		t.Fatalf("expires_at %v is not ~120 s after create", d)
	}
	contains(t, b.pythonOK(id, "import time; print('start'); time.sleep(2); print('done')"), "done", "long job")

	key := "ttl-extend-" + randHex(t)
	r1 := expect(t, b.do("POST", "/v1/sandboxes/"+id+"/extend_ttl", map[string]any{"extend_by": 600}, map[string]string{"Idempotency-Key": key}), 200, "extend_ttl")
	exp1 := mustTime(t, r1.Str("expires_at"))
	if d := exp1.Sub(exp); d < 599*time.Second || d > 601*time.Second {
		t.Fatalf("extend_ttl moved expires_at by %v, want 600 s", d)
	}
	r2 := expect(t, b.do("POST", "/v1/sandboxes/"+id+"/extend_ttl", map[string]any{"extend_by": 600}, map[string]string{"Idempotency-Key": key}), 200, "extend_ttl retry")
	if !bytes.Equal(r1.Body, r2.Body) {
		t.Fatalf("idempotent retry must replay the same body:\n%s\n%s", r1.Body, r2.Body)
	}
	if got := mustTime(t, b.get(id).Str("expires_at")); !got.Equal(exp1) {
		t.Fatalf("the retry extended again: %v != %v", got, exp1)
	}
	// The same key with another body is a conflict.
	expectError(t, b.do("POST", "/v1/sandboxes/"+id+"/extend_ttl", map[string]any{"extend_by": 60}, map[string]string{"Idempotency-Key": key}), 409, "conflict", "key reuse")
	contains(t, b.pythonOK(id, "import time; print(time.time())"), ".", "exec after extend")

	// Expiry: a second sandbox with a 1 s TTL; then extend_ttl is refused (not revivable) and
	// capability calls are refused at once, before any GC.
	short := b.create(map[string]any{"ttl": 1}, nil).Str("id")
	time.Sleep(1500 * time.Millisecond)
	expectError(t, b.do("POST", "/v1/sandboxes/"+short+"/extend_ttl", map[string]any{"extend_by": 60}, nil), 409, "sandbox_expired", "extend after expiry")
	if st := b.get(short).Str("status"); st != "expired" {
		t.Fatalf("status = %q, want expired", st)
	}
	expectError(t, b.do("POST", "/v1/sandboxes/"+short+"/python/exec", map[string]any{"code": "1"}, nil), 409, "sandbox_expired", "exec on an expired sandbox")
	// An infinite TTL cannot be extended.
	inf := b.create(nil, nil).Str("id")
	expectError(t, b.do("POST", "/v1/sandboxes/"+inf+"/extend_ttl", map[string]any{"extend_by": 60}, nil), 409, "sandbox_ttl_infinite", "extend infinite")
	expectError(t, b.do("POST", "/v1/sandboxes/"+inf+"/extend_ttl", map[string]any{"extend_by": 0}, nil), 400, "validation_error", "extend_by 0")

	expect(t, b.do("DELETE", "/v1/sandboxes/"+id, nil, nil), 204, "delete")
}

// Scenario 6: an AI coding agent's fix loop with TTL extension and idempotent create.
func TestScenario6AgentFixLoop(t *testing.T) {
	t.Parallel()
	docker(t)
	b := startBay(t, bayOptions{})
	hdr := map[string]string{"Idempotency-Key": "agent-task-001-create-" + randHex(t)}
	sb := b.create(map[string]any{"profile": "python-default", "ttl": 300}, hdr)
	id := sb.Str("id")
	again := expect(t, b.do("POST", "/v1/sandboxes", map[string]any{"profile": "python-default", "ttl": 300}, hdr), 201, "idempotent create")
	if again.Str("id") != id || !bytes.Equal(again.Body, sb.Body) {
		t.Fatalf("idempotent create returned another sandbox: %s vs %s", again.Body, sb.Body)
	}

	buggy := "def calculate_fibonacci(n):\n    if n <= 1:\n        return n\n    return calculate_fibonacci(n-1) + calculate_fibonaci(n-2)  # typo\n\nprint(calculate_fibonacci(10))\n"
	b.writeFile(id, "solution.py", buggy)
	r := b.python(id, "exec(open('solution.py').read())")
	if r.Get("success") != false {
		t.Fatalf("want failure: %s", r)
	}
	contains(t, r.Str("error"), "NameError", "traceback")
	contains(t, r.Str("error"), "calculate_fibonaci", "traceback")

	fixed := strings.Replace(buggy, "calculate_fibonaci(n-2)  # typo", "calculate_fibonacci(n-2)", 1)
	b.writeFile(id, "solution.py", fixed)
	if out := b.pythonOK(id, "exec(open('solution.py').read())"); out != "55" {
		t.Fatalf("fixed output %q", out)
	}

	key := "agent-task-001-extend-1-" + randHex(t)
	r1 := expect(t, b.do("POST", "/v1/sandboxes/"+id+"/extend_ttl", map[string]any{"extend_by": 600}, map[string]string{"Idempotency-Key": key}), 200, "extend")
	if d := mustTime(t, r1.Str("expires_at")).Sub(mustTime(t, sb.Str("expires_at"))); d != 600*time.Second {
		t.Fatalf("extended by %v", d)
	}
	r2 := expect(t, b.do("POST", "/v1/sandboxes/"+id+"/extend_ttl", map[string]any{"extend_by": 600}, map[string]string{"Idempotency-Key": key}), 200, "extend retry")
	if !bytes.Equal(r1.Body, r2.Body) {
		t.Fatal("retry must replay")
	}

	optimized := "from functools import lru_cache\n\n@lru_cache(maxsize=None)\ndef calculate_fibonacci(n):\n    if n <= 1:\n        return n\n    return calculate_fibonacci(n-1) + calculate_fibonacci(n-2)\n\nfor i in [10, 50, 100]:\n    print(f\"fib({i}) = {calculate_fibonacci(i)}\")\n"
	b.writeFile(id, "solution.py", optimized)
	out := b.pythonOK(id, "exec(open('solution.py').read())")
	for _, want := range []string{"fib(10) = 55", "fib(50) = 12586269025", "fib(100) = 354224848179261915075"} {
		contains(t, out, want, "optimized")
	}
	if out := b.pythonOK(id, "print(calculate_fibonacci(200))"); out != "280571172992510140037611932413038677189525" {
		t.Fatalf("fib(200) = %q", out)
	}
	if got := b.readFile(id, "solution.py"); got != optimized {
		t.Fatal("final solution.py differs")
	}
	expect(t, b.do("DELETE", "/v1/sandboxes/"+id, nil, nil), 204, "delete")
}

// Scenario 7: path security at the API and container isolation inside.
func TestScenario7PathSecurityAndIsolation(t *testing.T) {
	t.Parallel()
	cli := docker(t)
	b := startBay(t, bayOptions{})
	id := b.create(nil, nil).Str("id")
	base := "/v1/sandboxes/" + id

	badPath := func(r Response, reason, field, what string) {
		t.Helper()
		expectError(t, r, 400, "invalid_path", what)
		if reason != "" && r.Str("error.details.reason") != reason {
			t.Fatalf("%s: reason = %q, want %q: %s", what, r.Str("error.details.reason"), reason, r)
		}
		if field != "" && r.Str("error.details.field") != field {
			t.Fatalf("%s: field = %q, want %q", what, r.Str("error.details.field"), field)
		}
	}
	// Part A, before the sandbox ever started: bay rejects these without starting a container.
	badPath(b.do("GET", base+"/filesystem/files?path=/etc/passwd", nil, nil), "absolute_path", "path", "read absolute")
	badPath(b.do("GET", base+"/filesystem/files?path=../secret.txt", nil, nil), "path_traversal", "path", "read traversal")
	badPath(b.do("GET", base+"/filesystem/files?path=a/../../etc/passwd", nil, nil), "path_traversal", "path", "read deep traversal")
	badPath(b.do("PUT", base+"/filesystem/files", map[string]any{"path": "/tmp/evil.sh", "content": "x"}, nil), "absolute_path", "path", "write absolute")
	badPath(b.do("PUT", base+"/filesystem/files", map[string]any{"path": "../secret.txt", "content": "x"}, nil), "path_traversal", "path", "write traversal")
	badPath(b.do("DELETE", base+"/filesystem/files?path=/etc/passwd", nil, nil), "absolute_path", "path", "delete absolute")
	badPath(b.do("GET", base+"/filesystem/directories?path=/etc", nil, nil), "absolute_path", "path", "list absolute")
	badPath(b.do("GET", base+"/filesystem/directories?path=../", nil, nil), "path_traversal", "path", "list traversal")
	badPath(b.do("GET", base+"/filesystem/download?path=/etc/passwd", nil, nil), "absolute_path", "path", "download absolute")
	badPath(b.upload(id, "/tmp/evil.txt", []byte("x")), "absolute_path", "path", "upload absolute")
	badPath(b.upload(id, "../../evil.txt", []byte("x")), "path_traversal", "path", "upload traversal")
	badPath(b.do("POST", base+"/shell/exec", map[string]any{"command": "ls", "cwd": "/etc"}, nil), "absolute_path", "cwd", "shell cwd absolute")
	badPath(b.do("POST", base+"/shell/exec", map[string]any{"command": "ls", "cwd": "../"}, nil), "path_traversal", "cwd", "shell cwd traversal")
	badPath(b.do("DELETE", base+"/filesystem/files?path=.", nil, nil), "", "path", "delete the workspace root")
	badPath(b.do("DELETE", base+"/filesystem/files?path=a/..", nil, nil), "", "path", "delete the workspace root (a/..)")
	if n := len(sessionContainers(t, cli, id)); n != 0 {
		t.Fatalf("rejected paths started %d containers", n)
	}

	// Part B: isolation inside the container.
	contains(t, b.pythonOK(id, "print(open('/etc/passwd').read()[:200])"), "root:", "container passwd")
	if out := b.pythonOK(id, "print('shipyard' in open('/etc/passwd').read())"); out != "True" {
		t.Fatalf("shipyard user: %q", out)
	}
	if out := b.shellOK(id, "whoami"); out != "shipyard" {
		t.Fatalf("whoami = %q", out)
	}
	contains(t, b.shellOK(id, "cat /etc/passwd | grep shipyard"), "shipyard:x:1000:1000::/workspace:/bin/bash", "passwd line")
	if out := b.pythonOK(id, "import os; print(os.path.exists('/home'))"); out != "True" && out != "False" {
		t.Fatalf("/home check: %q", out)
	}
	if out := b.pythonOK(id, "import os; print(os.getcwd())"); out != "/workspace" {
		t.Fatalf("cwd = %q", out)
	}
	contains(t, b.shellOK(id, "mount | grep /workspace || echo 'workspace mount'"), "workspace", "mount")
	// Hardening: no capabilities, no new privileges, not root, /etc not writable.
	contains(t, b.shellOK(id, "grep -E '^(CapEff|NoNewPrivs)' /proc/self/status"), "CapEff:\t0000000000000000", "capabilities dropped")
	contains(t, b.shellOK(id, "grep NoNewPrivs /proc/self/status"), "1", "no-new-privileges")
	r := b.shell(id, map[string]any{"command": "touch /etc/evil"})
	if r.Get("success") != false {
		t.Fatalf("/etc must not be writable: %s", r)
	}
	// A symlink that leaves the workspace is refused by ship's confinement (403 → not 200).
	b.shellOK(id, "ln -sf /etc/passwd link-out")
	if r := b.do("GET", base+"/filesystem/files?path=link-out", nil, nil); r.Status == 200 {
		t.Fatalf("a symlink out of the workspace was followed: %s", r)
	}

	// Part C: legal paths.
	b.writeFile(id, "test.txt", "hello")
	if got := b.readFile(id, "subdir/../test.txt"); got != "hello" {
		t.Fatalf("normalised read: %q", got)
	}
	b.writeFile(id, ".gitignore", "*.pyc\n")
	if out := b.shellOK(id, "pwd"); out != "/workspace" {
		t.Fatalf("default cwd %q", out)
	}
	b.writeFile(id, "subdir/dummy.txt", "x")
	contains(t, b.shellOK2(id, "pwd", "subdir"), "/workspace/subdir", "relative cwd")
	// A missing file is file_not_found on read, delete and download alike.
	expectError(t, b.do("GET", base+"/filesystem/files?path=nope.txt", nil, nil), 404, "file_not_found", "read missing")
	expectError(t, b.do("DELETE", base+"/filesystem/files?path=nope.txt", nil, nil), 404, "file_not_found", "delete missing")
	expectError(t, b.do("GET", base+"/filesystem/download?path=nope.txt", nil, nil), 404, "file_not_found", "download missing")

	expect(t, b.do("DELETE", base, nil, nil), 204, "delete")
}

func (b *Bay) shellOK2(id, command, cwd string) string {
	b.t.Helper()
	r := b.shell(id, map[string]any{"command": command, "cwd": cwd})
	if r.Get("success") != true {
		b.t.Fatalf("shell %q in %s failed: %s", command, cwd, r)
	}
	return r.Str("output")
}

// Scenario 8: shell-driven DevOps automation: tools, cwd, pipes, exit codes, tar and download.
//
// Substitution: pnpm is npm-only and the npm registry is unreachable, so the image has no pnpm;
// step 8 checks `npm --version && npx --version` instead.
func TestScenario8ShellDevOps(t *testing.T) {
	t.Parallel()
	docker(t)
	b := startBay(t, bayOptions{})
	id := b.create(nil, nil).Str("id")

	if out := b.shellOK(id, "echo 'Hello from shell'"); out != "Hello from shell" {
		t.Fatalf("echo: %q", out)
	}
	if out := b.shellOK(id, "pwd"); out != "/workspace" {
		t.Fatalf("pwd %q", out)
	}
	if out := b.shellOK(id, "whoami"); out != "shipyard" {
		t.Fatalf("whoami %q", out)
	}
	if out := b.shellOK(id, "echo $HOME"); out != "/workspace" {
		t.Fatalf("HOME %q", out)
	}
	contains(t, b.shellOK(id, "python3 --version"), "Python 3.13", "python3")
	if out := b.shellOK(id, "node --version"); !strings.HasPrefix(out, "v") || out < "v20" {
		t.Fatalf("node %q", out)
	}
	b.shellOK(id, "npm --version && npx --version")
	contains(t, b.shellOK(id, "git --version"), "git version", "git")
	contains(t, b.shellOK(id, "curl --version | head -1"), "curl", "curl")

	b.writeFile(id, "myapp/package.json", `{
  "name": "myapp",
  "version": "1.0.0",
  "scripts": {
    "build": "echo 'Building...' && node -e \"console.log('Build complete!')\"",
    "test": "echo 'Running tests...' && exit 0"
  }
}`)
	b.writeFile(id, "myapp/index.js", "console.log('Hello from Node.js!');\nconsole.log('Node version:', process.version);\n")
	out := b.shellOK2(id, "npm run build", "myapp")
	contains(t, out, "Building...", "npm build")
	contains(t, out, "Build complete!", "npm build")
	out = b.shellOK2(id, "node index.js", "myapp")
	contains(t, out, "Hello from Node.js!", "node")
	contains(t, out, "Node version: v", "node")
	contains(t, b.shellOK2(id, "npm test", "myapp"), "Running tests...", "npm test")

	contains(t, b.shellOK(id, "git init myrepo"), "Initialized empty Git repository", "git init")
	b.shellOK2(id, "git config user.email 'test@example.com' && git config user.name 'Test User'", "myrepo")
	contains(t, b.shellOK2(id, "echo 'Hello Git' > README.md && git add . && git commit -m 'Initial commit'", "myrepo"), "Initial commit", "commit")
	contains(t, b.shellOK2(id, "git log --oneline", "myrepo"), "Initial commit", "log")

	if out := b.shellOK(id, "echo -e 'line1\\nline2\\nline3' | grep line2"); out != "line2" {
		t.Fatalf("grep: %q", out)
	}
	if out := b.shellOK(id, "echo 'hello world' | awk '{print $2}'"); out != "world" {
		t.Fatalf("awk: %q", out)
	}
	if out := b.shellOK(id, "echo 'hello' | sed 's/hello/goodbye/'"); out != "goodbye" {
		t.Fatalf("sed: %q", out)
	}
	contains(t, b.shellOK(id, "find . -name '*.js' | head -3"), "./myapp/index.js", "find")

	for _, c := range []struct {
		cmd  string
		code float64
	}{{"nonexistent_command_12345", 127}, {"exit 42", 42}, {"echo 'hello' | grep 'xyz'", 1}} {
		r := b.shell(id, map[string]any{"command": c.cmd})
		if r.Get("success") != false || r.Get("exit_code") != c.code {
			t.Fatalf("%q: want success=false exit_code=%v: %s", c.cmd, c.code, r)
		}
	}

	contains(t, b.shellOK(id, "tar -czvf myapp.tar.gz myapp/"), "myapp/index.js", "tar c")
	contains(t, b.shellOK(id, "tar -tzvf myapp.tar.gz | head -5"), "myapp/", "tar t")
	tgz := expect(t, b.download(id, "myapp.tar.gz"), 200, "download tgz")
	if !bytes.HasPrefix(tgz.Body, []byte{0x1f, 0x8b}) {
		t.Fatal("myapp.tar.gz is not gzip")
	}
	expect(t, b.do("DELETE", "/v1/sandboxes/"+id, nil, nil), 204, "delete")
}

// Scenario 9: every capability in one sandbox lifetime.
func TestScenario9MegaWorkflow(t *testing.T) {
	t.Parallel()
	cli := docker(t)
	b := startBay(t, bayOptions{})
	key := "mega-workflow-create-" + randHex(t)
	sb := b.create(map[string]any{"profile": "python-default", "ttl": 600}, map[string]string{"Idempotency-Key": key})
	id := sb.Str("id")
	if sb.Str("expires_at") == "" {
		t.Fatal("expires_at missing")
	}
	again := expect(t, b.do("POST", "/v1/sandboxes", map[string]any{"profile": "python-default", "ttl": 600}, map[string]string{"Idempotency-Key": key}), 201, "replay")
	if again.Str("id") != id {
		t.Fatal("replay created another sandbox")
	}
	if st := b.get(id).Str("status"); st != "idle" {
		t.Fatalf("status %q, want idle", st)
	}

	contains(t, b.pythonOK(id, `import sys; print(f"Python {sys.version_info.major}.{sys.version_info.minor}")`), "Python 3.13", "version")
	if out := b.pythonOK(id, "def fibonacci(n):\n    if n <= 1: return n\n    return fibonacci(n-1) + fibonacci(n-2)\nresult = fibonacci(10)\nprint(f\"fib(10) = {result}\")"); out != "fib(10) = 55" {
		t.Fatalf("fib10 %q", out)
	}
	if out := b.pythonOK(id, `print(f"fib(15) = {fibonacci(15)}")`); out != "fib(15) = 610" {
		t.Fatalf("fib15 %q", out)
	}
	got := b.get(id)
	if got.Str("status") != "ready" {
		t.Fatalf("status after exec %q", got.Str("status"))
	}
	if cs, _ := got.Get("containers").([]any); len(cs) != 1 {
		t.Fatalf("containers of a ready sandbox: %s", got)
	} else if c := cs[0].(map[string]any); c["healthy"] != true || c["runtime_type"] != "ship" {
		t.Fatalf("container entry %v", c)
	}

	out := b.shellOK(id, "whoami && pwd")
	contains(t, out, "shipyard", "whoami")
	contains(t, out, "/workspace", "pwd")
	contains(t, b.shellOK(id, "echo -e 'apple\\nbanana\\ncherry' | grep an"), "banana", "pipe")
	if r := b.shell(id, map[string]any{"command": "exit 42"}); r.Get("success") != false || r.Get("exit_code") != float64(42) {
		t.Fatalf("exit 42: %s", r)
	}
	b.writeFile(id, "workdir/marker.txt", "m")
	out = b.shellOK2(id, "pwd && ls", "workdir")
	contains(t, out, "workdir", "cwd")
	contains(t, out, "marker.txt", "ls")

	app := "def main():\n    print(\"Hello from app.py!\")\n    return 42\n\nif __name__ == \"__main__\":\n    main()\n"
	b.writeFile(id, "src/app.py", app)
	b.writeFile(id, "config/settings.json", `{"debug": true, "version": "1.0.0"}`)
	contains(t, b.readFile(id, "src/app.py"), "def main()", "read")
	out = b.pythonOK(id, "exec(open('src/app.py').read()); print(main())")
	contains(t, out, "Hello from app.py!", "exec app")
	contains(t, out, "42", "exec app")
	list := expect(t, b.do("GET", "/v1/sandboxes/"+id+"/filesystem/directories?path=.", nil, nil), 200, "list")
	names := map[string]bool{}
	for _, e := range list.Get("entries").([]any) {
		m := e.(map[string]any)
		names[m["name"].(string)] = m["is_dir"] == true
	}
	for _, d := range []string{"src", "config", "workdir"} {
		if !names[d] {
			t.Fatalf("list lacks directory %s: %s", d, list)
		}
	}
	expect(t, b.do("DELETE", "/v1/sandboxes/"+id+"/filesystem/files?path=workdir/marker.txt", nil, nil), 200, "delete file")
	expectError(t, b.do("GET", "/v1/sandboxes/"+id+"/filesystem/files?path=workdir/marker.txt", nil, nil), 404, "file_not_found", "deleted file")

	blob := make([]byte, 256)
	rand.Read(blob)
	expect(t, b.upload(id, "data/sample.bin", blob), 200, "upload bin")
	ekey := "mega-workflow-extend-" + randHex(t)
	e1 := expect(t, b.do("POST", "/v1/sandboxes/"+id+"/extend_ttl", map[string]any{"extend_by": 300}, map[string]string{"Idempotency-Key": ekey}), 200, "extend")
	if e1.Str("expires_at") == sb.Str("expires_at") {
		t.Fatal("extend did not move expires_at")
	}
	e2 := expect(t, b.do("POST", "/v1/sandboxes/"+id+"/extend_ttl", map[string]any{"extend_by": 300}, map[string]string{"Idempotency-Key": ekey}), 200, "extend replay")
	if !bytes.Equal(e1.Body, e2.Body) {
		t.Fatal("extend replay differs")
	}
	if dl := expect(t, b.download(id, "data/sample.bin"), 200, "download bin"); !bytes.Equal(dl.Body, blob) {
		t.Fatal("binary round trip differs")
	}
	contains(t, b.shellOK(id, "tar -czvf data.tar.gz data/"), "data/sample.bin", "tar")
	if dl := expect(t, b.download(id, "data.tar.gz"), 200, "download tgz"); !bytes.HasPrefix(dl.Body, []byte{0x1f, 0x8b}) {
		t.Fatal("not gzip")
	}

	expect(t, b.do("POST", "/v1/sandboxes/"+id+"/stop", nil, nil), 200, "stop")
	out = b.pythonOK(id, "try:\n    print(fibonacci)\nexcept NameError:\n    print(\"variable_lost_as_expected\")\nimport os\nprint(f\"file_exists={os.path.exists('src/app.py')}\")")
	contains(t, out, "variable_lost_as_expected", "auto-resume")
	contains(t, out, "file_exists=True", "auto-resume")
	contains(t, b.shellOK(id, "ls -la && test -f src/app.py && echo 'app_py_ok'"), "app_py_ok", "shell after resume")
	expect(t, b.do("POST", "/v1/sandboxes/"+id+"/stop", nil, nil), 200, "stop again")
	expectError(t, b.do("GET", "/v1/sandboxes/"+id+"/filesystem/files?path=/etc/passwd", nil, nil), 400, "invalid_path", "bad path while stopped")
	if n := len(sessionContainers(t, cli, id)); n != 0 {
		t.Fatal("a rejected path woke the sandbox")
	}
	expect(t, b.do("GET", "/v1/sandboxes/"+id+"/filesystem/directories?path=.", nil, nil), 200, "list wakes")
	if n := len(sessionContainers(t, cli, id)); n != 1 {
		t.Fatalf("list must wake exactly one container, got %d", n)
	}
	expect(t, b.do("POST", "/v1/sandboxes/"+id+"/stop", nil, nil), 200, "stop 1")
	expect(t, b.do("POST", "/v1/sandboxes/"+id+"/stop", nil, nil), 200, "stop 2 (idempotent)")
	if out := b.pythonOK(id, "def fibonacci(n):\n    if n <= 1: return n\n    return fibonacci(n-1) + fibonacci(n-2)\nprint(f\"fib(12) = {fibonacci(12)}\")"); out != "fib(12) = 144" {
		t.Fatalf("fib12 %q", out)
	}

	out = b.shellOK(id, "id")
	contains(t, out, "uid=1000(shipyard)", "id")
	if strings.Contains(out, "uid=0(root)") {
		t.Fatal("running as root")
	}
	if out := b.pythonOK(id, "import os; print(os.getcwd())"); out != "/workspace" {
		t.Fatalf("cwd %q", out)
	}
	if out := b.pythonOK(id, "print('shipyard' in open('/etc/passwd').read())"); out != "True" {
		t.Fatalf("passwd %q", out)
	}

	hist := expect(t, b.do("GET", "/v1/sandboxes/"+id+"/history?exec_type=python&limit=2", nil, nil), 200, "history")
	if entries, _ := hist.Get("entries").([]any); len(entries) != 2 || hist.Get("total").(float64) < 8 {
		t.Fatalf("history: %s", hist)
	}
	expect(t, b.do("DELETE", "/v1/sandboxes/"+id, nil, nil), 204, "delete")
	expectError(t, b.get(id), 404, "not_found", "get after delete")
	if volumeExists(t, cli, "bay-cargo-"+sb.Str("cargo_id")) {
		t.Fatal("volume left behind")
	}
}
