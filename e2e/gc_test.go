package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
)

// gcRun runs the named GC tasks through the admin API and returns the task's result object.
func (b *Bay) gcRun(t *testing.T, task string) map[string]any {
	t.Helper()
	r := expect(t, b.do("POST", "/v1/admin/gc/run", map[string]any{"tasks": []string{task}}, nil), 200, "gc run "+task)
	results, _ := r.Get("results").([]any)
	if len(results) != 1 {
		t.Fatalf("gc run %s: want exactly the requested task in results: %s", task, r)
	}
	res := results[0].(map[string]any)
	if res["task_name"] != task {
		t.Fatalf("gc ran %v, want %s", res["task_name"], task)
	}
	return res
}

// Scenario 10: the GC chaos workflow: idle GC is recoverable, expiry GC is final, strict orphan
// container GC never removes what is not provably ours, orphan cargos are collected.
func TestScenario10GCChaos(t *testing.T) {
	t.Parallel()
	cli := docker(t)
	b := startBay(t, bayOptions{extraConfig: `
`})
	ctx := context.Background()

	// Phase A: a real workload.
	sb := b.create(map[string]any{"profile": "short-idle", "ttl": 120}, nil)
	id, cargo := sb.Str("id"), sb.Str("cargo_id")
	b.pythonOK(id, "import os, json; os.makedirs('data', exist_ok=True); json.dump({'ok': 1}, open('data/result.json', 'w'))")
	if st := b.get(id).Str("status"); st != "ready" {
		t.Fatalf("status after exec = %q, want ready", st)
	}
	if len(sessionContainers(t, cli, id)) != 1 {
		t.Fatal("want one container")
	}

	// Phase B: keepalive moves only idle_expires_at; then the idle deadline passes and idle GC
	// destroys the compute, which the next call rebuilds with the files intact.
	before := b.get(id)
	time.Sleep(20 * time.Millisecond)
	expect(t, b.do("POST", "/v1/sandboxes/"+id+"/keepalive", nil, nil), 200, "keepalive")
	after := b.get(id)
	if after.Str("expires_at") != before.Str("expires_at") {
		t.Fatal("keepalive changed expires_at")
	}
	if after.Str("idle_expires_at") == before.Str("idle_expires_at") {
		t.Fatal("keepalive did not move idle_expires_at")
	}
	ext := expect(t, b.do("POST", "/v1/sandboxes/"+id+"/extend_ttl", map[string]any{"extend_by": 60}, nil), 200, "extend")
	if ext.Str("idle_expires_at") != after.Str("idle_expires_at") {
		t.Fatal("extend_ttl changed idle_expires_at")
	}
	time.Sleep(2500 * time.Millisecond) // the profile's idle_timeout is 2 s
	if res := b.gcRun(t, "idle_session"); res["cleaned_count"].(float64) < 1 {
		t.Fatalf("idle GC cleaned nothing: %v", res)
	}
	got := b.get(id)
	if got.Str("status") != "idle" || got.Get("idle_expires_at") != nil {
		t.Fatalf("after idle GC: %s", got)
	}
	if n := len(sessionContainers(t, cli, id)); n != 0 {
		t.Fatalf("idle GC left %d containers", n)
	}
	if out := b.pythonOK(id, "import json; print(json.load(open('data/result.json'))['ok'])"); out != "1" {
		t.Fatalf("files after idle GC: %q", out)
	}

	// Phase C: strict orphan container GC. One trusted orphan (all labels, our instance, no
	// session row), two untrusted look-alikes (another instance id; a missing label).
	mk := func(name string, labels map[string]string) string {
		res, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{
			Name:   name,
			Config: &container.Config{Image: testImage, Cmd: []string{"sleep", "300"}, Labels: labels},
		})
		if err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
		t.Cleanup(func() {
			cli.ContainerRemove(context.Background(), res.ID, client.ContainerRemoveOptions{Force: true})
		})
		return res.ID
	}
	old := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	labels := func(sess, instance string) map[string]string {
		return map[string]string{
			"bay.session_id": sess, "bay.sandbox_id": "sandbox-000000000000", "bay.cargo_id": "ws-000000000000",
			"bay.instance_id": instance, "bay.managed": "true", "bay.created_at": old, "shipyard.test": "e2e",
		}
	}
	suffix := randHex(t)
	trusted := mk("bay-session-sess-"+suffix, labels("sess-"+suffix, b.InstanceID))
	otherInstance := mk("bay-session-sess-x"+suffix[1:], labels("sess-x"+suffix[1:], "someone-else"))
	missing := labels("sess-y"+suffix[1:], b.InstanceID)
	delete(missing, "bay.cargo_id")
	missingLabel := mk("bay-session-sess-y"+suffix[1:], missing)
	notOurs := mk(fmt.Sprintf("unrelated-%s", suffix), map[string]string{"shipyard.test": "e2e"})

	dry := expect(t, b.do("POST", "/v1/admin/gc/run", map[string]any{"tasks": []string{"orphan_container"}, "dry_run": true}, nil), 200, "gc dry run")
	if !containerExists(t, cli, trusted) {
		t.Fatalf("a dry run removed a container: %s", dry)
	}
	res := b.gcRun(t, "orphan_container")
	if res["cleaned_count"].(float64) < 1 {
		t.Fatalf("orphan GC cleaned nothing: %v", res)
	}
	if containerExists(t, cli, trusted) {
		t.Fatal("the trusted orphan container survived GC")
	}
	for name, id := range map[string]string{"other instance": otherInstance, "missing label": missingLabel, "unrelated": notOurs} {
		if !containerExists(t, cli, id) {
			t.Fatalf("strict orphan GC removed a container that is not provably ours (%s)", name)
		}
	}
	if len(sessionContainers(t, cli, id)) != 1 {
		t.Fatal("orphan GC touched a live session's container")
	}

	// Phase D: expiry GC is final and cascades to the managed cargo.
	short := b.create(map[string]any{"ttl": 1}, nil)
	sid, scargo := short.Str("id"), short.Str("cargo_id")
	b.pythonOK(sid, "print(1)") // give it compute and a volume
	time.Sleep(1500 * time.Millisecond)
	if res := b.gcRun(t, "expired_sandbox"); res["cleaned_count"].(float64) < 1 {
		t.Fatalf("expiry GC cleaned nothing: %v", res)
	}
	expectError(t, b.get(sid), 404, "not_found", "expired sandbox after GC")
	if volumeExists(t, cli, "bay-cargo-"+scargo) {
		t.Fatal("expiry GC left the managed cargo volume")
	}
	if n := len(sessionContainers(t, cli, sid)); n != 0 {
		t.Fatalf("expiry GC left %d containers", n)
	}
	expectError(t, b.do("POST", "/v1/sandboxes/"+sid+"/extend_ttl", map[string]any{"extend_by": 60}, nil), 409, "sandbox_expired", "extend after expiry GC")

	// Phase E: orphan cargo GC. A managed volume of ours whose cargo row never got written (a
	// create that failed half-way) is collected; the live sandbox's cargo is not.
	orphanCargo := "ws-" + randHex(t)
	if _, err := cli.VolumeCreate(ctx, client.VolumeCreateOptions{Name: "bay-cargo-" + orphanCargo, Labels: map[string]string{
		"bay.cargo_id": orphanCargo, "bay.managed": "true", "bay.instance_id": b.InstanceID, "bay.created_at": old, "shipyard.test": "e2e",
	}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cli.VolumeRemove(context.Background(), "bay-cargo-"+orphanCargo, client.VolumeRemoveOptions{Force: true})
	})
	if res := b.gcRun(t, "orphan_cargo"); res["cleaned_count"].(float64) < 1 {
		t.Fatalf("orphan cargo GC cleaned nothing: %v", res)
	}
	if volumeExists(t, cli, "bay-cargo-"+orphanCargo) {
		t.Fatal("the orphan cargo volume survived")
	}
	if !volumeExists(t, cli, "bay-cargo-"+cargo) {
		t.Fatal("orphan cargo GC removed a live sandbox's volume")
	}

	status := expect(t, b.do("GET", "/v1/admin/gc/status", nil, nil), 200, "gc status")
	if status.Str("instance_id") != b.InstanceID {
		t.Fatalf("gc status instance_id: %s", status)
	}
	expect(t, b.do("DELETE", "/v1/sandboxes/"+id, nil, nil), 204, "delete")
}

func containerExists(t *testing.T, cli *client.Client, id string) bool {
	t.Helper()
	_, err := cli.ContainerInspect(context.Background(), id, client.ContainerInspectOptions{})
	return err == nil
}
