package sandbox_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/capability"
	"github.com/shipyard-dev/shipyard/internal/bay/docker"
	"github.com/shipyard-dev/shipyard/internal/bay/sandbox"
	"github.com/shipyard-dev/shipyard/internal/bay/shipclient"
	"github.com/shipyard-dev/shipyard/internal/bay/sqlite"
	"github.com/shipyard-dev/shipyard/internal/testenv"
)

// requireRunsc fails the test (never skips it) when the engine lacks the runtime runsc:
// scripts/gvisor.sh registers it, and .ci/run calls that script.
func requireRunsc(t *testing.T, drv *docker.Driver) {
	t.Helper()
	if err := drv.CheckRuntime(t.Context(), bay.ContainerRuntimeRunsc); err != nil {
		t.Fatalf("the Docker engine cannot run gVisor (register it with scripts/gvisor.sh, as .ci/run does): %v", err)
	}
}

// containerRuntime is the runtime the engine runs the sandbox's container with.
func containerRuntime(t *testing.T, drv *docker.Driver, sandboxID string) string {
	t.Helper()
	insts, err := drv.ListInstances(t.Context(), map[string]string{bay.LabelSandboxID: sandboxID})
	if err != nil || len(insts) != 1 || len(insts[0].Containers) != 1 {
		t.Fatalf("instances of %s: %+v %v", sandboxID, insts, err)
	}
	out, err := exec.Command("docker", "inspect", "-f", "{{.HostConfig.Runtime}}", insts[0].Containers[0].ID).Output()
	if err != nil {
		t.Fatalf("docker inspect: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// runscOneShot runs argv as uid 1000 in a one-shot container under runsc without network, as
// an exec's container runs, and returns how it ended and its output.
func runscOneShot(t *testing.T, drv *docker.Driver, image string, argv ...string) (bay.Exit, *bytes.Buffer, *bytes.Buffer, error) {
	t.Helper()
	name := "gvisor-oneshot-" + strings.ToLower(bay.NewID("t"))
	spec := bay.InstanceSpec{Name: name, Runtime: bay.ContainerRuntimeRunsc, Network: bay.NetworkPolicy{Mode: bay.NetworkNone},
		Labels:     map[string]string{bay.LabelOwner: "alice"},
		Containers: []bay.ContainerSpec{{Name: "exec", RuntimeType: "exec", Image: image, User: "1000:1000", Command: argv}}}
	if _, err := drv.CreateInstance(t.Context(), spec); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = drv.DestroyInstance(context.Background(), name) })
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	exit, err := drv.WaitInstance(ctx, name, &stdout, &stderr)
	return exit, &stdout, &stderr, err
}

// containerID is the id of the one container of the sandbox's instance.
func containerID(t *testing.T, drv *docker.Driver, sandboxID string) string {
	t.Helper()
	insts, err := drv.ListInstances(t.Context(), map[string]string{bay.LabelSandboxID: sandboxID})
	if err != nil || len(insts) != 1 || len(insts[0].Containers) != 1 {
		t.Fatalf("instances of %s: %+v %v", sandboxID, insts, err)
	}
	return insts[0].Containers[0].ID
}

// TestDockerGVisor runs a sandbox of a profile with runtime runsc on the real engine with the
// real sandbox image: ship separates privileges under gVisor and serves python, shell and a
// terminal; user code runs as uid 1000 without capabilities and with no-new-privileges, cannot read ship's
// environment (its runtime token) or memory, nor signal it, nor take another uid; files the API
// writes belong to the sandbox user; the workspace survives a stop and the resume starts under
// runsc again. A one-shot (an exec's container) runs under runsc too, and the engine's runtime
// list answers runtime_missing for a runtime it lacks.
func TestDockerGVisor(t *testing.T) {
	image := baseImage(t)
	ctx := context.Background()
	log := slog.New(slog.DiscardHandler)
	st, err := sqlite.Open(ctx, sqlite.Options{Path: filepath.Join(t.TempDir(), "bay.db"), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() }) // after the sandbox cleanup below (LIFO)
	drv, err := docker.New(docker.DefaultConfig(), log)
	if err != nil {
		t.Fatal(err)
	}
	requireRunsc(t, drv)

	prof := bay.Profile{ID: "gvisor", IdleTimeout: 30 * time.Minute, Runtime: bay.ContainerRuntimeRunsc,
		Containers: []bay.ContainerProfile{{Name: "primary", Image: image, RuntimeType: "ship", RuntimePort: 8123,
			Resources: bay.Resources{CPUs: 1, Memory: "512m", MemoryBytes: 512 << 20}, Capabilities: bay.DefaultCapabilities}}}
	ship := shipclient.New(nil, log)
	svc := sandbox.New(st, drv, ship, nil, log, sandbox.Config{
		Profiles: []bay.Profile{prof}, InstanceID: "it-" + bay.NewID("t"), ReadinessTimeout: 60 * time.Second,
	})
	caps := capability.New(svc, ship, log, capability.Config{})
	sb, err := svc.CreateSandbox(ctx, "alice", sandbox.CreateParams{ProfileID: prof.ID}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.DeleteSandbox(context.Background(), "alice", sb.ID) })
	py := func(code string) string {
		t.Helper()
		r, err := caps.ExecPython(ctx, "alice", sb.ID, capability.PythonParams{Code: code, Timeout: 60})
		if err != nil {
			t.Fatalf("python %q: %v", code, err)
		}
		if !r.Success {
			t.Fatalf("python %q failed: %+v", code, r)
		}
		return r.Text
	}
	sh := func(cmd string) string {
		t.Helper()
		r, err := caps.ExecShell(ctx, "alice", sb.ID, capability.ShellParams{Command: cmd, Timeout: 60})
		if err != nil {
			t.Fatalf("shell %q: %v", cmd, err)
		}
		return r.Output
	}

	began := time.Now()
	if out := sh("echo ready"); out != "ready" {
		t.Fatalf("first shell call: %q", out)
	}
	t.Logf("runsc: cold start + first shell call: %v", time.Since(began))
	if rt := containerRuntime(t, drv, sb.ID); rt != "runsc" {
		t.Fatalf("the container runs under %q, want runsc", rt)
	}
	if out := sh("dmesg 2>&1 | head -1"); !strings.Contains(out, "gVisor") {
		t.Fatalf("the container's kernel is not gVisor's: %q", out)
	}
	if out := py("x = 6 * 7\nprint(x)"); out != "42" {
		t.Fatalf("python: %q", out)
	}

	t.Run("user code holds nothing", func(t *testing.T) { testenv.CheckUserCodeHoldsNothing(t, sh, py) })

	t.Run("ship is out of reach", func(t *testing.T) {
		pid := sh(`for p in /proc/[0-9]*; do [ "$(cat $p/comm 2>/dev/null)" = ship ] && echo ${p#/proc/}; done`)
		if !regexp.MustCompile(`^[0-9]+$`).MatchString(pid) {
			t.Fatalf("ship's pid: %q", pid)
		}
		out := sh("(cat /proc/" + pid + "/environ; head -c1 /proc/" + pid + "/mem; kill -0 " + pid + "; kill -STOP " + pid + "; env | grep -c SHIP_AUTH_TOKEN) 2>&1")
		for _, want := range []string{"environ: Permission denied", "/mem' for reading: Permission denied", "Operation not permitted"} {
			if !strings.Contains(out, want) {
				t.Errorf("ship's /proc files and signals: %q lacks %q", out, want)
			}
		}
		if !strings.HasSuffix(out, "\n0") {
			t.Errorf("the runtime token reached user code: %q", out)
		}
		if out := sh("echo alive"); out != "alive" {
			t.Fatalf("ship after the attempts: %q", out)
		}
	})

	t.Run("a terminal runs as the sandbox user", func(t *testing.T) {
		tctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		c, err := caps.OpenTerminal(tctx, "alice", sb.ID, 80, 24)
		if err != nil {
			t.Fatal(err)
		}
		defer c.CloseNow()
		if err := c.Write(tctx, websocket.MessageText, []byte("echo T:$(id -u):$(stat -c %u $(tty))\n")); err != nil {
			t.Fatal(err)
		}
		var out strings.Builder
		for !strings.Contains(out.String(), "T:1000:1000") {
			_, b, err := c.Read(tctx)
			if err != nil {
				t.Fatalf("terminal: %v after %q", err, out.String())
			}
			out.Write(b)
		}
	})

	t.Run("files of the API belong to the sandbox user", func(t *testing.T) {
		if err := caps.WriteFile(ctx, "alice", sb.ID, "notes/keep.txt", "kept"); err != nil {
			t.Fatal(err)
		}
		if out := sh("stat -c %u:%g notes notes/keep.txt"); out != "1000:1000\n1000:1000" {
			t.Errorf("owners: %q", out)
		}
	})

	t.Run("a fork bomb does not kill gVisor's kernel", func(t *testing.T) {
		// Under gVisor the pids cgroup also counts the sandbox kernel's own tasks: without the
		// driver's RLIMIT_NPROC a fork bomb exhausts it, gVisor's kernel dies and every process
		// with it, so the last line below is never printed. With it, the bomb's forks fail with
		// EAGAIN as under runc. (A one-shot: no runtime whose health checks could starve.)
		exit, stdout, stderr, err := runscOneShot(t, drv, image, "bash", "-c", testenv.ForkBombScript)
		limit := bay.RunscProcessLimit(docker.DefaultPidsLimit)
		var nproc, procs int64
		if n, _ := fmt.Sscanf(stdout.String(), "%d\nprocesses %d\nsurvived\n", &nproc, &procs); n != 2 || err != nil || exit.Code != 0 {
			t.Fatalf("one-shot fork bomb under runsc: %+v %v: stdout %q, stderr %q", exit, err, stdout.String(), stderr.String())
		}
		// The bomb ran: its processes come and go, but were many at the end.
		if nproc != limit || procs < limit/3 {
			t.Fatalf("RLIMIT_NPROC %d (want %d), %d processes at the end of the bomb", nproc, limit, procs)
		}
		t.Logf("%d processes of at most %d at the end of the bomb", procs, limit)
	})

	t.Run("a session heals after a fork bomb", func(t *testing.T) {
		r, err := caps.ExecShell(ctx, "alice", sb.ID, capability.ShellParams{Command: "timeout 10 bash -c ':(){ :|:& };:' 2>/dev/null; echo ended", Timeout: 60})
		t.Logf("the fork bomb's call: %+v %v", r, err)
		// Then the sandbox answers again in bounded time. Usually ship finds the user's
		// processes at the limit and kills them (the notice says so); a call can land while
		// the bomb's processes are between generations and fail in bash's own forks; and when
		// the bomb starves ship of CPU past bay's health checks, bay replaces the runtime and
		// answers a retryable session_not_ready meanwhile.
		deadline := time.Now().Add(120 * time.Second)
		for {
			r, err := caps.ExecShell(ctx, "alice", sb.ID, capability.ShellParams{Command: "echo alive", Timeout: 30})
			if err == nil && r.Output == "alive" {
				t.Logf("answered again; notice %q", r.Notice)
				break
			}
			var be *bay.Error
			if err != nil && (!errors.As(err, &be) || be.Code != bay.CodeSessionNotReady) {
				t.Fatalf("a call after the fork bomb: %v", err)
			}
			if time.Now().After(deadline) {
				t.Fatalf("no call succeeded within 120 s of the fork bomb; the last: %+v %v", r, err)
			}
			if err != nil {
				t.Logf("a call after the fork bomb: %v", err)
				time.Sleep(time.Second)
			} else {
				t.Logf("a call after the fork bomb failed: exit %d, %s", r.ExitCode, deref(r.Error))
			}
		}
	})

	t.Run("the workspace survives stop and resume", func(t *testing.T) {
		began := time.Now()
		if err := svc.StopSandbox(ctx, "alice", sb.ID); err != nil {
			t.Fatal(err)
		}
		t.Logf("stop: %v", time.Since(began))
		if left, _ := drv.ListInstances(ctx, map[string]string{bay.LabelSandboxID: sb.ID}); len(left) != 0 {
			t.Fatalf("stop left %d containers", len(left))
		}
		began = time.Now()
		if c, err := caps.ReadFile(ctx, "alice", sb.ID, "notes/keep.txt"); err != nil || c != "kept" {
			t.Fatalf("file after resume: %q %v", c, err)
		}
		t.Logf("resume + first read: %v", time.Since(began))
		if rt := containerRuntime(t, drv, sb.ID); rt != "runsc" {
			t.Fatalf("the resumed container runs under %q", rt)
		}
		if out := py("print(open('notes/keep.txt').read())"); out != "kept" {
			t.Fatalf("kernel after resume: %q", out)
		}
	})

	t.Run("a one-shot runs under runsc", func(t *testing.T) {
		exit, stdout, stderr, err := runscOneShot(t, drv, image, "sh", "-c", "dmesg | head -1; id -u")
		if err != nil || exit.Code != 0 || !strings.Contains(stdout.String(), "gVisor") || !strings.HasSuffix(stdout.String(), "1000\n") {
			t.Fatalf("one-shot: %+v %v: %q %q", exit, err, stdout.String(), stderr.String())
		}
	})

	t.Run("a runtime the engine lacks is runtime_missing", func(t *testing.T) {
		err := drv.CheckRuntime(ctx, "no-such-runtime")
		var e *bay.Error
		if !bay.IsRuntimeMissing(err) || !errors.As(err, &e) {
			t.Fatalf("check: %v", err)
		}
		available, _ := e.Details["available"].([]string)
		if !slices.Contains(available, "runc") || !slices.Contains(available, "runsc") || !strings.Contains(e.Details["hint"].(string), "daemon.json") {
			t.Errorf("details %+v", e.Details)
		}
	})
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}
