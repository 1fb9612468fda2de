package chaos

import (
	"os"
	"testing"
)

// TestChaos runs the phases in order on one bay: hostile input, cross-tenant access, abuse
// from inside a sandbox, concurrent load, then faults (the last one kills bay mid-load and
// restarts it on the same database). Everything it creates is deleted at the end.
func TestChaos(t *testing.T) {
	s := currentSettings()
	cli := dockerClient(t)
	b := startBay(t)
	rep := newReport(s.Mode)
	alice, bob := newAPI(b, keyA, ownerA), newAPI(b, keyB, ownerB)
	t.Cleanup(func() {
		if !b.running() {
			if _, err := b.launch(); err != nil {
				t.Errorf("relaunch bay for the cleanup: %v", err)
			}
		}
		for _, a := range []*api{alice, bob} {
			for _, f := range a.cleanup() {
				t.Errorf("cleanup: %s", f)
			}
		}
		for _, a := range []*api{alice, bob} {
			for _, id := range a.created() {
				if all, _, err := containers(cli, id); err != nil || len(all) > 0 {
					t.Errorf("sandbox %s still has containers %v after its delete (%v)", id, all, err)
				}
			}
		}
		if b.proc != nil {
			if err := b.proc.Stop(30e9); err != nil {
				t.Errorf("stop bay: %v", err)
			}
		}
		for _, l := range leftovers(cli, b.instance) {
			t.Errorf("left behind after the suite's deletes (now removed): %s", l)
		}
		md := rep.markdown()
		t.Logf("\n%s", md)
		if path := os.Getenv("CHAOS_REPORT"); path != "" {
			if err := os.WriteFile(path, []byte(md), 0o644); err != nil {
				t.Errorf("write %s: %v", path, err)
			}
		}
		if t.Failed() {
			t.Logf("bay logs (tail):\n%s", tail(b.logs.String(), 8000))
		}
	})

	// The sandboxes every phase shares: one of each owner, started.
	sa := alice.createSandbox(t)
	sb := bob.createSandbox(t)
	alice.shellOK(t, sa, "true")
	bob.shellOK(t, sb, "true")

	t.Run("hostile", func(t *testing.T) { hostilePhase(t, rep, s, alice, sa) })
	t.Run("tenant", func(t *testing.T) { tenantPhase(t, rep, alice, bob, sa, sb) })
	t.Run("abuse", func(t *testing.T) { abusePhase(t, rep, s, alice, bob, sb) })
	t.Run("load", func(t *testing.T) { loadPhase(t, rep, s, alice, bob) })
	t.Run("faults", func(t *testing.T) { faultPhase(t, rep, cli, b, alice, bob) })
	for _, f := range rep.Failures {
		t.Errorf("%s", f)
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
