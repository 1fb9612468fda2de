// Package deploytest holds what the tests of deploy/ share: bay's own image, built from this
// checkout the way `make image-bay` builds it, the repository's root, and the smoke test a
// deployed bay must pass.
package deploytest

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/shipyard-dev/shipyard/internal/imagebuild"
	"github.com/shipyard-dev/shipyard/sdk"
)

// Tag is the friendly tag the tests point at their bay image, so that they never move the
// developer's bay:latest.
const Tag = "bay:test"

// RepoRoot is the module's root directory.
func RepoRoot(t testing.TB) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	root, err := imagebuild.ModuleRoot(filepath.Dir(file))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// BayImage builds a static bay from this checkout and makes sure the bay flavour's image of it
// exists on the Docker engine (content-tagged: only the last, sub-second step runs when the
// root filesystem was built before). It returns the content tag. A missing engine or
// mmdebstrap fails the test.
func BayImage(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Minute)
	defer cancel()
	bin := filepath.Join(t.TempDir(), "bay")
	if err := imagebuild.BuildDaemon(ctx, RepoRoot(t), "bay", bin); err != nil {
		t.Fatal(err)
	}
	res, err := imagebuild.EnsureImage(ctx, imagebuild.Options{Flavour: imagebuild.FlavourBay, Tag: Tag,
		ShipBinary: bin, Progress: os.Stderr, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("bay image: %v", err)
	}
	return res.ContentTag
}

// Smoke is the deployment smoke test through a bay at c: create a sandbox, run Python and a
// shell command (as uid 1000), write and read back a file, delete it. It returns how long the
// create plus the first exec (the runtime's cold start) took and how long the rest did.
func Smoke(t testing.TB, c *sdk.Client) (coldStart, rest time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	t0 := time.Now()
	sb, err := c.CreateSandbox(ctx, sdk.CreateSandboxRequest{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	defer sb.Delete(context.WithoutCancel(ctx))
	py, err := sb.Python(ctx, "x = 6\nprint(x * 7)")
	if err != nil || !py.Success || strings.TrimSpace(py.Output) != "42" {
		t.Fatalf("python: %+v %v", py, err)
	}
	coldStart = time.Since(t0)
	t1 := time.Now()
	sh, err := sb.Shell(ctx, "id -u")
	if err != nil || !sh.Success || strings.TrimSpace(sh.Output) != "1000" {
		t.Fatalf("shell id -u: %+v %v", sh, err)
	}
	if err := sb.WriteFile(ctx, "note.txt", "smoke"); err != nil {
		t.Fatalf("write: %v", err)
	}
	if got, err := sb.ReadFile(ctx, "note.txt"); err != nil || got != "smoke" {
		t.Fatalf("read back %q, %v", got, err)
	}
	if err := sb.Delete(ctx); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if _, err := c.GetSandbox(ctx, sb.ID); !sdk.IsNotFound(err) {
		t.Fatalf("get after delete: want not_found, got %v", err)
	}
	return coldStart, time.Since(t1)
}
