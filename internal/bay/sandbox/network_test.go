package sandbox_test

import (
	"context"
	"strings"
	"testing"

	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/capability"
	"github.com/shipyard-dev/shipyard/internal/bay/fake"
	"github.com/shipyard-dev/shipyard/internal/bay/sandbox"
)

// withListed adds a profile whose ceiling is an allowlist.
func withListed(c *sandbox.Config) {
	p := testProfiles()[0]
	p.ID = "listed"
	p.Network = bay.NetworkPolicy{Mode: bay.NetworkAllowlist, Allow: []string{"*.example.com"}, Deny: []string{"secret.example.com"}}
	c.Profiles = append(c.Profiles, p)
}

// lastSpecNetwork is the network policy of the newest instance the driver was asked for.
func lastSpecNetwork(t *testing.T, d *fake.Driver) bay.NetworkPolicy {
	t.Helper()
	var got *bay.InstanceSpec
	for _, c := range d.Calls() {
		if c.Method == fake.MethodCreateInstance && c.Spec != nil {
			got = c.Spec
		}
	}
	if got == nil {
		t.Fatal("no instance created")
	}
	return got.Network
}

func TestCreateTightensTheProfilesNetwork(t *testing.T) {
	e := newEnv(t, withListed)
	ctx := context.Background()
	for _, tc := range []struct {
		profile string
		req     bay.NetworkPolicy
		field   string
	}{
		{"listed", bay.NetworkPolicy{Mode: bay.NetworkOpen}, "network.mode"},
		{"listed", bay.NetworkPolicy{Mode: bay.NetworkAllowlist, Allow: []string{"example.com"}}, "network.allow[0]"},
		{"python-default", bay.NetworkPolicy{Mode: "wide"}, "network.mode"},
	} {
		_, err := e.Svc.CreateSandbox(ctx, "alice", sandbox.CreateParams{ProfileID: tc.profile, Network: &tc.req}, nil)
		if code(err) != bay.CodeValidation || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s %+v: %v, want a validation error naming %s", tc.profile, tc.req, err, tc.field)
		}
	}
	r := e.Create(t, "alice", sandbox.CreateParams{ProfileID: "listed",
		Network: &bay.NetworkPolicy{Mode: bay.NetworkAllowlist, Allow: []string{"api.example.com:443"}}})
	if r.Network.Mode != bay.NetworkAllowlist || strings.Join(r.Network.Allow, ",") != "api.example.com:443" ||
		strings.Join(r.Network.Deny, ",") != "secret.example.com" {
		t.Fatalf("created with %+v", r.Network)
	}
	// Stored, shown in the detail, and handed to the driver at the first start.
	got, err := e.Svc.GetSandbox(ctx, "alice", r.ID)
	if err != nil || got.Network.Mode != bay.NetworkAllowlist || got.Network.Allow[0] != "api.example.com:443" {
		t.Fatalf("detail: %+v %v", got, err)
	}
	if _, err := e.Caps.ExecShell(ctx, "alice", r.ID, capability.ShellParams{Command: "true", Timeout: 5}); err != nil {
		t.Fatal(err)
	}
	if n := lastSpecNetwork(t, e.Drv); n.Mode != bay.NetworkAllowlist || n.Allow[0] != "api.example.com:443" || n.Deny[0] != "secret.example.com" {
		t.Errorf("instance network %+v", n)
	}
	// Without a policy of its own a sandbox shows and runs its profile's.
	plain := e.Create(t, "alice", sandbox.CreateParams{})
	if plain.Network.EffectiveMode() != bay.NetworkOpen || len(plain.Network.Allow) != 0 {
		t.Errorf("default policy %+v", plain.Network)
	}
}

func TestSetNetwork(t *testing.T) {
	e := newEnv(t, withListed)
	ctx := context.Background()
	r := e.Create(t, "alice", sandbox.CreateParams{ProfileID: "listed"})
	if _, err := e.Svc.SetNetwork(ctx, "bob", r.ID, bay.NetworkPolicy{Mode: bay.NetworkNone}); code(err) != bay.CodeNotFound {
		t.Errorf("another owner: %v", err)
	}
	if _, err := e.Svc.SetNetwork(ctx, "alice", r.ID, bay.NetworkPolicy{Mode: bay.NetworkOpen}); code(err) != bay.CodeValidation || !strings.Contains(err.Error(), "network.mode") {
		t.Errorf("escalation: %v", err)
	}
	if _, err := e.Caps.ExecShell(ctx, "alice", r.ID, capability.ShellParams{Command: "true", Timeout: 5}); err != nil {
		t.Fatal(err)
	}
	first := e.Drv.Instances()
	// A change of mode on a driver that cannot apply it in place destroys the compute; the
	// next call starts it under the new policy.
	got, err := e.Svc.SetNetwork(ctx, "alice", r.ID, bay.NetworkPolicy{Mode: bay.NetworkNone})
	if err != nil || got.Network.Mode != bay.NetworkNone || got.Status != "idle" {
		t.Fatalf("PATCH to none: %+v %v", got, err)
	}
	if left := e.Drv.Instances(); len(first) != 1 || len(left) != 0 {
		t.Fatalf("instances before %v, after %v", first, left)
	}
	if _, err := e.Caps.ExecShell(ctx, "alice", r.ID, capability.ShellParams{Command: "true", Timeout: 5}); err != nil {
		t.Fatal(err)
	}
	if n := lastSpecNetwork(t, e.Drv); n.Mode != bay.NetworkNone {
		t.Errorf("restarted with %+v", n)
	}
	// Back up to the ceiling is allowed (it is the profile's, not the current policy, that bounds).
	got, err = e.Svc.SetNetwork(ctx, "alice", r.ID, bay.NetworkPolicy{Mode: bay.NetworkAllowlist})
	if err != nil || got.Network.Mode != bay.NetworkAllowlist || got.Network.Allow[0] != "*.example.com" {
		t.Fatalf("PATCH back to the ceiling: %+v %v", got, err)
	}
	// The fake driver records no refusals: the events are an empty list, not an error.
	ev, denied, err := e.Svc.NetworkEvents(ctx, "alice", r.ID)
	if err != nil || len(ev) != 0 || denied != 0 {
		t.Errorf("events %+v %d %v", ev, denied, err)
	}
	if _, _, err := e.Svc.NetworkEvents(ctx, "bob", r.ID); code(err) != bay.CodeNotFound {
		t.Errorf("another owner's events: %v", err)
	}
}
