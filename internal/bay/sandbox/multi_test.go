package sandbox_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/fake"
	"github.com/shipyard-dev/shipyard/internal/bay/sandbox"
)

func withMulti(c *sandbox.Config) {
	c.Profiles = append(c.Profiles, bay.Profile{
		ID: "browser-python", IdleTimeout: 30 * time.Minute,
		Containers: []bay.ContainerProfile{
			{Name: "ship", Image: "ship:test", RuntimeType: "ship", RuntimePort: 8123, Capabilities: []string{"python", "shell", "filesystem"}, PrimaryFor: []string{"filesystem"}},
			{Name: "browser", Image: "gull:test", RuntimeType: "gull", RuntimePort: 8115, Capabilities: []string{"browser", "filesystem"}},
		},
	})
}

// TestMultiContainerSession: a two-container profile gets a session network and both
// containers; capabilities route to their container; a dead sidecar rebuilds the whole
// session (reference defect 11); stop removes both containers and the network; a start
// failure of any container leaves nothing.
func TestMultiContainerSession(t *testing.T) {
	e := newEnv(t, withMulti)
	ctx := context.Background()
	r := e.create(t, "alice", sandbox.CreateParams{ProfileID: "browser-python"})
	if _, err := e.svc.ExecShell(ctx, "alice", r.ID, sandbox.ShellParams{Command: "ls", Timeout: 30}); err != nil {
		t.Fatal(err)
	}
	cs := e.drv.Containers()
	if len(cs) != 2 || len(e.drv.Networks()) != 1 {
		t.Fatalf("containers %d networks %v", len(cs), e.drv.Networks())
	}
	sess, err := e.svc.EnsureRunning(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	net := "bay_net_" + sess.ID
	if e.drv.Networks()[0] != net {
		t.Fatalf("network %v", e.drv.Networks())
	}
	for _, c := range cs {
		name := c.Spec.Labels[sandbox.LabelContainerName]
		if c.Spec.Name != "bay-"+sess.ID+"-"+name || c.Spec.Network != net || c.Spec.Hostname != name || c.Spec.Env["BAY_CONTAINER_NAME"] != name {
			t.Fatalf("spec %+v", c.Spec)
		}
	}
	if len(sess.Containers) != 2 || sess.Containers[0].Name != "ship" || sess.ContainerID != sess.Containers[0].ContainerID || sess.Endpoint == "" {
		t.Fatalf("session %+v", sess)
	}
	got, _ := e.svc.GetSandbox(ctx, "alice", r.ID)
	if len(got.Containers) != 2 || got.Containers[1].Name != "browser" || got.Containers[1].RuntimeType != "gull" {
		t.Fatalf("get: %+v", got.Containers)
	}

	// A dead sidecar: after the probe cache, the whole session is rebuilt.
	e.drv.Kill(sess.Containers[1].ContainerID)
	e.clock.Advance(3 * time.Second)
	s2, err := e.svc.EnsureRunning(ctx, r.ID)
	if err != nil || s2.ID == sess.ID {
		t.Fatalf("rebuild: %v %v", s2, err)
	}
	if len(e.drv.Containers()) != 2 || len(e.drv.Networks()) != 1 {
		t.Fatalf("after rebuild: %d containers, networks %v", len(e.drv.Containers()), e.drv.Networks())
	}

	if err := e.svc.StopSandbox(ctx, "alice", r.ID); err != nil {
		t.Fatal(err)
	}
	if len(e.drv.Containers()) != 0 || len(e.drv.Networks()) != 0 {
		t.Fatalf("after stop: %d containers, networks %v", len(e.drv.Containers()), e.drv.Networks())
	}

	// The second container fails to start: nothing is left, the sandbox shows failed.
	e.drv.FailWhen(fake.MethodStartContainer, func(c fake.Call) error {
		if ct, ok := e.drv.Container(c.Target); ok && strings.HasSuffix(ct.Spec.Name, "-browser") {
			return errors.New("boom")
		}
		return nil
	})
	if _, err := e.svc.EnsureRunning(ctx, r.ID); code(err) != bay.CodeInternal {
		t.Fatalf("start failure: %v", err)
	}
	if len(e.drv.Containers()) != 0 || len(e.drv.Networks()) != 0 {
		t.Fatalf("after failure: %d containers, networks %v", len(e.drv.Containers()), e.drv.Networks())
	}
	if got, _ := e.svc.GetSandbox(ctx, "alice", r.ID); got.Status != "failed" {
		t.Fatalf("status %s", got.Status)
	}
}
