// Package deploytest holds what the tests of deploy/ share: bay's own image, built from this
// checkout the way `make image-bay` builds it, and the repository's root.
package deploytest

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/shipyard-dev/shipyard/internal/imagebuild"
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
