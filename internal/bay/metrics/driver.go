package metrics

import (
	"context"
	"io"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

// Driver returns d with every call timed in bay_driver_call_duration_seconds. The result
// implements bay.UsageReporter exactly when d does. WatchDeaths and WaitInstance, which run
// for as long as what they watch, are passed through untimed.
func (m *Metrics) Driver(d bay.Driver) bay.Driver {
	td := &timedDriver{m: m, d: d}
	if ur, ok := d.(bay.UsageReporter); ok {
		return &timedUsageDriver{timedDriver: td, ur: ur}
	}
	return td
}

var (
	_ bay.Driver        = (*timedDriver)(nil)
	_ bay.UsageReporter = (*timedUsageDriver)(nil)
)

type timedDriver struct {
	m *Metrics
	d bay.Driver
}

func (t *timedDriver) observe(method string, began time.Time, err error) {
	t.m.driverDuration.WithLabelValues(method, callOutcome(err)).Observe(since(began))
}

func (t *timedDriver) Ping(ctx context.Context) (err error) {
	defer func(b time.Time) { t.observe("Ping", b, err) }(time.Now())
	return t.d.Ping(ctx)
}

func (t *timedDriver) CreateVolume(ctx context.Context, spec bay.VolumeSpec) (ref string, err error) {
	defer func(b time.Time) { t.observe("CreateVolume", b, err) }(time.Now())
	return t.d.CreateVolume(ctx, spec)
}

// WaitInstance lasts as long as a one-shot runs: it is passed through untimed, like
// WatchDeaths.
func (t *timedDriver) WaitInstance(ctx context.Context, name string, stdout, stderr io.Writer) (bay.Exit, error) {
	return t.d.WaitInstance(ctx, name, stdout, stderr)
}

func (t *timedDriver) DeleteVolume(ctx context.Context, ref string) (err error) {
	defer func(b time.Time) { t.observe("DeleteVolume", b, err) }(time.Now())
	return t.d.DeleteVolume(ctx, ref)
}

func (t *timedDriver) InspectVolume(ctx context.Context, ref string) (v bay.VolumeInfo, err error) {
	defer func(b time.Time) { t.observe("InspectVolume", b, err) }(time.Now())
	return t.d.InspectVolume(ctx, ref)
}

func (t *timedDriver) ListVolumes(ctx context.Context, labels map[string]string) (v []bay.VolumeInfo, err error) {
	defer func(b time.Time) { t.observe("ListVolumes", b, err) }(time.Now())
	return t.d.ListVolumes(ctx, labels)
}

func (t *timedDriver) CreateInstance(ctx context.Context, spec bay.InstanceSpec) (i bay.Instance, err error) {
	defer func(b time.Time) { t.observe("CreateInstance", b, err) }(time.Now())
	return t.d.CreateInstance(ctx, spec)
}

func (t *timedDriver) InspectInstance(ctx context.Context, name string) (i bay.Instance, err error) {
	defer func(b time.Time) { t.observe("InspectInstance", b, err) }(time.Now())
	return t.d.InspectInstance(ctx, name)
}

func (t *timedDriver) DestroyInstance(ctx context.Context, name string) (err error) {
	defer func(b time.Time) { t.observe("DestroyInstance", b, err) }(time.Now())
	return t.d.DestroyInstance(ctx, name)
}

func (t *timedDriver) ListInstances(ctx context.Context, labels map[string]string) (i []bay.Instance, err error) {
	defer func(b time.Time) { t.observe("ListInstances", b, err) }(time.Now())
	return t.d.ListInstances(ctx, labels)
}

// Unwrap returns the decorated driver (bay.DriverPort finds optional ports through it).
func (t *timedDriver) Unwrap() bay.Driver { return t.d }

func (t *timedDriver) WatchDeaths(ctx context.Context, labels map[string]string, died func(string)) error {
	return t.d.WatchDeaths(ctx, labels, died)
}

type timedUsageDriver struct {
	*timedDriver
	ur bay.UsageReporter
}

func (t *timedUsageDriver) InstanceUsage(ctx context.Context, name string) (u bay.InstanceUsage, err error) {
	defer func(b time.Time) { t.observe("InstanceUsage", b, err) }(time.Now())
	return t.ur.InstanceUsage(ctx, name)
}
