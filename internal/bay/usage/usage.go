// Package usage answers GET /v1/sandboxes/{id}/metrics: a sandbox's resource use now (CPU,
// memory, pids of its running containers, its cargo's disk use against the cargo's limit), read
// from the driver's optional bay.UsageReporter port. It only reads: it never starts compute
// and never refreshes the idle deadline (looking at a sandbox is not using it).
package usage

import (
	"context"
	"time"

	"github.com/shipyard-dev/shipyard/api/bayapi"
	"github.com/shipyard-dev/shipyard/internal/bay"
)

// Reporter reads sandboxes from the store and their use from the driver.
type Reporter struct {
	store bay.Reader
	drv   bay.UsageReporter
	now   func() time.Time
}

// New returns a Reporter, or nil when drv cannot report usage.
func New(store bay.Reader, drv bay.Driver) *Reporter {
	ur, ok := bay.DriverPort[bay.UsageReporter](drv)
	if !ok {
		return nil
	}
	return &Reporter{store: store, drv: ur, now: func() time.Time { return time.Now().UTC() }}
}

// SandboxMetrics returns owner's sandbox id's use. Another owner's, a deleted or a warm-pool
// sandbox is not_found; a store or driver failure is internal.
func (r *Reporter) SandboxMetrics(ctx context.Context, owner, id string) (bayapi.SandboxMetrics, error) {
	sb, err := r.store.GetSandbox(ctx, id)
	if err != nil {
		if bay.IsNotFound(err) {
			return bayapi.SandboxMetrics{}, notFound(id)
		}
		return bayapi.SandboxMetrics{}, bay.Errorf(bay.CodeInternal, "Failed to load sandbox").WithCause(err)
	}
	if sb.Owner != owner || sb.DeletedAt != nil || sb.IsWarm {
		return bayapi.SandboxMetrics{}, notFound(id)
	}
	out := bayapi.SandboxMetrics{SandboxID: sb.ID, Containers: []bayapi.ContainerMetrics{}}
	if c, err := r.store.GetCargo(ctx, sb.CargoID); err == nil {
		out.Disk.LimitBytes = int64(c.SizeLimitMB) << 20
	} else if !bay.IsNotFound(err) {
		return bayapi.SandboxMetrics{}, bay.Errorf(bay.CodeInternal, "Failed to load cargo").WithCause(err)
	}
	var sess *bay.Session
	if sb.CurrentSessionID != "" {
		sess, err = r.store.GetSession(ctx, sb.CurrentSessionID)
		if err != nil && !bay.IsNotFound(err) {
			return bayapi.SandboxMetrics{}, bay.Errorf(bay.CodeInternal, "Failed to load session").WithCause(err)
		}
	}
	out.Status = bay.ComputeStatus(sb, sess, r.now())
	if sess == nil || sess.ObservedState != bay.SessionRunning {
		return out, nil
	}
	u, err := r.drv.InstanceUsage(ctx, bay.InstanceName(sess.ID))
	if bay.IsNotFound(err) {
		// The compute went away since the session was last observed: nothing runs.
		return out, nil
	}
	if err != nil {
		return bayapi.SandboxMetrics{}, bay.Errorf(bay.CodeInternal, "Failed to read the sandbox's resource use").WithCause(err)
	}
	for _, c := range u.Containers {
		out.Containers = append(out.Containers, wire(c))
	}
	if u.VolumeUsedBytes >= 0 {
		n := u.VolumeUsedBytes
		out.Disk.UsedBytes = &n
	}
	return out, nil
}

func notFound(id string) *bay.Error { return bay.Errorf(bay.CodeNotFound, "Sandbox not found: %s", id) }

func wire(c bay.ContainerUsage) bayapi.ContainerMetrics {
	m := bayapi.ContainerMetrics{Name: c.Name, CPUSeconds: c.CPUSeconds, MemoryBytes: c.MemoryBytes, Pids: c.Pids}
	if c.NanoCPUs > 0 {
		v := float64(c.NanoCPUs) / 1e9
		m.CPULimitCores = &v
	}
	if c.MemoryLimitBytes > 0 {
		v := c.MemoryLimitBytes
		m.MemoryLimitBytes = &v
	}
	if c.PidsLimit > 0 {
		v := c.PidsLimit
		m.PidsLimit = &v
	}
	return m
}
