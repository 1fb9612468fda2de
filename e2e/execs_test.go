package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/shipyard-dev/shipyard/internal/testenv"
)

// The audited one-shot executions against the real engine, through the bay binary.

const execImage = "ship:base" // bash and python3, uid 1000

// execBay starts a bay serving execs from a workspace in its data directory.
func execBay(t *testing.T, maxConcurrent, queue int) (*Bay, string, *client.Client) {
	t.Helper()
	cli, err := testenv.EngineClient(context.Background(), execImage)
	if err != nil {
		t.Fatalf("the exec tests need the Docker engine and %s: %v", execImage, err)
	}
	t.Cleanup(func() { cli.Close() })
	ws := filepath.Join(t.TempDir(), "ws")
	b := startBay(t, bayOptions{extraConfig: fmt.Sprintf(`execs:
  workspace_root: %q
  image: %q
  max_concurrent_execs: %d
  queue_size: %d
`, ws, execImage, maxConcurrent, queue)})
	t.Cleanup(func() { execLeftovers(t, cli) })
	return b, ws, cli
}

// execLeftovers fails the test when an exec container outlives it.
func execLeftovers(t *testing.T, cli *client.Client) {
	deadline := time.Now().Add(20 * time.Second)
	for {
		res, err := cli.ContainerList(context.Background(), client.ContainerListOptions{All: true,
			Filters: client.Filters{}.Add("label", "bay.exec_id")})
		if err != nil {
			t.Errorf("list exec containers: %v", err)
			return
		}
		if len(res.Items) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("%d exec containers left behind", len(res.Items))
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func shellExec(project, script string, extra map[string]any) map[string]any {
	body := map[string]any{"project_id": project, "exec": map[string]any{"kind": "shell", "command": "bash", "args": []string{"-lc", script}}}
	for k, v := range extra {
		body[k] = v
	}
	return body
}

// waitExec polls the exec until its status is one of want.
func (b *Bay) waitExec(id string, within time.Duration, want ...string) Response {
	b.t.Helper()
	deadline := time.Now().Add(within)
	for {
		r := expect(b.t, b.do("GET", "/v1/sandbox/execs/"+id, nil, nil), 200, "get exec")
		for _, w := range want {
			if r.Str("status") == w {
				return r
			}
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("exec %s: status %q after %v, want %v", id, r.Str("status"), within, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestExecIsolation: the exec runs as uid 1000 with no capability, loopback as its only
// network interface, inputs read-only, work/ and its artifact directory writable, and only
// the three workspace mounts; the record says succeeded with exit code 0.
func TestExecIsolation(t *testing.T) {
	b, ws, _ := execBay(t, 2, 4)
	script := `set -u
echo "uid=$(id -u) gid=$(id -g)"
echo "ifaces=$(ls /sys/class/net | tr '\n' ' ')"
grep -E '^Cap(Prm|Eff|Bnd|Amb)' /proc/self/status
grep NoNewPrivs /proc/self/status
echo "input=$(cat /workspace/inputs/data/in.txt)"
if touch /workspace/inputs/new 2>/dev/null; then echo inputs=writable; else echo inputs=readonly; fi
echo w > /workspace/work/w.txt && echo work=writable
echo a > /workspace/artifacts/a.txt && echo artifacts=writable
echo "pwd=$(pwd)"
awk '$2 ~ /^\/workspace/ {print "mount " $2 " " substr($4,1,2)}' /proc/mounts | sort
`
	r := expect(t, b.do("POST", "/v1/sandbox/execs", shellExec("iso", script, map[string]any{
		"inputs": []map[string]any{{"path": "data/in.txt", "content": "hello input"}},
	}), nil), 200, "run the isolation exec")
	if r.Str("status") != "succeeded" || r.Get("exit_code") != float64(0) {
		t.Fatalf("exec: %s", r)
	}
	out, err := os.ReadFile(filepath.Join(ws, r.Str("stdout_path")))
	if err != nil {
		t.Fatal(err)
	}
	o := string(out)
	for _, want := range []string{
		"uid=1000 gid=1000", "ifaces=lo \n", "CapPrm:\t0000000000000000", "CapEff:\t0000000000000000",
		"CapBnd:\t0000000000000000", "NoNewPrivs:\t1", "input=hello input", "inputs=readonly", "work=writable",
		"artifacts=writable", "pwd=/workspace/work",
		"mount /workspace/artifacts rw", "mount /workspace/inputs ro", "mount /workspace/work rw",
	} {
		if !strings.Contains(o, want) {
			t.Errorf("stdout lacks %q:\n%s", want, o)
		}
	}
	if n := strings.Count(o, "mount /workspace"); n != 3 {
		t.Errorf("%d workspace mounts, want exactly 3:\n%s", n, o)
	}
}

// TestExecTruncationWithoutKill: output past the caps is cut and flagged; the process goes on
// (it writes an artifact after the flood) and succeeds.
func TestExecTruncationWithoutKill(t *testing.T) {
	b, ws, _ := execBay(t, 2, 4)
	script := `head -c 3000000 /dev/zero | tr '\0' 'x'; head -c 500000 /dev/zero | tr '\0' 'y' >&2; echo survived > /workspace/artifacts/after.txt`
	r := expect(t, b.do("POST", "/v1/sandbox/execs", shellExec("trunc", script, map[string]any{
		"policy_overrides": map[string]any{"max_stdout_bytes": 1000, "max_stderr_bytes": 10},
	}), nil), 200, "flood")
	if r.Str("status") != "succeeded" || r.Get("stdout_truncated") != true || r.Get("stderr_truncated") != true {
		t.Fatalf("flood: %s", r)
	}
	for path, size := range map[string]int64{r.Str("stdout_path"): 1000, r.Str("stderr_path"): 10} {
		st, err := os.Stat(filepath.Join(ws, path))
		if err != nil || st.Size() != size {
			t.Errorf("%s: %v, %v; want %d bytes", path, st, err, size)
		}
	}
	got, err := os.ReadFile(filepath.Join(ws, r.Str("artifacts_dir"), "after.txt"))
	if err != nil || string(got) != "survived\n" {
		t.Fatalf("the process did not run to its end: %q, %v", got, err)
	}
	// A small exec is not flagged.
	r = expect(t, b.do("POST", "/v1/sandbox/execs", shellExec("trunc", "echo small", nil), nil), 200, "small")
	if r.Get("stdout_truncated") != false || r.Get("stderr_truncated") != false {
		t.Fatalf("small output flagged: %s", r)
	}
}

// TestExecManifest: the manifest lists every file the exec left with its size and a sha256
// equal to the file's; meta.json carries the exit code and the mounts; downloads return the
// bytes; a failing exec records its exit code; an artifact over the caps is dropped and said.
func TestExecManifest(t *testing.T) {
	b, ws, _ := execBay(t, 2, 4)
	script := `mkdir -p /workspace/artifacts/sub && printf 'abc' > /workspace/artifacts/one.txt && head -c 70000 /dev/urandom > /workspace/artifacts/sub/two.bin && ln -s /etc/passwd /workspace/artifacts/link && echo out && exit 3`
	r := expect(t, b.do("POST", "/v1/sandbox/execs", shellExec("man", script, nil), nil), 200, "manifest exec")
	if r.Str("status") != "failed" || r.Get("exit_code") != float64(3) || !strings.Contains(r.Str("error_reason"), "exit code 3") {
		t.Fatalf("exit 3: %s", r)
	}
	id, dir := r.Str("exec_id"), filepath.Join(ws, r.Str("artifacts_dir"))
	m := expect(t, b.do("GET", "/v1/sandbox/execs/"+id+"/artifacts", nil, nil), 200, "artifacts")
	files, _ := m.Get("files").([]any)
	if len(files) != 2 {
		t.Fatalf("manifest files: %s", m)
	}
	for _, f := range files {
		e := f.(map[string]any)
		data, err := os.ReadFile(filepath.Join(dir, e["path"].(string)))
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(data)
		if e["sha256"] != hex.EncodeToString(sum[:]) || e["size"] != float64(len(data)) {
			t.Errorf("manifest entry %v does not match the file (%d bytes)", e, len(data))
		}
		dl := expect(t, b.do("GET", "/v1/sandbox/execs/"+id+"/artifacts/"+e["path"].(string), nil, nil), 200, "download")
		if string(dl.Body) != string(data) {
			t.Errorf("download of %s differs", e["path"])
		}
	}
	if sk, _ := m.Get("skipped").([]any); len(sk) != 1 || sk[0] != "link" {
		t.Errorf("the symlink is not listed as skipped: %s", m)
	}
	expectError(t, b.do("GET", "/v1/sandbox/execs/"+id+"/artifacts/link", nil, nil), 404, "file_not_found", "download a symlink")
	expectError(t, b.do("GET", "/v1/sandbox/execs/"+id+"/artifacts/..%2F..%2Finputs", nil, nil), 400, "invalid_path", "download outside")
	meta, err := os.ReadFile(filepath.Join(dir, "meta.json"))
	if err != nil || !strings.Contains(string(meta), `"exit_code": 3`) || !strings.Contains(string(meta), `"/workspace/inputs"`) {
		t.Fatalf("meta.json: %s, %v", meta, err)
	}

	// Over the artifacts cap: files kept in path order while they fit, the rest dropped.
	r = expect(t, b.do("POST", "/v1/sandbox/execs", shellExec("man",
		`head -c 600 /dev/zero > /workspace/artifacts/a; head -c 600 /dev/zero > /workspace/artifacts/b`,
		map[string]any{"policy_overrides": map[string]any{"max_artifacts_bytes_total": 1000}}), nil), 200, "over the cap")
	if r.Str("status") != "failed" || !strings.Contains(r.Str("error_reason"), "1 file(s) dropped") {
		t.Fatalf("over the cap: %s", r)
	}
	m = expect(t, b.do("GET", "/v1/sandbox/execs/"+r.Str("exec_id")+"/artifacts", nil, nil), 200, "artifacts")
	if fs, _ := m.Get("files").([]any); len(fs) != 1 || m.Get("total_bytes") != float64(600) {
		t.Fatalf("kept: %s", m)
	}
	if _, err := os.Stat(filepath.Join(ws, r.Str("artifacts_dir"), "b")); !os.IsNotExist(err) {
		t.Fatalf("the dropped file is still there: %v", err)
	}
}

// TestExecPolicyEscalation: every policy field asked above what is allowed is refused with 400
// policy_violation naming the field, before anything is written.
func TestExecPolicyEscalation(t *testing.T) {
	b, ws, _ := execBay(t, 2, 4)
	asks := map[string]any{
		"net_mode": "open", "timeout_ms": 60_001, "max_stdout_bytes": 1_000_001, "max_stderr_bytes": 1_000_001,
		"max_artifacts_bytes_total": 50_000_001, "memory_mb": 1025, "cpu_cores": 1.5, "pids": 257,
		"max_input_bytes": 20<<20 + 1, "max_inputs_bytes_total": 50<<20 + 1, "max_output_bytes": 20<<20 + 1,
		"max_outputs_bytes_total": 50<<20 + 1,
	}
	for field, v := range asks {
		r := expectError(t, b.do("POST", "/v1/sandbox/execs", shellExec("esc", "echo hi", map[string]any{
			"policy_overrides": map[string]any{field: v},
		}), nil), 400, "policy_violation", field)
		if r.Get("error.details.field") != field || r.Get("error.details.allowed") == nil || r.Get("error.details.asked") == nil {
			t.Errorf("%s: details %s", field, r)
		}
	}
	expectError(t, b.do("POST", "/v1/sandbox/execs", shellExec("esc", "echo hi", map[string]any{
		"policy_overrides": map[string]any{"no_such_field": 1},
	}), nil), 400, "validation_error", "unknown policy field")
	if _, err := os.Stat(filepath.Join(ws, "projects")); !os.IsNotExist(err) {
		t.Fatalf("a refused exec wrote to the workspace: %v", err)
	}
	list := expect(t, b.do("GET", "/v1/sandbox/execs", nil, nil), 200, "list")
	if list.Get("total") != float64(0) {
		t.Fatalf("refused execs were recorded: %s", list)
	}
}

// TestExecInputPathAttacks: traversal, absolute, drive, backslash and NUL paths are refused
// with 400 before anything is written; the kind and command must agree.
func TestExecInputPathAttacks(t *testing.T) {
	b, ws, _ := execBay(t, 2, 4)
	for _, p := range []string{"../x", "a/../../x", "/etc/passwd", "C:\\x", "a\\..\\x", "a\x00b", "", ".", "a/..", strings.Repeat("a/", 40) + "x"} {
		expectError(t, b.do("POST", "/v1/sandbox/execs", shellExec("attack", "echo hi", map[string]any{
			"inputs": []map[string]any{{"path": "ok.txt", "content": "fine"}, {"path": p, "content": "x"}},
		}), nil), 400, "invalid_path", fmt.Sprintf("input path %q", p))
	}
	for _, body := range []map[string]any{
		{"project_id": "../up", "exec": map[string]any{"kind": "shell", "args": []string{"-lc", "true"}}},
		{"project_id": "p", "exec": map[string]any{"kind": "shell", "command": "python3", "args": []string{"-c", "1"}}},
		{"project_id": "p", "exec": map[string]any{"kind": "python", "command": "bash"}},
		{"project_id": "p", "exec": map[string]any{"kind": "ruby"}},
		{"project_id": "p", "exec": map[string]any{"kind": "shell", "cwd": "/etc"}},
		{"project_id": "p", "exec": map[string]any{"kind": "shell", "env": map[string]string{"BAD-KEY": "x"}}},
	} {
		expectError(t, b.do("POST", "/v1/sandbox/execs", body, nil), 400, "validation_error", fmt.Sprint(body))
	}
	if _, err := os.Stat(filepath.Join(ws, "projects")); !os.IsNotExist(err) {
		t.Fatalf("a refused exec wrote to the workspace: %v", err)
	}
	// A python exec of an input file, with env values that never reach the record.
	r := expect(t, b.do("POST", "/v1/sandbox/execs", map[string]any{
		"project_id": "py", "exec": map[string]any{"kind": "python", "command": "python3", "args": []string{"/workspace/inputs/main.py"},
			"env": map[string]string{"SECRET_TOKEN": "s3cr3t-value"}},
		"inputs":   []map[string]any{{"path": "main.py", "content_base64": "aW1wb3J0IG9zOyBwcmludChsZW4ob3MuZW52aXJvblsiU0VDUkVUX1RPS0VOIl0pKQ=="}},
		"task_ref": map[string]any{"task_id": "task-1", "conversation_id": "conv-1"},
	}, nil), 200, "python exec")
	out, _ := os.ReadFile(filepath.Join(ws, r.Str("stdout_path")))
	if r.Str("status") != "succeeded" || string(out) != "12\n" || strings.Contains(string(r.Body), "s3cr3t") {
		t.Fatalf("python exec: %s (stdout %q)", r, out)
	}
	if keys, _ := r.Get("env_keys").([]any); len(keys) != 1 || keys[0] != "SECRET_TOKEN" {
		t.Fatalf("env_keys: %s", r)
	}
	l := expect(t, b.do("GET", "/v1/sandbox/execs?task_id=task-1", nil, nil), 200, "list by task")
	if l.Get("total") != float64(1) {
		t.Fatalf("list by task: %s", l)
	}
}

// TestExecCancelTimeoutQueue: with one slot and one queue place, a second exec queues, a
// third is refused 429 with retry_after_ms; cancelling the queued one and the running one
// ends both as cancelled; a timeout ends as timed_out with the output it wrote.
func TestExecCancelTimeoutQueue(t *testing.T) {
	b, ws, _ := execBay(t, 1, 1)
	nowait := map[string]any{"wait": false}
	a := expect(t, b.do("POST", "/v1/sandbox/execs", shellExec("q", "sleep 60", nowait), nil), 202, "first")
	b.waitExec(a.Str("exec_id"), 30*time.Second, "running")
	q := expect(t, b.do("POST", "/v1/sandbox/execs", shellExec("q", "echo queued", nowait), nil), 202, "second")
	if q.Str("status") != "queued" {
		t.Fatalf("second exec: %s", q)
	}
	full := expectError(t, b.do("POST", "/v1/sandbox/execs", shellExec("q", "echo third", nowait), nil), 429, "quota_exceeded", "third")
	if ms, _ := full.Get("error.details.retry_after_ms").(float64); ms <= 0 || full.Header.Get("Retry-After") == "" {
		t.Fatalf("429 without retry_after_ms / Retry-After: %s %v", full, full.Header)
	}
	c := expect(t, b.do("POST", "/v1/sandbox/execs/"+q.Str("exec_id")+"/cancel", nil, nil), 200, "cancel queued")
	if c.Str("status") != "cancelled" {
		t.Fatalf("cancel queued: %s", c)
	}
	start := time.Now()
	c = expect(t, b.do("POST", "/v1/sandbox/execs/"+a.Str("exec_id")+"/cancel", nil, nil), 200, "cancel running")
	if c.Str("status") != "cancelled" || c.Get("ended_at") == nil {
		t.Fatalf("cancel running: %s", c)
	}
	t.Logf("cancel of a running exec took %v", time.Since(start))

	r := expect(t, b.do("POST", "/v1/sandbox/execs", shellExec("q", "echo before; sleep 30", map[string]any{
		"policy_overrides": map[string]any{"timeout_ms": 1500}}), nil), 200, "timeout")
	out, _ := os.ReadFile(filepath.Join(ws, r.Str("stdout_path")))
	if r.Str("status") != "timed_out" || string(out) != "before\n" {
		t.Fatalf("timeout: %s (stdout %q)", r, out)
	}
	for _, id := range []string{a.Str("exec_id"), q.Str("exec_id")} {
		if r := b.do("GET", "/v1/sandbox/execs/"+id, nil, nil); r.Str("status") != "cancelled" {
			t.Fatalf("exec %s after cancel: %s", id, r)
		}
	}
	expectError(t, b.do("GET", "/v1/sandbox/execs/sbx-exec-000000000000", nil, nil), 404, "not_found", "missing exec")
}

// TestExecSurvivesBayKill: bay is killed (SIGKILL) while an exec runs; the restarted bay
// re-attaches to the still-running container and records its real outcome; an exec whose
// container vanished while bay was down ends lost. No record stays running.
func TestExecSurvivesBayKill(t *testing.T) {
	b, ws, cli := execBay(t, 2, 4)
	nowait := map[string]any{"wait": false}
	keep := expect(t, b.do("POST", "/v1/sandbox/execs", shellExec("k", "sleep 3; echo finished; echo art > /workspace/artifacts/x", nowait), nil), 202, "kept")
	gone := expect(t, b.do("POST", "/v1/sandbox/execs", shellExec("k", "sleep 60", nowait), nil), 202, "gone")
	for _, id := range []string{keep.Str("exec_id"), gone.Str("exec_id")} {
		b.waitExec(id, 30*time.Second, "running")
		waitContainerRunning(t, cli, "bay-exec-"+id)
	}
	b.kill()
	name := "bay-exec-" + gone.Str("exec_id")
	if _, err := cli.ContainerRemove(context.Background(), name, client.ContainerRemoveOptions{Force: true}); err != nil {
		t.Fatalf("remove %s behind bay's back: %v", name, err)
	}
	b.launch()
	r := b.waitExec(keep.Str("exec_id"), 60*time.Second, "succeeded", "failed", "lost")
	out, _ := os.ReadFile(filepath.Join(ws, r.Str("stdout_path")))
	if r.Str("status") != "succeeded" || string(out) != "finished\n" {
		t.Fatalf("re-attached exec: %s (stdout %q)", r, out)
	}
	m := expect(t, b.do("GET", "/v1/sandbox/execs/"+keep.Str("exec_id")+"/artifacts", nil, nil), 200, "artifacts")
	if fs, _ := m.Get("files").([]any); len(fs) != 1 {
		t.Fatalf("re-attached exec's artifacts: %s", m)
	}
	g := b.waitExec(gone.Str("exec_id"), 10*time.Second, "lost")
	if g.Get("ended_at") == nil {
		t.Fatalf("lost exec without an end: %s", g)
	}
	running := expect(t, b.do("GET", "/v1/sandbox/execs?status=running", nil, nil), 200, "running")
	if running.Get("total") != float64(0) {
		t.Fatalf("records still running: %s", running)
	}
}

// TestExecQueuedSurvivesBayKill: bay is killed (SIGKILL) while execs wait in the
// max_concurrent_execs queue; the restarted bay queues them again and runs them (nothing of
// them had started), except one naming env variables (their values are never stored), which
// ends lost; the running exec whose container vanished meanwhile ends lost.
func TestExecQueuedSurvivesBayKill(t *testing.T) {
	b, ws, cli := execBay(t, 1, 4)
	nowait := map[string]any{"wait": false}
	run := expect(t, b.do("POST", "/v1/sandbox/execs", shellExec("qk", "sleep 60", nowait), nil), 202, "running")
	b.waitExec(run.Str("exec_id"), 30*time.Second, "running")
	waitContainerRunning(t, cli, "bay-exec-"+run.Str("exec_id"))
	var queued []Response
	for _, word := range []string{"one", "two"} {
		q := expect(t, b.do("POST", "/v1/sandbox/execs", shellExec("qk", "echo "+word, nowait), nil), 202, "queued "+word)
		if q.Str("status") != "queued" {
			t.Fatalf("exec %s: %s", word, q)
		}
		queued = append(queued, q)
	}
	withEnv := shellExec("qk", "echo $TOKEN", nowait)
	withEnv["exec"].(map[string]any)["env"] = map[string]string{"TOKEN": "secret"}
	env := expect(t, b.do("POST", "/v1/sandbox/execs", withEnv, nil), 202, "queued with env")
	b.kill()
	name := "bay-exec-" + run.Str("exec_id")
	if _, err := cli.ContainerRemove(context.Background(), name, client.ContainerRemoveOptions{Force: true}); err != nil {
		t.Fatalf("remove %s behind bay's back: %v", name, err)
	}
	b.launch()
	for i, word := range []string{"one", "two"} {
		r := b.waitExec(queued[i].Str("exec_id"), 60*time.Second, "succeeded", "failed", "lost", "timed_out")
		out, _ := os.ReadFile(filepath.Join(ws, r.Str("stdout_path")))
		if r.Str("status") != "succeeded" || string(out) != word+"\n" || r.Get("started_at") == nil {
			t.Fatalf("queued exec %s after the restart: %s (stdout %q)", word, r, out)
		}
	}
	if r := b.waitExec(env.Str("exec_id"), 10*time.Second, "lost"); r.Get("started_at") != nil || !strings.Contains(r.Str("error_reason"), "env") {
		t.Fatalf("queued exec with env after the restart: %s", r)
	}
	if r := b.waitExec(run.Str("exec_id"), 10*time.Second, "lost"); r.Get("ended_at") == nil {
		t.Fatalf("running exec whose container vanished: %s", r)
	}
	left := expect(t, b.do("GET", "/v1/sandbox/execs?status=queued", nil, nil), 200, "queued")
	if left.Get("total") != float64(0) {
		t.Fatalf("records still queued: %s", left)
	}
}

// TestExecHealth reports the runtime, the workspace, the engine and writability.
func TestExecHealth(t *testing.T) {
	b, ws, _ := execBay(t, 2, 4)
	h := expect(t, b.do("GET", "/v1/sandbox/health", nil, nil), 200, "health")
	if h.Str("status") != "ok" || h.Str("runtime_mode") != "linux" || h.Str("workspace_root_native") != ws ||
		h.Get("workspace_writable") != true || h.Str("engine") != "docker" || h.Str("engine_version") == "" {
		t.Fatalf("health: %s", h)
	}
}

// waitContainerRunning waits until the engine runs the named container.
func waitContainerRunning(t *testing.T, cli *client.Client, name string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		res, err := cli.ContainerInspect(context.Background(), name, client.ContainerInspectOptions{})
		if err == nil && res.Container.State != nil && res.Container.State.Running {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("container %s does not run: %v", name, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
