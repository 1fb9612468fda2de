package imagebuild

// Tests of ship inside a real container of the base image, started with the settings bay must
// use (shipSandboxHostConfig): root with every capability dropped but CAP_SETUID, CAP_SETGID
// and CAP_KILL, no-new-privileges, tini as PID 1, a pids limit. The test reaches ship over the
// engine's bridge network at the container's own address.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
)

const shipTestToken = "tok-ship-sandbox-test"

// shipSandboxSecurity is what bay's Docker driver must set for the privilege separation of
// ship (see internal/ship/privsep): the container starts as root with only these capabilities
// and no-new-privileges; ship switches to its own user at once.
var shipSandboxSecurity = struct {
	User   string
	CapAdd []string
}{User: "0:0", CapAdd: []string{"SETUID", "SETGID", "KILL"}}

type shipSandbox struct {
	*sandbox
	url string
}

// startShipSandbox runs the base image as bay runs a sandbox, with the given pids limit.
func startShipSandbox(t *testing.T, pids int64) *shipSandbox {
	t.Helper()
	img := testImage(t, FlavourBase)
	e := shared.engine
	ctx := t.Context()
	ins, err := e.ImageInspect(ctx, img.ContentTag)
	if err != nil {
		t.Fatal(err)
	}
	if got := ins.Config.Labels[LabelRuntimeCaps]; got != strings.Join(shipSandboxSecurity.CapAdd, ",") {
		t.Fatalf("label %s = %q, want %q", LabelRuntimeCaps, got, shipSandboxSecurity.CapAdd)
	}
	mem := int64(1 << 30)
	noInit := false
	sb := runSandbox(t, img.ContentTag, &container.Config{
		User: shipSandboxSecurity.User,
		Env: []string{"SHIP_AUTH_TOKEN=" + shipTestToken, "SHIP_PROFILE_ENV_KEYS=PROFILE_A,PROFILE_B,MISSING",
			"PROFILE_A=plain", "PROFILE_B=it's $HOME `x`"},
	}, &container.HostConfig{
		CapDrop:     []string{"ALL"},
		CapAdd:      shipSandboxSecurity.CapAdd,
		SecurityOpt: []string{"no-new-privileges:true"},
		Init:        &noInit,
		Resources:   container.Resources{PidsLimit: &pids, Memory: mem, MemorySwap: mem},
	})
	s := &shipSandbox{sandbox: sb}
	cins, err := e.ContainerInspect(ctx, sb.id, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ep := range cins.Container.NetworkSettings.Networks {
		if ep != nil && ep.IPAddress.IsValid() {
			s.url = fmt.Sprintf("http://%s:%d", ep.IPAddress, ShipPort)
		}
	}
	if s.url == "" {
		t.Fatal("the container has no address on the bridge network")
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		st, _ := s.call("GET", "/ipython/kernel/status", nil)
		if st == 200 {
			var ks map[string]any
			_, b := s.call("GET", "/ipython/kernel/status", nil)
			json.Unmarshal(b, &ks)
			if ks["status"] == "alive" {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("ship's kernel not alive within 60s; logs:\n%s", s.logs())
		}
		time.Sleep(300 * time.Millisecond)
	}
	return s
}

// call sends a request to ship with the runtime token.
func (s *shipSandbox) call(method, path string, body any) (int, []byte) {
	var rd io.Reader
	ct := ""
	switch b := body.(type) {
	case nil:
	default:
		j, _ := json.Marshal(b)
		rd, ct = bytes.NewReader(j), "application/json"
	}
	req, _ := http.NewRequestWithContext(s.t.Context(), method, s.url+path, rd)
	if ct != "" {
		req.Header.Set("Content-Type", ct)
	}
	req.Header.Set("Authorization", "Bearer "+shipTestToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, []byte(err.Error())
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

// json calls and decodes a JSON object answer, failing the test on another status than want.
func (s *shipSandbox) json(method, path string, body any, want int) map[string]any {
	s.t.Helper()
	st, b := s.call(method, path, body)
	var m map[string]any
	if st != want || json.Unmarshal(b, &m) != nil {
		s.t.Fatalf("%s %s: %d %s (want %d)", method, path, st, b, want)
	}
	return m
}

func (s *shipSandbox) shell(cmd string) map[string]any {
	s.t.Helper()
	return s.json("POST", "/shell/exec", map[string]any{"command": cmd, "timeout": 60}, 200)
}

func (s *shipSandbox) python(code string) map[string]any {
	s.t.Helper()
	return s.json("POST", "/ipython/exec", map[string]any{"code": code, "timeout": 60}, 200)
}

// str is m[k] if it is a string, else "".
func str(m map[string]any, k string) string {
	v, _ := m[k].(string)
	return v
}

// shipPID is the pid of ship in the container.
func (s *shipSandbox) shipPID() int {
	s.t.Helper()
	pid, err := strconv.Atoi(strings.Fields(s.ok("pgrep", "-x", "ship"))[0])
	if err != nil {
		s.t.Fatal(err)
	}
	return pid
}

// probe is a bash script run as user code: what it may see and do to ship and to PID 1.
func probe(ship int) string {
	return fmt.Sprintf(`for f in /proc/1/environ /proc/%[1]d/environ /proc/%[1]d/mem /proc/%[1]d/maps; do
  if (exec 3<"$f") 2>/dev/null; then echo "OPENED $f"; else echo "denied $f"; fi
done
if grep -q SHIP_AUTH_TOKEN /proc/self/environ; then echo "TOKEN in own environment"; fi
kill -STOP %[1]d 2>/dev/null && echo "STOPPED ship" || echo "stop refused: $(kill -STOP %[1]d 2>&1)"
kill -9 %[1]d 2>/dev/null && echo "KILLED ship" || echo "kill refused: $(kill -9 %[1]d 2>&1)"
kill -9 1 2>/dev/null && echo "KILLED tini" || echo "kill 1 refused"
echo "uid=$(id -u) gid=$(id -g) groups=$(id -G)"
grep -E '^Cap(Eff|Prm|Inh|Amb)' /proc/self/status | tr -s '\t' ' '
echo PROBE-DONE
`, ship)
}

// checkProbe checks the output of probe.
func checkProbe(t *testing.T, from, out string) {
	t.Helper()
	for _, want := range []string{
		"denied /proc/1/environ", "stop refused: ", "Operation not permitted",
		"kill refused: ", "kill 1 refused", "uid=1000 gid=1000 groups=1000",
		"CapEff: 0000000000000000", "CapPrm: 0000000000000000", "CapInh: 0000000000000000", "CapAmb: 0000000000000000",
		"PROBE-DONE",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("%s: probe output lacks %q:\n%s", from, want, out)
		}
	}
	if n := strings.Count(out, "denied /proc/"); n != 4 {
		t.Errorf("%s: %d of 4 /proc files denied:\n%s", from, n, out)
	}
	for _, bad := range []string{"OPENED", "TOKEN", "STOPPED", "KILLED"} {
		if strings.Contains(out, bad) {
			t.Errorf("%s: user code could do what it must not (%s):\n%s", from, bad, out)
		}
	}
}

func TestShipSeparatesPrivilegesInContainer(t *testing.T) {
	s := startShipSandbox(t, 512)
	pid := s.shipPID()

	// Ship itself: its own uid on every thread, exactly SETUID, SETGID and KILL, non-dumpable.
	st := s.ok("sh", "-c", fmt.Sprintf("cat /proc/%d/task/*/status | grep -E '^(Uid|Gid|CapEff|CapPrm|CapInh|CapAmb|Groups):' | sort | uniq -c", pid))
	for _, want := range []string{"Uid:\t999\t999\t999\t999", "Gid:\t999\t999\t999\t999", "CapEff:\t00000000000000e0",
		"CapPrm:\t00000000000000e0", "CapInh:\t0000000000000000", "CapAmb:\t0000000000000000"} {
		if !strings.Contains(st, want) {
			t.Errorf("ship's threads: missing %q in\n%s", want, st)
		}
	}
	if n := strings.Count(st, "Uid:"); n != 1 {
		t.Errorf("ship's threads differ:\n%s", st)
	}
	if got := s.ok("stat", "-c", "%u", fmt.Sprintf("/proc/%d/environ", pid)); got != "0" {
		t.Errorf("/proc/<ship>/environ owned by %s: ship is dumpable", got)
	}

	t.Run("shell", func(t *testing.T) {
		r := s.shell(probe(pid))
		checkProbe(t, "shell", str(r, "stdout")+str(r, "stderr"))
	})
	t.Run("background", func(t *testing.T) {
		r := s.json("POST", "/shell/exec", map[string]any{"command": probe(pid), "background": true}, 200)
		id := r["process_id"].(string)
		var p map[string]any
		for range 100 {
			p = s.json("GET", "/shell/processes/"+id, nil, 200)
			if p["status"] != "running" {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		checkProbe(t, "background", str(p, "stdout")+str(p, "stderr"))
	})
	t.Run("kernel", func(t *testing.T) {
		r := s.python(fmt.Sprintf(`import os, signal, subprocess
for sig in (signal.SIGSTOP, signal.SIGKILL):
    try:
        os.kill(%[1]d, sig); print("SIGNALLED ship", sig)
    except PermissionError as e:
        print("python kill refused", e.errno)
for f in ("/proc/1/environ", "/proc/%[1]d/environ", "/proc/%[1]d/mem"):
    try:
        open(f, "rb").close(); print("OPENED", f)
    except PermissionError:
        print("python open refused:", f)
print(subprocess.run(["bash", "-c", %[2]q], capture_output=True, text=True).stdout)
print(open("/proc/self/status").read().split("CapEff:")[1].split()[0])`, pid, probe(pid)))
		out := r["output"].(map[string]any)["text"].(string)
		checkProbe(t, "kernel", out)
		if strings.Count(out, "python kill refused 1") != 2 || strings.Count(out, "python open refused:") != 3 || strings.Contains(out, "SIGNALLED") {
			t.Errorf("kernel: %s", out)
		}
	})
	t.Run("terminal", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		c, _, err := websocket.Dial(ctx, strings.Replace(s.url, "http", "ws", 1)+"/term/ws",
			&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + shipTestToken}}})
		if err != nil {
			t.Fatal(err)
		}
		defer c.CloseNow()
		// The script goes through a file: typed into the terminal it would be echoed.
		s.json("POST", "/fs/write_file", map[string]any{"path": "probe.sh", "content": probe(pid)}, 200)
		if err := c.Write(ctx, websocket.MessageText, []byte("stty -echo; bash probe.sh 2>&1 | sed 's/^/T:/'\n")); err != nil {
			t.Fatal(err)
		}
		var out strings.Builder
		for !strings.Contains(out.String(), "T:PROBE-DONE") {
			_, b, err := c.Read(ctx)
			if err != nil {
				t.Fatalf("terminal: %v after %q", err, out.String())
			}
			out.Write(b)
		}
		checkProbe(t, "terminal", out.String())
		if got := s.ok("sh", "-c", "stat -c '%u %a' $(ls -t /dev/pts/[0-9]* | head -1)"); !strings.HasPrefix(got, "1000 ") {
			t.Errorf("terminal device: %q, want owned by 1000", got)
		}
	})
	t.Run("files belong to the sandbox user", func(t *testing.T) {
		s.json("POST", "/fs/write_file", map[string]any{"path": "api/deep/w.txt", "content": "x"}, 200)
		s.json("POST", "/fs/create_file", map[string]any{"path": "api/c.txt", "content": "x"}, 200)
		var body bytes.Buffer
		mw := multipart.NewWriter(&body)
		mw.WriteField("file_path", "api/up/u.bin")
		fw, _ := mw.CreateFormFile("file", "u.bin")
		fw.Write([]byte("data"))
		mw.Close()
		req, _ := http.NewRequestWithContext(t.Context(), "POST", s.url+"/fs/upload", &body)
		req.Header.Set("Content-Type", mw.FormDataContentType())
		req.Header.Set("Authorization", "Bearer "+shipTestToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("upload: %v %v", err, resp)
		}
		resp.Body.Close()
		s.shell("mkdir -p user/d && echo hi > user/d/f && sleep 0")
		got := s.ok("sh", "-c", "cd /workspace && stat -c '%u:%g %n' api api/deep api/deep/w.txt api/c.txt api/up api/up/u.bin user user/d user/d/f skills")
		for line := range strings.Lines(got) {
			if !strings.HasPrefix(line, "1000:1000 ") {
				t.Errorf("not owned by the sandbox user: %s", line)
			}
		}
		// The file API acts with the sandbox user's rights: a file only that user may read is
		// readable through it (ship's own uid could not), one nobody may read is not.
		s.shell("echo secret > own.txt && chmod 600 own.txt && echo x > none.txt && chmod 000 none.txt")
		if r := s.json("POST", "/fs/read_file", map[string]any{"path": "own.txt"}, 200); r["content"] != "secret\n" {
			t.Errorf("read own 0600 file: %v", r)
		}
		if r := s.json("POST", "/fs/read_file", map[string]any{"path": "none.txt"}, 403); r["code"] != "access_denied" {
			t.Errorf("read 000 file: %v", r)
		}
	})
	t.Run("profile environment file", func(t *testing.T) {
		got := s.ok("stat", "-c", "%u:%g %a", "/workspace/.bay_env.sh")
		if got != "1000:1000 644" {
			t.Errorf(".bay_env.sh: %s", got)
		}
		out := s.ok("bash", "-c", `. /workspace/.bay_env.sh && printf '%s|%s|%s' "$PROFILE_A" "$PROFILE_B" "${MISSING-unset}"`)
		if out != "plain|it's $HOME `x`|unset" {
			t.Errorf("sourced .bay_env.sh: %q\n%s", out, s.ok("cat", "/workspace/.bay_env.sh"))
		}
		if strings.Contains(s.ok("cat", "/workspace/.bay_env.sh"), shipTestToken) {
			t.Error(".bay_env.sh holds the runtime token")
		}
	})
}

// TestShipHealsForkBombInContainer runs a fork bomb as user code under a small pids limit: the
// bomb backgrounds itself, holds every process slot, and ship must recover on its own (kill
// every process of the sandbox user, start again, say so) instead of failing until the
// sandbox is stopped.
func TestShipHealsForkBombInContainer(t *testing.T) {
	s := startShipSandbox(t, 128)
	pid := s.shipPID()
	t0 := time.Now()
	r := s.shell("timeout 20 bash -c ':(){ :|:& };:'")
	t.Logf("fork bomb command answered in %s: %v", time.Since(t0).Round(time.Millisecond), r["return_code"])

	// The sandbox must work again within a bounded time: either ship had to heal it (a call
	// found no process slot, ship killed every process of the sandbox user and says so), or
	// the bomb died out on its own (on a quiet machine its processes can exit faster than
	// they fork). Either way nothing of the bomb may be left.
	var healed string
	bombGone := false
	deadline := time.Now().Add(90 * time.Second)
	for healed == "" && !bombGone && time.Now().Before(deadline) {
		st, b := s.call("POST", "/shell/exec", map[string]any{"command": "echo alive", "timeout": 30})
		var m map[string]any
		json.Unmarshal(b, &m)
		switch {
		case st == 200 && str(m, "stdout") == "alive\n" && str(m, "notice") != "":
			healed = str(m, "notice")
		case st == 200 && str(m, "stdout") == "alive\n":
			// The command found a free slot: done if the bomb is gone for good, else try again.
			// A bomb down to a process or two grows back (once, one low reading was followed
			// by 94 processes), so it must stay gone for a second.
			bombGone = s.userProcessesStayFew(time.Second)
		default:
			t.Logf("during the bomb: %d %s", st, b)
		}
	}
	if healed == "" && !bombGone {
		t.Fatalf("ship did not recover from the fork bomb within 90s; logs:\n%s", s.logs())
	}
	if got := s.shipPID(); got != pid {
		t.Fatalf("ship restarted (pid %d, was %d)", got, pid)
	}
	if healed != "" {
		t.Logf("notice: %s", healed)
		if !strings.Contains(healed, "process limit") || !strings.Contains(healed, "killed all") {
			t.Errorf("notice %q", healed)
		}
		// The kernel was among the killed processes: the next call gets a new kernel and is told.
		py := s.python("print(6*7)")
		if py["success"] != true || !strings.Contains(py["output"].(map[string]any)["text"].(string), "42") {
			t.Fatalf("python after the bomb: %v", py)
		}
		if py["kernel_restarted"] != true || !strings.Contains(str(py, "kernel_notice"), "state") {
			t.Errorf("python after the bomb does not say the kernel was restarted: %v", py)
		}
	} else {
		t.Log("the bomb died out on its own; the sandbox answers")
	}
	// Nothing of the bomb is left: the sandbox user's processes are the kernel and its helpers.
	if n := s.userProcesses(); n > 3 {
		t.Errorf("%d processes of the sandbox user left after healing:\n%s", n, s.ok("ps", "-u", "1000", "-o", "pid=,comm="))
	}

	// Again, and this time the kernel dies while the bomb holds the slots, so its automatic
	// restart may fail: the next Python calls must get a working kernel again (healing the
	// sandbox when the restart failed) instead of failing until the sandbox is stopped.
	s.shell("timeout 20 bash -c ':(){ :|:& };:'")
	if st, b := s.call("POST", "/ipython/exec", map[string]any{"code": "import os; os._exit(1)", "timeout": 30}); st != 500 {
		t.Fatalf("kernel exit: %d %s", st, b)
	}
	healed = ""
	deadline = time.Now().Add(90 * time.Second)
	for healed == "" && time.Now().Before(deadline) {
		st, b := s.call("POST", "/ipython/exec", map[string]any{"code": "print(6*7)", "timeout": 30})
		var m map[string]any
		json.Unmarshal(b, &m)
		out, _ := m["output"].(map[string]any)
		switch {
		case st == 200 && m["success"] == true && out["text"] == "42":
			healed = str(m, "notice")
			if healed == "" {
				healed = "(no notice)"
			}
		default:
			t.Logf("python during the bomb: %d %s", st, b)
			time.Sleep(500 * time.Millisecond)
		}
	}
	t.Logf("python after the second bomb: %s", healed)
	if healed == "" {
		t.Errorf("python did not recover; logs:\n%s", s.logs())
	}
}

// userProcesses counts the sandbox user's processes; a count it cannot take (no process slot
// for ps while a bomb runs) is reported as many.
// userProcessesStayFew reports whether the sandbox user has at most 3 processes (the kernel
// and its helpers) at every reading, 100 ms apart, for d.
func (s *shipSandbox) userProcessesStayFew(d time.Duration) bool {
	for end := time.Now().Add(d); ; time.Sleep(100 * time.Millisecond) {
		if s.userProcesses() > 3 {
			return false
		}
		if time.Now().After(end) {
			return true
		}
	}
}

func (s *shipSandbox) userProcesses() int {
	r := s.exec("ps", "-u", "1000", "-o", "pid=")
	if r.code != 0 && strings.TrimSpace(r.stdout) == "" {
		return 1 << 20
	}
	return len(strings.Fields(r.stdout))
}

// vm reads a Vm* figure (kB) of a process in the container.
func (s *shipSandbox) vm(pid int, field string) int64 {
	s.t.Helper()
	for line := range strings.Lines(s.ok("cat", fmt.Sprintf("/proc/%d/status", pid))) {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, _ := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
			return n
		}
	}
	s.t.Fatalf("no %s for pid %d", field, pid)
	return 0
}

// TestShipReadMemoryInContainer reads a 63 MB text file ten times at once through read_file:
// ship streams it into each answer, so its peak RSS stays far below the file's size. (Before
// streaming, the same reads got the container OOM-killed at its 1 GiB limit.)
func TestShipReadMemoryInContainer(t *testing.T) {
	s := startShipSandbox(t, 512)
	pid := s.shipPID()
	const lines = 630000 // 101 bytes each
	s.json("POST", "/fs/write_file", map[string]any{"path": "gen.py",
		"content": fmt.Sprintf("import sys\nsys.stdout.write(('a\"b\\\\c\\t' + 'x' * 92 + 'é\\n') * %d)\n", lines)}, 200)
	s.shell("python3 gen.py > big.txt")
	size := int64(lines * 101)
	before := s.vm(pid, "VmRSS")

	type res struct {
		n   int64
		err error
	}
	out := make(chan res, 10)
	for i := range 10 {
		go func() {
			req, _ := http.NewRequestWithContext(t.Context(), "POST", s.url+"/fs/read_file", strings.NewReader(`{"path":"big.txt"}`))
			req.Header.Set("Authorization", "Bearer "+shipTestToken)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				out <- res{err: err}
				return
			}
			defer resp.Body.Close()
			if resp.StatusCode != 200 {
				b, _ := io.ReadAll(resp.Body)
				out <- res{err: fmt.Errorf("%d %s", resp.StatusCode, b)}
				return
			}
			if i == 0 { // one answer is decoded in full
				var r struct {
					Content string `json:"content"`
					Path    string `json:"path"`
					Size    int64  `json:"size"`
				}
				err := json.NewDecoder(resp.Body).Decode(&r)
				if err == nil && (r.Size != size || r.Path != "/workspace/big.txt" || len(r.Content) != int(size) ||
					!strings.HasPrefix(r.Content, "a\"b\\c\t"+strings.Repeat("x", 92)+"é\n")) {
					err = fmt.Errorf("answer: size %d path %s content %d bytes %q", r.Size, r.Path, len(r.Content), r.Content[:min(len(r.Content), 120)])
				}
				out <- res{n: int64(len(r.Content)), err: err}
				return
			}
			n, err := io.Copy(io.Discard, resp.Body)
			out <- res{n: n, err: err}
		}()
	}
	for range 10 {
		r := <-out
		if r.err != nil {
			t.Errorf("read: %v", r.err)
		} else if r.n < size {
			t.Errorf("read %d bytes, want at least %d", r.n, size)
		}
	}
	peak := s.vm(pid, "VmHWM")
	after := s.vm(pid, "VmRSS")
	t.Logf("ship RSS before %d kB, after %d kB, peak %d kB, for 10 parallel reads of a %.1f MB file", before, after, peak, float64(size)/1e6)
	if peak > 64<<10 {
		t.Errorf("ship's peak RSS %d kB: reads are not streamed", peak)
	}
	if st := s.json("GET", "/ipython/kernel/status", nil, 200); st["status"] != "alive" {
		t.Errorf("kernel after the reads: %v", st)
	}
}
