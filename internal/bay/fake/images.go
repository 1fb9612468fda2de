package fake

import (
	"context"
	"fmt"

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
