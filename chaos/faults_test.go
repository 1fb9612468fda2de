package chaos

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/shipyard-dev/shipyard/internal/testenv"
)

// stopRuntime freezes the container's ship process with SIGSTOP from the host (the container
// holds no capability to do it from inside): its host pid is the child of the container's
// init named "ship". The returned function resumes it.
func stopRuntime(cli *client.Client, containerID string) (resume func(), err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := cli.ContainerInspect(ctx, containerID, client.ContainerInspectOptions{})
	if err != nil || res.Container.State == nil || res.Container.State.Pid == 0 {
		return nil, fmt.Errorf("inspect %s: %v", containerID, err)
	}
	return testenv.StopChild(res.Container.State.Pid, "ship")
}

func runningContainer(t *testing.T, cli *client.Client, id string) string {
	t.Helper()
	_, running, err := containers(cli, id)
	if err != nil || len(running) != 1 {
		t.Fatalf("running containers of %s: %v, %v", id, running, err)
	}
	return running[0]
}

func faultPhase(t *testing.T, rep *report, cli *client.Client, b *bay, alice, bob *api) {
	y := alice.createSandbox(t)
	alice.shellOK(t, y, "echo kept > kept.txt")

	// docker kill behind bay's back.
	c := runningContainer(t, cli, y)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	_, err := cli.ContainerKill(ctx, c, client.ContainerKillOptions{Signal: "KILL"})
	cancel()
	if err != nil {
		t.Fatalf("docker kill %s: %v", c, err)
	}
	r := alice.shell(y, "cat kept.txt", 60)
	next, last := r.Took, r
	if r.Status != 200 || r.Str("output") != "kept" {
		var d time.Duration
		d, last = untilSuccess(alice, y, "cat kept.txt", 90*time.Second)
		next = r.Took + d
		if d < 0 {
			next = -1
		}
	}
	addFault(rep, "docker kill of the sandbox's container, then exec", r, next)
	if next < 0 || last.Str("output") != "kept" {
		rep.fail("fault docker kill: no successful exec with the workspace intact: %s", last)
	}

	// SIGSTOP of ship.
	c = runningContainer(t, cli, y)
	resume, err := stopRuntime(cli, c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(resume)
	began := time.Now()
	r = alice.shell(y, "echo hi", 60)
	first := time.Since(began)
	d, last := untilSuccess(alice, y, "echo again", 90*time.Second)
	next = -1
	if d >= 0 {
		next = time.Since(began)
	}
	r.Took = first
	addFault(rep, "SIGSTOP of ship, then exec", r, next)
	if r.Status == 500 || r.Err != nil || first > 45*time.Second {
		rep.fail("fault SIGSTOP: the call to a frozen runtime answered %s after %v", r, first)
	}
	if next < 0 {
		rep.fail("fault SIGSTOP: no success within 90 s: %s", last)
	}
	resume()

	bayKill(t, rep, cli, b, alice, bob)
}

func addFault(rep *report, name string, first resp, next time.Duration) {
	rep.mu.Lock()
	defer rep.mu.Unlock()
	rep.Faults = append(rep.Faults, faultRow{Name: name, FirstAnswer: first.Took, FirstStatus: summary(first), NextSuccess: next})
}

// bayKill kills bay with SIGKILL while clients run commands in every sandbox, restarts it on
// the same database and checks that every sandbox answers again with one container.
func bayKill(t *testing.T, rep *report, cli *client.Client, b *bay, alice, bob *api) {
	type owned struct {
		a  *api
		id string
	}
	var all []owned
	for _, a := range []*api{alice, bob} {
		for _, id := range a.created() {
			if r := a.do("GET", "/v1/sandboxes/"+id, nil, nil); r.Status == 200 {
				all = append(all, owned{a, id})
			}
		}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, o := range all {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if r := o.a.shell(o.id, "echo load", 30); r.Err != nil {
					return // bay is gone
				}
			}
		}()
	}
	time.Sleep(2 * time.Second)
	b.proc.Kill()
	close(stop)
	wg.Wait()
	healthy, err := b.launch()
	if err != nil {
		t.Fatalf("restart bay after SIGKILL: %v", err)
	}
	var slowest time.Duration
	lost, dups, stale := 0, 0, 0
	for _, o := range all {
		d, last := untilSuccess(o.a, o.id, "echo back", 120*time.Second)
		if d < 0 {
			lost++
			rep.fail("bay restart: sandbox %s of %s does not answer: %s", o.id, o.a.owner, last)
			continue
		}
		slowest = max(slowest, d)
		ids, running, err := containers(cli, o.id)
		if err != nil || len(running) != 1 {
			dups++
			rep.fail("bay restart: sandbox %s has running containers %v (all %v, %v)", o.id, running, ids, err)
		}
		stale += len(ids) - len(running)
	}
	for _, a := range []*api{alice, bob} {
		r := a.do("GET", "/v1/sandboxes?limit=200", nil, nil)
		for _, o := range all {
			if o.a == a && !strings.Contains(string(r.Body), o.id) {
				lost++
				rep.fail("bay restart: %s's list lacks %s", a.owner, o.id)
			}
		}
	}
	rep.mu.Lock()
	rep.Restart = restartFigures{Sandboxes: len(all), Lost: lost, Duplicates: dups, Stale: stale, BayHealthy: healthy, SlowestBack: slowest}
	rep.mu.Unlock()
}
