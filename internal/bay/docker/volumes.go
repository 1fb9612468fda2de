package docker

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/volume"
	"github.com/moby/moby/client"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

// CreateVolume creates a named local volume with labels; its ref is its name. When the volume
// exists already the engine returns it unchanged (its labels are not updated): an idempotent
// retry succeeds. A size is enforced with a loop-mounted file (quota.go) when the driver can;
// otherwise the volume is unbounded (CargoQuotaAuto) or the create fails (CargoQuotaLoop).
func (d *Driver) CreateVolume(ctx context.Context, spec bay.VolumeSpec) (string, error) {
	name := spec.Name
	if name == "" || strings.ContainsAny(name, "/\\") || name == "." || name == ".." {
		return "", fmt.Errorf("create volume: invalid name %q", name)
	}
	if spec.SizeBytes < 0 {
		return "", fmt.Errorf("create volume %s: negative size", name)
	}
	opts := client.VolumeCreateOptions{Name: name, Driver: "local", Labels: spec.Labels}
	bounded := false
	if spec.SizeBytes > 0 {
		ok, why := d.quotaUsable()
		if !ok && d.cfg.CargoQuota == CargoQuotaLoop {
			return "", fmt.Errorf("create volume %s: cannot bound its size: %s", name, why)
		}
		bounded = ok
	}
	if bounded {
		if v, err := d.cli.VolumeInspect(ctx, name, client.VolumeInspectOptions{}); err == nil {
			return v.Volume.Name, d.ensureLoopCargo(ctx, name) // an idempotent retry
		}
		dir, err := d.makeLoopCargo(ctx, name, spec.SizeBytes)
		if err != nil {
			d.undoLoopCargo(ctx, name)
			return "", fmt.Errorf("create volume %s: %w", name, err)
		}
		opts.Labels = maps.Clone(spec.Labels)
		if opts.Labels == nil {
			opts.Labels = map[string]string{}
		}
		opts.Labels[labelCargoQuota] = strconv.FormatInt(spec.SizeBytes, 10)
		opts.DriverOpts = map[string]string{"type": "none", "o": "bind", "device": dir}
	}
	res, err := d.cli.VolumeCreate(ctx, opts)
	if err != nil {
		if bounded {
			d.undoLoopCargo(ctx, name)
		}
		return "", fmt.Errorf("create volume %s: %w", name, classify(err))
	}
	d.log.DebugContext(ctx, "volume created", "volume", res.Volume.Name, "size_bytes", spec.SizeBytes, "bounded", bounded)
	return res.Volume.Name, nil
}

// undoLoopCargo removes what a failed bounded create made, on a context of its own (the
// request's identity kept for the log).
func (d *Driver) undoLoopCargo(ctx context.Context, name string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), RemoveTimeout)
	defer cancel()
	if err := d.dropLoopCargo(ctx, name); err != nil {
		d.log.ErrorContext(ctx, "undo a failed cargo volume", "volume", name, "err", err)
	}
}

// DeleteVolume removes a volume. A missing volume is success; a volume referenced by any
// container (running or not) wraps bay.ErrConflict.
func (d *Driver) DeleteVolume(ctx context.Context, ref string) error {
	_, err := d.cli.VolumeRemove(ctx, ref, client.VolumeRemoveOptions{})
	switch {
	case err == nil, cerrdefs.IsNotFound(err):
		if err := d.dropLoopCargo(ctx, ref); err != nil {
			return fmt.Errorf("delete volume %s: %w", ref, err)
		}
		d.log.DebugContext(ctx, "volume deleted", "volume", ref)
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
	info := volumeInfo(res.Volume)
	if size, used, ok := d.loopUsage(ref); ok {
		info.SizeBytes, info.UsedBytes = size, used
	}
	return info, nil
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
	info := bay.VolumeInfo{Name: v.Name, Labels: v.Labels, UsedBytes: -1}
	if n, err := strconv.ParseInt(v.Labels[labelCargoQuota], 10, 64); err == nil {
		info.SizeBytes = n
		info.Labels = maps.Clone(v.Labels)
		delete(info.Labels, labelCargoQuota)
	}
	if t, err := time.Parse(time.RFC3339Nano, v.CreatedAt); err == nil {
		info.CreatedAt = t
	}
	return info
}
