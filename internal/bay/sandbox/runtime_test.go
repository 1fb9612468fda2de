package sandbox_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/shipyard-dev/shipyard/api/bayapi"
	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/fake"
	"github.com/shipyard-dev/shipyard/internal/bay/sandbox"
	"github.com/shipyard-dev/shipyard/internal/bay/sandbox/sandboxtest"
	"github.com/shipyard-dev/shipyard/internal/bay/sqlite"
)

// A profile asking for a container runtime the engine lacks is refused at create (400
// runtime_missing with what the engine has), not at its first start; nothing is stored. Where
// the engine has it, the instance asks for it.
func TestCreateRefusesAMissingRuntime(t *testing.T) {
	ctx := context.Background()
	profiles := sandboxtest.Profiles()
	profiles[0].Runtime = bay.ContainerRuntimeRunsc
	for _, tc := range []struct {
		name     string
		runtimes []string
	}{{"engine without runsc", []string{"runc"}}, {"engine with runsc", nil}} {
		t.Run(tc.name, func(t *testing.T) {
			st, err := sqlite.Open(ctx, sqlite.Options{Path: filepath.Join(t.TempDir(), "bay.db")})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			opts := []fake.Option{}
			if tc.runtimes != nil {
				opts = append(opts, fake.WithRuntimes(tc.runtimes...))
			}
			drv := fake.New(opts...)
			svc := sandbox.New(st, drv, nil, nil, nil, sandbox.Config{Profiles: profiles, InstanceID: "test",
				ReadinessTimeout: 100 * time.Millisecond})
			sb, err := svc.CreateSandbox(ctx, "alice", sandbox.CreateParams{ProfileID: profiles[0].ID}, nil)
			if tc.runtimes == nil {
				if err != nil {
					t.Fatal(err)
				}
				// Nothing answers at the fake's endpoint: the start fails its readiness, and
				// what it asked the driver for is what counts.
				_, _ = svc.EnsureRunning(ctx, sb.ID)
				i := slices.IndexFunc(drv.Calls(), func(c fake.Call) bool { return c.Method == fake.MethodCreateInstance })
				if i < 0 || drv.Calls()[i].Spec.Runtime != bay.ContainerRuntimeRunsc {
					t.Fatalf("the instance does not ask for runsc: %+v", drv.Calls())
				}
				return
			}
			var e *bay.Error
			if !errors.As(err, &e) || e.Code != bay.CodeValidation || e.Details["reason"] != bay.ReasonRuntimeMissing ||
				e.Details["profile"] != profiles[0].ID || e.Details["runtime"] != "runsc" ||
				!slices.Equal(e.Details["available"].([]string), []string{"runc"}) || e.Details["hint"] == "" {
				t.Fatalf("create: %v (%+v)", err, e)
			}
			if bayapi.StatusOf(e.Code) != 400 {
				t.Errorf("status %d", bayapi.StatusOf(e.Code))
			}
			list, err := svc.ListSandboxes(ctx, "alice", sandbox.ListParams{})
			if err != nil || len(list.Items) != 0 {
				t.Errorf("a refused create left %+v (%v)", list, err)
			}
			// Profiles without a runtime are unaffected.
			if _, err := svc.CreateSandbox(ctx, "alice", sandbox.CreateParams{ProfileID: profiles[1].ID}, nil); err != nil {
				t.Errorf("create of a profile without a runtime: %v", err)
			}
		})
	}
}
