package fake

import (
	"context"
	"fmt"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

var _ bay.UsageReporter = (*Driver)(nil)

// SetUsage scripts what InstanceUsage reports for the named instance's use (CPU, memory,
// pids, volume); the limits always come from the containers' specs.
func (d *Driver) SetUsage(instance string, u bay.InstanceUsage) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.usage == nil {
		d.usage = map[string]bay.InstanceUsage{}
	}
	d.usage[instance] = u
}

// InstanceUsage reports, for every running container of the instance, its limits and the use
// scripted with SetUsage (zero, and an unmeasured volume, by default).
func (d *Driver) InstanceUsage(ctx context.Context, name string) (bay.InstanceUsage, error) {
	call := Call{Method: MethodInstanceUsage, Target: name}
	late, err := d.begin(ctx, call)
	if err != nil {
		return bay.InstanceUsage{}, err
	}
	inst, ok := d.instances[name]
	if !ok || len(inst.containers) == 0 {
		return bay.InstanceUsage{}, d.end(call, nil, fmt.Errorf("usage of instance %s: %w", name, bay.ErrNotFound))
	}
	scripted, ok := d.usage[name]
	out := bay.InstanceUsage{VolumeUsedBytes: -1}
	if ok {
		out.VolumeUsedBytes = scripted.VolumeUsedBytes
	}
	for _, id := range inst.containers {
		c := d.containers[id]
		if c == nil || c.State != bay.ContainerRunning {
			continue
		}
		u := bay.ContainerUsage{Name: c.Spec.Name, NanoCPUs: c.Spec.Limits.NanoCPUs,
			MemoryLimitBytes: c.Spec.Limits.MemoryBytes, PidsLimit: c.PidsLimit}
		for _, s := range scripted.Containers {
			if s.Name == u.Name {
				u.CPUSeconds, u.MemoryBytes, u.Pids = s.CPUSeconds, s.MemoryBytes, s.Pids
			}
		}
		out.Containers = append(out.Containers, u)
	}
	if err := d.end(call, late, nil); err != nil {
		return bay.InstanceUsage{}, err
	}
	return out, nil
}
