package jobs

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shipyard-dev/shipyard/api/shipapi"
	"github.com/shipyard-dev/shipyard/internal/ship/apierr"
	"github.com/shipyard-dev/shipyard/internal/ship/jupyter"
	"github.com/shipyard-dev/shipyard/internal/ship/shell"
	"github.com/shipyard-dev/shipyard/internal/ship/workspace"
)

type fixture struct {
	m   *Manager
	ws  string
	dir string
	cfg Config
}

func newFixture(t *testing.T, mod func(*Config)) *fixture {
	t.Helper()
	wsDir := t.TempDir()
	ws, err := workspace.Open(wsDir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	cfg := Config{Dir: filepath.Join(t.TempDir(), "jobs"), Shell: shell.New(shell.Config{Workspace: ws}), Workspace: ws, Grace: 300 * time.Millisecond}
	if mod != nil {
		mod(&cfg)
	}
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return &fixture{m: m, ws: wsDir, dir: cfg.Dir, cfg: cfg}
}

func (f *fixture) start(t *testing.T, req shipapi.StartJobRequest) shipapi.JobInfo {
	t.Helper()
	info, err := f.m.Start(req)
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// wait follows a job to its end and returns its whole output.
func (f *fixture) wait(t *testing.T, id string) (shipapi.JobInfo, string, string) {
	t.Helper()
	var offs [3]int64
	var out, errOut strings.Builder
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		r, err := f.m.Output(t.Context(), id, offs, 0, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		out.WriteString(r.Stdout.Data)
		errOut.WriteString(r.Stderr.Data)
		offs = [3]int64{r.Stdout.Next, r.Stderr.Next}
		if r.Job.Status != shipapi.JobRunning && offs[0] == r.Job.Stdout.Bytes && offs[1] == r.Job.Stderr.Bytes {
			return r.Job, out.String(), errOut.String()
		}
	}
	t.Fatalf("job %s did not end", id)
	return shipapi.JobInfo{}, "", ""
}

func TestShellJobOutputArrivesLive(t *testing.T) {
	f := newFixture(t, nil)
	info := f.start(t, shipapi.StartJobRequest{Kind: shipapi.JobKindShell,
		Command: `for i in 1 2 3 4; do echo line$i; echo err$i >&2; sleep 0.3; done; exit 3`})
	if info.Status != shipapi.JobRunning || info.PID == 0 || !strings.HasPrefix(info.ID, "job-") {
		t.Fatalf("start: %+v", info)
	}
	// Each line is readable long before the job ends: a follow returns as soon as it is printed.
	var offs [3]int64
	var got []string
	began := time.Now()
	for len(got) < 4 {
		r, err := f.m.Output(t.Context(), info.ID, offs, 0, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if r.Stdout.Offset != offs[0] {
			t.Fatalf("chunk starts at %d, asked %d", r.Stdout.Offset, offs[0])
		}
		offs = [3]int64{r.Stdout.Next, r.Stderr.Next}
		for l := range strings.Lines(r.Stdout.Data) {
			got = append(got, strings.TrimSpace(l))
			// Live: the first line is read while the job still runs (it runs about 1.2 s).
			if len(got) == 1 && r.Job.Status != shipapi.JobRunning {
				t.Errorf("the first line was read only once the job had ended (%s after its start)", time.Since(began))
			}
		}
	}
	if strings.Join(got, ",") != "line1,line2,line3,line4" {
		t.Fatalf("lines %q", got)
	}
	end, out, errOut := f.wait(t, info.ID)
	if end.Status != shipapi.JobFailed || end.ExitCode == nil || *end.ExitCode != 3 || end.EndedAt == nil {
		t.Fatalf("end: %+v", end)
	}
	if out != "line1\nline2\nline3\nline4\n" || errOut != "err1\nerr2\nerr3\nerr4\n" {
		t.Fatalf("stdout %q stderr %q", out, errOut)
	}
	if end.Stdout.Bytes != int64(len(out)) || end.Stdout.Total != end.Stdout.Bytes || end.Stdout.Truncated {
		t.Fatalf("stdout stream %+v", end.Stdout)
	}
	// Any offset reads from there, after the end too.
	r, err := f.m.Output(t.Context(), info.ID, [3]int64{6, 100}, 0, 0)
	if err != nil || r.Stdout.Data != "line2\nline3\nline4\n" || r.Stdout.Offset != 6 || r.Stderr.Data != "" || r.Stderr.Offset != end.Stderr.Bytes {
		t.Fatalf("read from 6: %+v %v", r, err)
	}
	// The files are ship's alone.
	for _, p := range []string{f.dir, filepath.Join(f.dir, info.ID), filepath.Join(f.dir, info.ID, "stdout")} {
		fi, err := os.Stat(p)
		if err != nil || fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s: %v %v", p, fi.Mode(), err)
		}
	}
}

func TestPythonJob(t *testing.T) {
	f := newFixture(t, nil)
	info := f.start(t, shipapi.StartJobRequest{Kind: shipapi.JobKindPython, Env: map[string]string{"X": "42"},
		Code: "import os, sys\nprint('x is', os.environ['X'])\nprint('oops', file=sys.stderr)\n"})
	end, out, errOut := f.wait(t, info.ID)
	if end.Status != shipapi.JobSucceeded || out != "x is 42\n" || errOut != "oops\n" || end.Kind != shipapi.JobKindPython {
		t.Fatalf("%+v %q %q", end, out, errOut)
	}
}

// TestStartByIDRunsOnce: a start under an id ship has returns that job and runs nothing.
func TestStartByIDRunsOnce(t *testing.T) {
	f := newFixture(t, nil)
	req := shipapi.StartJobRequest{ID: "retry-1", Kind: shipapi.JobKindShell, Command: "echo once >> count.txt"}
	a := f.start(t, req)
	f.wait(t, a.ID)
	b := f.start(t, req)
	if b.ID != "retry-1" || b.PID != a.PID || b.Status != shipapi.JobSucceeded {
		t.Fatalf("second start: %+v", b)
	}
	if got, _ := os.ReadFile(filepath.Join(f.ws, "count.txt")); string(got) != "once\n" {
		t.Fatalf("count.txt %q", got)
	}
}

// TestCancelKillsTheGroup: a grandchild that ignores SIGTERM is killed after the grace period.
func TestCancelKillsTheGroup(t *testing.T) {
	f := newFixture(t, nil)
	info := f.start(t, shipapi.StartJobRequest{Kind: shipapi.JobKindShell,
		Command: `bash -c 'trap "" TERM; sleep 300' & echo $! > grandchild.pid; sleep 300`})
	pidFile := filepath.Join(f.ws, "grandchild.pid")
	var gc int
	for i := 0; i < 100 && gc == 0; i++ {
		b, _ := os.ReadFile(pidFile)
		gc, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		time.Sleep(20 * time.Millisecond)
	}
	if gc == 0 {
		t.Fatal("no grandchild pid")
	}
	end, err := f.m.Cancel(t.Context(), info.ID)
	if err != nil || end.Status != shipapi.JobCancelled || end.ExitCode == nil || end.Reason == "" {
		t.Fatalf("cancel: %+v %v", end, err)
	}
	deadline := time.Now().Add(3 * time.Second)
	for syscall.Kill(gc, 0) == nil {
		if time.Now().After(deadline) {
			t.Fatalf("grandchild %d still alive", gc)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Cancelling again answers the same.
	if again, err := f.m.Cancel(t.Context(), info.ID); err != nil || again.Status != shipapi.JobCancelled {
		t.Fatalf("second cancel: %+v %v", again, err)
	}
}

func TestTimeout(t *testing.T) {
	f := newFixture(t, nil)
	info := f.start(t, shipapi.StartJobRequest{Kind: shipapi.JobKindShell, Command: "echo start; sleep 60", TimeoutSeconds: 0.5})
	end, out, _ := f.wait(t, info.ID)
	if end.Status != shipapi.JobTimedOut || out != "start\n" || !strings.Contains(end.Reason, "0.5 seconds") {
		t.Fatalf("%+v %q", end, out)
	}
}

func TestOutputCapped(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.MaxOutput = 1 << 20 })
	info := f.start(t, shipapi.StartJobRequest{Kind: shipapi.JobKindShell, Command: "head -c 3000000 /dev/zero; echo tail >&2"})
	end, out, errOut := f.wait(t, info.ID)
	if end.Status != shipapi.JobSucceeded || len(out) != 1<<20 || errOut != "tail\n" {
		t.Fatalf("%+v %d %q", end, len(out), errOut)
	}
	if end.Stdout != (shipapi.Stream{Bytes: 1 << 20, Total: 3000000, Truncated: true}) || end.Stderr.Truncated {
		t.Fatalf("streams %+v %+v", end.Stdout, end.Stderr)
	}
	if fi, _ := os.Stat(filepath.Join(f.dir, info.ID, "stdout")); fi.Size() != 1<<20 {
		t.Fatalf("file size %d", fi.Size())
	}
}

// TestRestartMarksLost: a new ship on the same directory reports a job it was running as lost,
// killing what is left of it, and keeps its output readable.
func TestRestartMarksLost(t *testing.T) {
	f := newFixture(t, nil)
	info := f.start(t, shipapi.StartJobRequest{ID: "alive", Kind: shipapi.JobKindShell, Command: "echo before; sleep 300"})
	if r, err := f.m.Output(t.Context(), info.ID, [3]int64{}, 0, 5*time.Second); err != nil || r.Stdout.Data != "before\n" {
		t.Fatalf("%+v %v", r, err)
	}
	// A job whose process is gone: its status file says running, its pid is no process.
	gone := filepath.Join(f.dir, "gone")
	if err := os.Mkdir(gone, 0o700); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(persisted{Info: shipapi.JobInfo{ID: "gone", Kind: "shell", Status: shipapi.JobRunning, PID: 1 << 22}, ProcStart: "1", PGID: 1 << 22})
	if err := os.WriteFile(filepath.Join(gone, statusFile), b, 0o600); err != nil {
		t.Fatal(err)
	}
	_ = os.WriteFile(filepath.Join(gone, stdoutFile), []byte("partial"), 0o600)

	m2, err := New(f.cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	a, err := m2.Get("alive")
	if err != nil || a.Status != shipapi.JobLost || !strings.Contains(a.Reason, "killed the job's process group") || a.EndedAt == nil {
		t.Fatalf("alive: %+v %v", a, err)
	}
	g, err := m2.Get("gone")
	if err != nil || g.Status != shipapi.JobLost || !strings.Contains(g.Reason, "was gone") || g.Stdout.Bytes != 7 {
		t.Fatalf("gone: %+v %v", g, err)
	}
	if r, err := m2.Output(t.Context(), "gone", [3]int64{}, 0, 0); err != nil || r.Stdout.Data != "partial" {
		t.Fatalf("%+v %v", r, err)
	}
	deadline := time.Now().Add(3 * time.Second)
	for syscall.Kill(info.PID, 0) == nil && procStart(info.PID) != "" {
		if time.Now().After(deadline) {
			t.Fatal("the lost job's process survived the restart")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestBadRequests(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.MaxTimeout = time.Hour; c.MaxRunning = 1 })
	for name, req := range map[string]shipapi.StartJobRequest{
		"no kind":         {Command: "true"},
		"bad kind":        {Kind: "perl", Command: "true"},
		"empty command":   {Kind: "shell", Command: "  "},
		"shell with code": {Kind: "shell", Command: "true", Code: "x"},
		"python no code":  {Kind: "python"},
		"bad id":          {ID: "../x", Kind: "shell", Command: "true"},
		"long id":         {ID: strings.Repeat("a", 65), Kind: "shell", Command: "true"},
		"negative time":   {Kind: "shell", Command: "true", TimeoutSeconds: -1},
		"too long":        {Kind: "shell", Command: "true", TimeoutSeconds: 7200},
		"bad env":         {Kind: "shell", Command: "true", Env: map[string]string{"A=B": "x"}},
		"cwd escapes":     {Kind: "shell", Command: "true", Cwd: ptr("../..")},
	} {
		_, err := f.m.Start(req)
		if c := apierr.CodeOf(err); err == nil || c == shipapi.CodeInternal {
			t.Errorf("%s: %v (%s)", name, err, c)
		}
	}
	if _, err := f.m.Get("nope"); apierr.CodeOf(err) != shipapi.CodeNotFound {
		t.Errorf("get unknown: %v", err)
	}
	if _, err := f.m.Output(context.Background(), "nope", [3]int64{}, 0, 0); apierr.CodeOf(err) != shipapi.CodeNotFound {
		t.Errorf("output unknown: %v", err)
	}
	f.start(t, shipapi.StartJobRequest{Kind: "shell", Command: "sleep 30"})
	if _, err := f.m.Start(shipapi.StartJobRequest{Kind: "shell", Command: "true"}); apierr.CodeOf(err) != shipapi.CodeResourcesExhausted {
		t.Errorf("over MaxRunning: %v", err)
	}
}

func ptr[T any](v T) *T { return &v }

// TestDirMustBeShips: a link or a directory of another user in place of the jobs directory is refused.
func TestDirMustBeShips(t *testing.T) {
	d := t.TempDir()
	target := filepath.Join(d, "elsewhere")
	_ = os.Mkdir(target, 0o700)
	link := filepath.Join(d, "jobs")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if err := ownDir(link); err == nil {
		t.Fatal("a symbolic link was accepted")
	}
	if err := ownDir(filepath.Join(d, "fresh")); err != nil {
		t.Fatal(err)
	}
}

func TestCompleteUTF8(t *testing.T) {
	e := []byte("aé€😀") // 1 + 2 + 3 + 4 bytes
	for n, want := range map[int]int{0: 0, 1: 1, 2: 1, 3: 3, 4: 3, 5: 3, 6: 6, 7: 6, 8: 6, 9: 6, 10: 10} {
		if got := completeUTF8(e[:n]); got != want {
			t.Errorf("completeUTF8(%d bytes) = %d, want %d", n, got, want)
		}
	}
	if got := completeUTF8([]byte{'a', 0xff}); got != 2 {
		t.Errorf("invalid byte held back: %d", got)
	}
}

// TestCreatedArtifacts: files created or changed under the output paths, with size and sha256.
func TestCreatedArtifacts(t *testing.T) {
	f := newFixture(t, nil)
	for name, content := range map[string]string{"keep.txt": "same", "edit.txt": "old", "out/old.txt": "x"} {
		p := filepath.Join(f.ws, name)
		_ = os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-time.Hour)
	_ = os.Chtimes(filepath.Join(f.ws, "edit.txt"), old, old)
	cmd := "echo hello > out/new.txt; echo more >> edit.txt"
	info := f.start(t, shipapi.StartJobRequest{Kind: shipapi.JobKindShell, Command: cmd})
	end, _, _ := f.wait(t, info.ID)
	want := []shipapi.Artifact{
		{Path: "edit.txt", Size: 8, SHA256: "3962e4c7fed0b710943e58c8a20e4776ae0056e24de323f67b1e5ef07f85257e", Change: "modified"},
		{Path: "out/new.txt", Size: 6, SHA256: "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03", Change: "created"},
	}
	if len(end.CreatedArtifacts) != 2 || end.CreatedArtifacts[0] != want[0] || end.CreatedArtifacts[1] != want[1] {
		t.Fatalf("artifacts %+v", end.CreatedArtifacts)
	}
	// Only under the declared output paths.
	info = f.start(t, shipapi.StartJobRequest{Kind: shipapi.JobKindShell, Command: "echo a > out/two.txt; echo b > top.txt", OutputPaths: []string{"out"}})
	end, _, _ = f.wait(t, info.ID)
	if len(end.CreatedArtifacts) != 1 || end.CreatedArtifacts[0].Path != "out/two.txt" {
		t.Fatalf("artifacts under out: %+v", end.CreatedArtifacts)
	}
	if _, err := f.m.Start(shipapi.StartJobRequest{Kind: shipapi.JobKindShell, Command: "true", OutputPaths: []string{"../etc"}}); err == nil {
		t.Fatal("an output path outside the workspace was accepted")
	}
}

// blockingKernel prints one line per cell and holds it until its context ends.
type blockingKernel struct{}

func (blockingKernel) ExecObserved(ctx context.Context, code string, _ time.Duration, _ bool, on func(jupyter.Event)) (shipapi.ExecPythonResponse, error) {
	on(jupyter.Event{Stream: "stdout", Text: "started " + code + "\n"})
	on(jupyter.Event{Display: &shipapi.DisplayEvent{Type: "display_data", Data: map[string]string{"text/plain": "x"}}})
	<-ctx.Done()
	return shipapi.ExecPythonResponse{}, apierr.Wrap(shipapi.CodeInternal, ctx.Err(), "request cancelled")
}

// A kernel job whose ship went away is lost after a restart, with the error a python exec
// would have met, and its output still readable; one ship shuts down on is lost too.
func TestKernelJobLost(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.Kernel = blockingKernel{} })
	f.start(t, shipapi.StartJobRequest{ID: "cell", Kind: shipapi.JobKindKernel, Code: "c1"})
	r, err := f.m.Output(t.Context(), "cell", [3]int64{}, 0, 5*time.Second)
	if err != nil || r.Stdout.Data != "started c1\n" {
		t.Fatalf("%+v %v", r, err)
	}
	// The display event lands after the line; the copy below must hold both.
	if r.Display == nil || r.Display.Data == "" {
		r, err = f.m.Output(t.Context(), "cell", [3]int64{r.Stdout.Next, r.Stderr.Next, 0}, 0, 5*time.Second)
		if err != nil || r.Display == nil || r.Display.Data == "" {
			t.Fatalf("no display yet: %+v %v", r, err)
		}
	}
	// A copy of its directory as a ship killed now would leave it.
	copyDir := filepath.Join(f.dir, "copied")
	if err := os.CopyFS(copyDir, os.DirFS(filepath.Join(f.dir, "cell"))); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(copyDir, statusFile))
	_ = os.WriteFile(filepath.Join(copyDir, statusFile), []byte(strings.Replace(string(b), `"id":"cell"`, `"id":"copied"`, 1)), 0o600)
	f.m.Close()
	r, err = f.m.Output(t.Context(), "cell", [3]int64{}, 0, 0)
	if err != nil || r.Job.Status != shipapi.JobLost || r.Error == nil || r.Error.Code != shipapi.CodeKernelDied || r.Python != nil {
		t.Fatalf("shut down: %+v %v", r, err)
	}
	m2, err := New(f.cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	r, err = m2.Output(t.Context(), "copied", [3]int64{}, 0, 0)
	if err != nil || r.Job.Status != shipapi.JobLost || !strings.Contains(r.Job.Reason, "kernel") || r.Error == nil ||
		r.Stdout.Data != "started c1\n" || r.Display == nil || !strings.Contains(r.Display.Data, `"text/plain":"x"`) {
		t.Fatalf("restarted: %+v %v", r, err)
	}
	if r, err := m2.Output(t.Context(), "cell", [3]int64{}, 0, 0); err != nil || r.Error == nil || r.Error.Code != shipapi.CodeKernelDied {
		t.Fatalf("kept answer: %+v %v", r, err)
	}
	if _, err := newFixture(t, nil).m.Start(shipapi.StartJobRequest{Kind: shipapi.JobKindKernel, Code: "1"}); apierr.CodeOf(err) != shipapi.CodeBadRequest {
		t.Fatalf("no kernel: %v", err)
	}
}
