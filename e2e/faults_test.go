package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/shipyard-dev/shipyard/internal/testenv"
)

// runningContainer returns the id of the sandbox's running container.
func runningContainer(t *testing.T, cli *client.Client, sandboxID string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := cli.ContainerList(ctx, client.ContainerListOptions{
		Filters: make(client.Filters).Add("label", "bay.sandbox_id="+sandboxID)})
	if err != nil || len(res.Items) != 1 {
		t.Fatalf("running containers of %s: %d, %v", sandboxID, len(res.Items), err)
	}
	return res.Items[0].ID
}

// stopRuntime freezes the container's ship process with SIGSTOP from the host (the container
// holds no capability to do it from inside): its host pid is the child of the container's
// init named "ship".
func stopRuntime(t *testing.T, cli *client.Client, id string) {
	t.Helper()
	res, err := cli.ContainerInspect(t.Context(), id, client.ContainerInspectOptions{})
	if err != nil || res.Container.State == nil || res.Container.State.Pid == 0 {
		t.Fatalf("inspect %s: %v", id, err)
	}
	resume, err := testenv.StopChild(res.Container.State.Pid, "ship")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(resume)
}

// A container killed behind bay's back: the next call is answered by a new session (the
// engine reports the death), with the workspace intact.
func TestFaultKilledContainer(t *testing.T) {
	t.Parallel()
	cli := docker(t)
	b := startBay(t, bayOptions{})
	id := b.create(map[string]any{}, nil).Str("id")
	b.writeFile(id, "kept.txt", "still here")
	b.pythonOK(id, "x = 1")
	c := runningContainer(t, cli, id)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := cli.ContainerKill(ctx, c, client.ContainerKillOptions{Signal: "KILL"}); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	r := expect(t, b.shell(id, map[string]any{"command": "cat kept.txt"}), 200, "shell after kill")
	if r.Str("output") != "still here" {
		t.Fatalf("after the kill: %s", r)
	}
	t.Logf("first call after docker kill answered in %v", time.Since(began))
	if got := b.pythonOK(id, "print('x' in dir())"); got != "False" {
		t.Fatalf("a new session has a fresh kernel; got %q", got)
	}
}

// A runtime frozen by SIGSTOP: the call in flight ends within about ten seconds with a
// retryable 503, and the next call is answered by a replacement.
func TestFaultFrozenRuntime(t *testing.T) {
	t.Parallel()
	cli := docker(t)
	b := startBay(t, bayOptions{})
	id := b.create(map[string]any{}, nil).Str("id")
	b.shellOK(id, "true")
	c := runningContainer(t, cli, id)
	stopRuntime(t, cli, c)
	began := time.Now()
	r := b.do("POST", "/v1/sandboxes/"+id+"/shell/exec", map[string]any{"command": "echo hi", "timeout": 120}, nil)
	took := time.Since(began)
	if r.Status != 503 || r.Str("error.code") != "session_not_ready" || r.Get("error.details.retry_after_ms") == nil {
		t.Fatalf("call to a frozen runtime: %s", r)
	}
	if took > 20*time.Second {
		t.Fatalf("the call to a frozen runtime took %v", took)
	}
	t.Logf("call to a frozen runtime ended after %v", took)
	if out := b.shellOK(id, "echo again"); out != "again" {
		t.Fatalf("next call: %q", out)
	}
	if c2 := runningContainer(t, cli, id); c2 == c {
		t.Fatal("the frozen container still serves the sandbox")
	}
}

// A call waiting for a cold start ends at once when the sandbox is deleted (404), not after
// the readiness timeout.
func TestFaultDeleteDuringColdStart(t *testing.T) {
	t.Parallel()
	b := startBay(t, bayOptions{})
	id := b.create(map[string]any{}, nil).Str("id")
	done := make(chan Response, 1)
	go func() {
		done <- b.do("POST", "/v1/sandboxes/"+id+"/python/exec", map[string]any{"code": "1+1"}, nil)
	}()
	cli := docker(t)
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if len(sessionContainers(t, cli, id)) > 0 {
			break
		}
	}
	began := time.Now()
	expect(t, b.do("DELETE", "/v1/sandboxes/"+id, nil, nil), 204, "delete during the start")
	select {
	case r := <-done:
		if r.Status != 404 && !(r.Status == 200 && strings.Contains(r.String(), "2")) {
			t.Fatalf("call after delete: %s, want 404 (or its answer, had it finished first)", r)
		}
		t.Logf("call ended %v after the delete: %d", time.Since(began), r.Status)
	case <-time.After(15 * time.Second):
		t.Fatal("the call still waits 15 s after the delete")
	}
}
