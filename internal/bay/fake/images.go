package fake

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

var _ bay.ImageChecker = (*Driver)(nil)

// ImageExists reports whether image is present (every image is, without WithImages). While
// SetDown(true) is in effect it fails like Ping.
func (d *Driver) ImageExists(ctx context.Context, image string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.pingDown {
		return false, fmt.Errorf("inspect image %s: %w", image, &bay.Error{Code: bay.CodeUnavailable, Message: "container engine unreachable"})
	}
	return d.images == nil || d.images[image], nil
}

var _ bay.RuntimeChecker = (*Driver)(nil)

// CheckRuntime implements bay.RuntimeChecker (every runtime exists without WithRuntimes).
// While SetDown(true) is in effect it fails like Ping.
func (d *Driver) CheckRuntime(ctx context.Context, rt string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.pingDown {
		return fmt.Errorf("check runtime %s: %w", rt, &bay.Error{Code: bay.CodeUnavailable, Message: "container engine unreachable"})
	}
	if !d.hasRuntime(rt) {
		return d.runtimeMissing(rt)
	}
	return nil
}

// hasRuntime reports whether rt exists (d.runtimes is fixed by New: no lock needed).
func (d *Driver) hasRuntime(rt string) bool {
	return rt == bay.ContainerRuntimeDefault || d.runtimes == nil || d.runtimes[rt]
}

// runtimeMissing is the error of a runtime the fake engine lacks.
func (d *Driver) runtimeMissing(rt string) error {
	return bay.RuntimeMissing(rt, slices.Sorted(maps.Keys(d.runtimes)), "the fake engine was made without it (fake.WithRuntimes)")
}
