package docker

import (
	"context"
	"fmt"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/volume"
	"github.com/moby/moby/client"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

// CreateVolume creates a named local volume with labels; its ref is its name. When the volume
// exists already the engine returns it unchanged (its labels are not updated): an idempotent
// retry succeeds.
func (d *Driver) CreateVolume(ctx context.Context, name string, labels map[string]string) (string, error) {
	if name == "" {
		return "", fmt.Errorf("create volume: empty name")
	}
	res, err := d.cli.VolumeCreate(ctx, client.VolumeCreateOptions{Name: name, Driver: "local", Labels: labels})
	if err != nil {
		return "", fmt.Errorf("create volume %s: %w", name, classify(err))
	}
	d.log.DebugContext(ctx, "volume created", "volume", res.Volume.Name)
	return res.Volume.Name, nil
}

// DeleteVolume removes a volume. A missing volume is success; a volume referenced by any
// container (running or not) wraps bay.ErrConflict.
func (d *Driver) DeleteVolume(ctx context.Context, ref string) error {
	_, err := d.cli.VolumeRemove(ctx, ref, client.VolumeRemoveOptions{})
	switch {
	case err == nil:
		d.log.DebugContext(ctx, "volume deleted", "volume", ref)
		return nil
	case cerrdefs.IsNotFound(err):
		return nil
	case cerrdefs.IsConflict(err):
		return fmt.Errorf("delete volume %s: in use: %w", ref, classify(err))
	}
	return fmt.Errorf("delete volume %s: %w", ref, classify(err))
}

// InspectVolume returns the volume or an error wrapping bay.ErrNotFound.
func (d *Driver) InspectVolume(ctx context.Context, ref string) (bay.VolumeInfo, error) {
	res, err := d.cli.VolumeInspect(ctx, ref, client.VolumeInspectOptions{})
	if err != nil {
		return bay.VolumeInfo{}, fmt.Errorf("inspect volume %s: %w", ref, classify(err))
	}
	return volumeInfo(res.Volume), nil
}

// ListVolumes lists the volumes carrying all the given labels.
func (d *Driver) ListVolumes(ctx context.Context, labels map[string]string) ([]bay.VolumeInfo, error) {
	res, err := d.cli.VolumeList(ctx, client.VolumeListOptions{Filters: labelFilters(labels)})
	if err != nil {
		return nil, fmt.Errorf("list volumes %v: %w", labels, classify(err))
	}
	out := make([]bay.VolumeInfo, 0, len(res.Items))
	for _, v := range res.Items {
		out = append(out, volumeInfo(v))
	}
	return out, nil
}

func volumeInfo(v volume.Volume) bay.VolumeInfo {
	info := bay.VolumeInfo{Name: v.Name, Labels: v.Labels}
	if t, err := time.Parse(time.RFC3339Nano, v.CreatedAt); err == nil {
		info.CreatedAt = t
	}
	return info
}
