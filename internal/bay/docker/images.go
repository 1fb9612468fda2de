package docker

import (
	"context"
	"fmt"

	cerrdefs "github.com/containerd/errdefs"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

var _ bay.ImageChecker = (*Driver)(nil)

// ImageExists inspects ref on the engine (never pulls).
func (d *Driver) ImageExists(ctx context.Context, ref string) (bool, error) {
	if _, err := d.cli.ImageInspect(ctx, ref); err != nil {
		if cerrdefs.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("inspect image %s: %w", ref, classify(err))
	}
	return true, nil
}
