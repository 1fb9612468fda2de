// Package fake is a scriptable, in-memory bay.Driver for unit tests of the services that sit on
// top of the container engine (sandbox lifecycle, GC, warm pool).
//
// It behaves like the Docker driver on every point the conformance suite
// (internal/bay/drivertest) checks: name conflicts wrap bay.ErrConflict, missing objects wrap
// bay.ErrNotFound, removals of missing objects succeed, volumes in use cannot be deleted, and a
// missing image gives the same "not found locally" error. On top of that a test can script the
// engine:
//
//   - Fail, FailAfter, FailLate and FailWhen inject errors per method (once, N times, always,
//     after N successful calls, after the effect took place, or decided by a function);
//   - SetLatency delays a method (honouring ctx; inside a testing/synctest bubble the delay costs
//     no wall time);
//   - SetLateStart holds or fails the background start of a LateStart spec's late containers;
//   - Kill, Vanish and SetState make containers die or disappear behind the driver's back;
//   - Calls, CallCount, Containers, Instances and Volumes show what happened.
//
// The endpoint a started container reports is configurable with WithEndpointFunc, so that tests
// can point it at an httptest server standing in for ship.
//
// A Driver is safe for concurrent use. One mutex guards all state; latency is served outside it.
package fake

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

// Method names accepted by Fail, FailAfter, FailLate, FailWhen, SetLatency and CallCount. They
// are the names of the bay.Driver methods.
const (
	MethodPing            = "Ping"
	MethodCreateVolume    = "CreateVolume"
	MethodDeleteVolume    = "DeleteVolume"
	MethodInspectVolume   = "InspectVolume"
	MethodListVolumes     = "ListVolumes"
	MethodCreateInstance  = "CreateInstance"
	MethodInspectInstance = "InspectInstance"
	MethodDestroyInstance = "DestroyInstance"
	MethodListInstances   = "ListInstances"
	MethodWatchDeaths     = "WatchDeaths"
	MethodWaitInstance    = "WaitInstance"
	MethodInstanceUsage   = "InstanceUsage"
)

var methods = []string{
	MethodPing, MethodCreateVolume, MethodDeleteVolume, MethodInspectVolume, MethodListVolumes,
	MethodCreateInstance, MethodInspectInstance, MethodDestroyInstance, MethodListInstances,
	MethodWatchDeaths, MethodWaitInstance, MethodInstanceUsage,
}

// Always makes an injected failure permanent (pass it as times).
const Always = -1

// DefaultPidsLimit is the pids limit the fake reports when the spec leaves it 0, like the Docker
// driver's default.
const DefaultPidsLimit = 256

// DefaultTmpBytes is the size of /tmp the fake reports when the spec leaves it 0, like the
// Docker driver's default.
const DefaultTmpBytes = 256 << 20

// Call is one recorded Driver call.
type Call struct {
	Method string
	// Target is the instance name, volume ref or volume name the call was about; "" for Ping
	// and the List methods.
	Target string
	Spec   *bay.InstanceSpec // CreateInstance only (a copy)
	Labels map[string]string // CreateVolume, CreateInstance and the List methods
	Err    error             // what the call returned
}

// Container is the fake engine's view of one container of an instance.
type Container struct {
	ID        string
	Instance  string
	Spec      bay.ContainerSpec
	Labels    map[string]string // the instance's labels
	VolumeRef string
	MountPath string
	State     bay.ContainerState
	ExitCode  int
	CreatedAt time.Time
	Endpoint  string // set while running
	// Ran is what a one-shot's run (WithOneShot) produced, once WaitInstance has run it.
	Ran *OneShotResult

	// The effective hardening, as the Docker driver applies it regardless of the spec.
	User        string   // spec's, or "1000:1000"
	CapDrop     []string // ["ALL"]
	CapAdd      []string // the spec's
	SecurityOpt []string // ["no-new-privileges:true"]
	Privileged  bool     // always false
	PidsLimit   int64    // spec's, or DefaultPidsLimit
	MemorySwap  int64    // = the memory limit (swap cannot bypass it)
	// ReadonlyRootfs is always true; TmpBytes bounds /tmp and /var/tmp (spec's, or
	// DefaultTmpBytes).
	ReadonlyRootfs bool
	TmpBytes       int64
}

func (c *Container) info() bay.InstanceContainer {
	ic := bay.InstanceContainer{Name: c.Spec.Name, RuntimeType: c.Spec.RuntimeType, ID: c.ID, State: c.State}
	if c.State == bay.ContainerRunning {
		ic.Endpoint = c.Endpoint
	}
	return ic
}

func (c *Container) clone() Container {
	cp := *c
	cp.Spec = cloneContainerSpec(c.Spec)
	cp.Labels = maps.Clone(c.Labels)
	cp.CapDrop = slices.Clone(c.CapDrop)
	cp.CapAdd = slices.Clone(c.CapAdd)
	cp.SecurityOpt = slices.Clone(c.SecurityOpt)
	return cp
}

// instance is the fake engine's view of one instance: its containers by id, in spec order.
type instance struct {
	name       string
	labels     map[string]string
	createdAt  time.Time
	containers []string
	// lateCancel ends the late start under way (nil: none); lateDone is closed when it ended.
	lateCancel context.CancelFunc
	lateDone   <-chan struct{}
}

// Option configures a Driver.
type Option func(*Driver)

// WithEndpointFunc sets the endpoint a started container reports. The default is
// "http://<instance>-<container>:<port>".
func WithEndpointFunc(fn func(instance string, c bay.ContainerSpec) string) Option {
	return func(d *Driver) { d.endpoint = fn }
}

// WithImages restricts the images present in the fake engine to the given ones; creating a
// container from any other image fails like the Docker driver does. Without this option every
// image is present.
func WithImages(images ...string) Option {
	return func(d *Driver) {
		d.images = make(map[string]bool, len(images))
		for _, img := range images {
			d.images[img] = true
		}
	}
}

// WithRuntimes restricts the container runtimes of the fake engine to the given ones (besides
// the default, which always exists): CheckRuntime and CreateInstance refuse any other with
// bay.RuntimeMissing, as the Docker driver does. Without this option every runtime exists.
func WithRuntimes(runtimes ...string) Option {
	return func(d *Driver) {
		d.runtimes = make(map[string]bool, len(runtimes))
		for _, rt := range runtimes {
			d.runtimes[rt] = true
		}
	}
}

// OneShotResult is what a one-shot container "ran": its output and how it ended.
type OneShotResult struct {
	Stdout, Stderr string
	Exit           bay.Exit
}

// WithOneShot sets what a one-shot container (bay.ContainerSpec.Command) does when
// WaitInstance first waits for it: run is called once, outside the driver's lock, and may
// block until ctx ends (it then returns what it wrote so far and ctx's error: the container
// counts as killed). The default exits 0 with no output.
func WithOneShot(run func(ctx context.Context, c bay.ContainerSpec) (OneShotResult, error)) Option {
	return func(d *Driver) { d.oneShot = run }
}

// WithClock sets the clock used for CreatedAt (default time.Now).
func WithClock(now func() time.Time) Option {
	return func(d *Driver) { d.now = now }
}

// watcher is one WatchDeaths call in progress.
type watcher struct {
	labels map[string]string
	died   func(string)
}

// rule is one scripted failure of one method.
type rule struct {
	after  int   // calls to let through first
	times  int   // failures to inject; Always = forever
	late   bool  // apply the operation, then return err
	err    error // the error to inject
	fn     func(Call) error
	seen   int // calls seen by this rule
	fired  int // failures injected so far
	method string
}

// Driver is the fake. The zero value is not usable; call New.
type Driver struct {
	endpoint func(instance string, c bay.ContainerSpec) string
	now      func() time.Time
	oneShot  func(ctx context.Context, c bay.ContainerSpec) (OneShotResult, error)

	mu         sync.Mutex
	images     map[string]bool // nil = every image exists
	runtimes   map[string]bool // nil = every container runtime exists
	containers map[string]*Container
	instances  map[string]*instance
	volumes    map[string]*bay.VolumeInfo
	rules      map[string][]*rule
	latency    map[string]time.Duration
	calls      []Call
	pingDown   bool
	watchers   map[int]watcher
	nextWatch  int
	usage      map[string]bay.InstanceUsage // by instance, see SetUsage
	lateStart  func(ctx context.Context, instance string, c bay.ContainerSpec) error
}

var _ bay.Driver = (*Driver)(nil)

// New returns an empty fake engine (no instances or volumes; every image present
// unless WithImages is given).
func New(opts ...Option) *Driver {
	d := &Driver{
		now:        time.Now,
		containers: map[string]*Container{},
		instances:  map[string]*instance{},
		volumes:    map[string]*bay.VolumeInfo{},
		watchers:   map[int]watcher{},
		rules:      map[string][]*rule{},
		latency:    map[string]time.Duration{},
	}
	d.endpoint = func(instance string, c bay.ContainerSpec) string {
		return "http://" + instance + "-" + c.Name + ":" + strconv.Itoa(c.Port)
	}
	d.oneShot = func(context.Context, bay.ContainerSpec) (OneShotResult, error) { return OneShotResult{}, nil }
	for _, o := range opts {
		o(d)
	}
	return d
}

// ---------------------------------------------------------------------------------------------
// Scripting knobs
// ---------------------------------------------------------------------------------------------

// SetLateStart sets what the background start of each late container of a bay.InstanceSpec
// with LateStart does (nil, the default: it succeeds at once), once the late start is no longer
// held (bay.InstanceSpec.LateStartHold). fn runs outside the fake's lock,
// once per late container, in parallel, with CreateInstance's ctx; it may block (to hold the
// start) and a non-nil result fails the late start, which then removes the whole instance.
func (d *Driver) SetLateStart(fn func(ctx context.Context, instance string, c bay.ContainerSpec) error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.lateStart = fn
}

func checkMethod(method string) {
	if !slices.Contains(methods, method) {
		panic("fake: unknown driver method " + strconv.Quote(method))
	}
}

// Fail makes the next `times` calls of method return err without any effect (times = Always:
// every call). Rules are evaluated in the order they were added; the first that fires wins.
// It panics on an unknown method name.
func (d *Driver) Fail(method string, err error, times int) {
	d.FailAfter(method, 0, err, times)
}

// FailAfter lets the next n calls of method through, then fails the following `times` calls
// with err (without effect).
func (d *Driver) FailAfter(method string, n int, err error, times int) {
	d.addRule(&rule{method: method, after: n, times: times, err: err})
}

// FailLate makes the next `times` calls of method take effect and then return err, as when the
// engine did the work but the answer was lost (a timeout after the container was created). It
// is the case that leaves orphans behind.
func (d *Driver) FailLate(method string, err error, times int) {
	d.addRule(&rule{method: method, times: times, late: true, err: err})
}

// FailWhen calls fn for every call of method (before its effect and before the counted rules of
// Fail, FailAfter and FailLate, with Call.Err unset); a non-nil result is returned as the call's
// error and the call has no effect. fn runs without the fake's lock and may call the Driver.
func (d *Driver) FailWhen(method string, fn func(Call) error) {
	d.addRule(&rule{method: method, times: Always, fn: fn})
}

func (d *Driver) addRule(r *rule) {
	checkMethod(r.method)
	d.mu.Lock()
	defer d.mu.Unlock()
	d.rules[r.method] = append(d.rules[r.method], r)
}

// ClearFailures removes every scripted failure of every method.
func (d *Driver) ClearFailures() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.rules = map[string][]*rule{}
}

// SetLatency delays every call of method by dur before it takes effect. A call whose ctx ends
// during the delay returns ctx's error and has no effect. dur = 0 removes the delay.
func (d *Driver) SetLatency(method string, dur time.Duration) {
	checkMethod(method)
	d.mu.Lock()
	defer d.mu.Unlock()
	d.latency[method] = dur
}

// SetDown makes Ping fail (true) or succeed (false), as an unreachable engine would.
func (d *Driver) SetDown(down bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.pingDown = down
}

// AddImage makes an image present (only meaningful with WithImages).
func (d *Driver) AddImage(image string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.images != nil {
		d.images[image] = true
	}
}

// Kill makes a container's process die behind the driver's back: state exited, exit code 137.
// It reports whether the container exists.
func (d *Driver) Kill(idOrName string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	c := d.lookupLocked(idOrName)
	if c == nil {
		return false
	}
	c.State, c.ExitCode, c.Endpoint = bay.ContainerExited, 137, ""
	d.diedLocked(c)
	return true
}

// diedLocked tells the watchers whose labels the container's instance carries. Requires d.mu;
// the callbacks must not block (the port says so).
func (d *Driver) diedLocked(c *Container) {
	for _, w := range d.watchers {
		if hasLabels(c.Labels, w.labels) {
			w.died(c.Instance)
		}
	}
}

// Vanish removes a container behind the driver's back (as `docker rm -f` by an operator would).
// It reports whether the container existed.
func (d *Driver) Vanish(idOrName string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	c := d.lookupLocked(idOrName)
	if c == nil {
		return false
	}
	delete(d.containers, c.ID)
	// An instance whose last container is gone no longer exists (the fake models no network
	// that would outlive its containers).
	if inst, ok := d.instances[c.Instance]; ok && len(d.instanceLocked(inst).Containers) == 0 {
		delete(d.instances, c.Instance)
	}
	return true
}

// SetState forces a container's state (for example paused or removing). It reports whether
// the container exists.
func (d *Driver) SetState(idOrName string, state bay.ContainerState) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	c := d.lookupLocked(idOrName)
	if c == nil {
		return false
	}
	c.State = state
	if state != bay.ContainerRunning {
		c.Endpoint = ""
	} else if c.Endpoint == "" {
		c.Endpoint = d.endpoint(c.Instance, c.Spec)
	}
	return true
}

// ---------------------------------------------------------------------------------------------
// Observation
// ---------------------------------------------------------------------------------------------

// Calls returns a copy of every call made so far, in order.
func (d *Driver) Calls() []Call {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]Call, len(d.calls))
	for i, c := range d.calls {
		out[i] = c
		out[i].Labels = maps.Clone(c.Labels)
		if c.Spec != nil {
			s := cloneInstanceSpec(*c.Spec)
			out[i].Spec = &s
		}
	}
	return out
}

// CallCount returns how many times method was called (failed calls included).
func (d *Driver) CallCount(method string) int {
	checkMethod(method)
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, c := range d.calls {
		if c.Method == method {
			n++
		}
	}
	return n
}

// ResetCalls forgets the recorded calls.
func (d *Driver) ResetCalls() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls = nil
}

// Containers returns a snapshot of every container, ordered by creation.
func (d *Driver) Containers() []Container {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]Container, 0, len(d.containers))
	for _, c := range d.sortedContainersLocked() {
		out = append(out, c.clone())
	}
	return out
}

// Container returns a snapshot of one container (by id, or by its instance's name: the
// instance's first container).
func (d *Driver) Container(idOrName string) (Container, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	c := d.lookupLocked(idOrName)
	if c == nil {
		return Container{}, false
	}
	return c.clone(), true
}

// Volumes returns a snapshot of every volume, ordered by name.
func (d *Driver) Volumes() []bay.VolumeInfo {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]bay.VolumeInfo, 0, len(d.volumes))
	for _, name := range slices.Sorted(maps.Keys(d.volumes)) {
		v := *d.volumes[name]
		v.Labels = maps.Clone(v.Labels)
		out = append(out, v)
	}
	return out
}

// Instances returns the names of every instance, sorted.
func (d *Driver) Instances() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Sorted(maps.Keys(d.instances))
}

// ---------------------------------------------------------------------------------------------
// The bay.Driver methods
// ---------------------------------------------------------------------------------------------

// begin runs the common prologue of every method: ctx check, latency, scripted failures. It
// returns with d.mu held when err is nil (the caller then performs the effect and calls end);
// with d.mu released and the call recorded when err is non-nil. late is the error to return
// after the effect.
func (d *Driver) begin(ctx context.Context, call Call) (late error, err error) {
	if err := ctx.Err(); err != nil {
		d.record(call, err)
		return nil, fmt.Errorf("%s: %w", call.Method, err)
	}
	d.mu.Lock()
	delay := d.latency[call.Method]
	d.mu.Unlock()
	if delay > 0 {
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			err := fmt.Errorf("%s: %w", call.Method, ctx.Err())
			d.record(call, err)
			return nil, err
		}
	}
	// FailWhen functions run without the lock, so that they may call the Driver.
	d.mu.Lock()
	var fns []func(Call) error
	for _, r := range d.rules[call.Method] {
		if r.fn != nil {
			fns = append(fns, r.fn)
		}
	}
	d.mu.Unlock()
	for _, fn := range fns {
		if err := fn(call); err != nil {
			d.record(call, err)
			return nil, err
		}
	}
	d.mu.Lock()
	for _, r := range d.rules[call.Method] {
		if r.fn != nil {
			continue
		}
		r.seen++
		if r.seen <= r.after || (r.times != Always && r.fired >= r.times) {
			continue
		}
		r.fired++
		if r.late {
			return r.err, nil
		}
		d.recordLocked(call, r.err)
		d.mu.Unlock()
		return nil, r.err
	}
	return nil, nil
}

// end records the call, releases d.mu and returns the late error if any, else err.
func (d *Driver) end(call Call, late, err error) error {
	if err == nil {
		err = late
	}
	d.recordLocked(call, err)
	d.mu.Unlock()
	return err
}

func (d *Driver) record(call Call, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.recordLocked(call, err)
}

func (d *Driver) recordLocked(call Call, err error) {
	call.Err = err
	call.Labels = maps.Clone(call.Labels)
	d.calls = append(d.calls, call)
}

// Ping fails while SetDown(true) is in effect.
func (d *Driver) Ping(ctx context.Context) error {
	call := Call{Method: MethodPing}
	late, err := d.begin(ctx, call)
	if err != nil {
		return err
	}
	if d.pingDown {
		err = &bay.Error{Code: bay.CodeUnavailable, Message: "container engine unreachable"}
		err = fmt.Errorf("ping fake engine: %w", err)
	}
	return d.end(call, late, err)
}

// CreateVolume creates a volume or returns the existing one's ref (labels unchanged, like the
// Docker engine).
func (d *Driver) CreateVolume(ctx context.Context, spec bay.VolumeSpec) (string, error) {
	name, labels := spec.Name, spec.Labels
	call := Call{Method: MethodCreateVolume, Target: name, Labels: labels}
	late, err := d.begin(ctx, call)
	if err != nil {
		return "", err
	}
	if name == "" || spec.SizeBytes < 0 {
		return "", d.end(call, nil, fmt.Errorf("create volume %q: invalid spec", name))
	}
	if _, ok := d.volumes[name]; !ok {
		// The fake bounds nothing it stores but reports the size like a driver that does;
		// it cannot tell the use.
		d.volumes[name] = &bay.VolumeInfo{Name: name, Labels: maps.Clone(labels), CreatedAt: d.now().UTC(),
			SizeBytes: spec.SizeBytes, UsedBytes: -1}
	}
	if err := d.end(call, late, nil); err != nil {
		return "", err
	}
	return name, nil
}

// DeleteVolume removes a volume; missing is success; referenced by any container (running or
// not) wraps bay.ErrConflict.
func (d *Driver) DeleteVolume(ctx context.Context, ref string) error {
	call := Call{Method: MethodDeleteVolume, Target: ref}
	late, err := d.begin(ctx, call)
	if err != nil {
		return err
	}
	if _, ok := d.volumes[ref]; ok {
		for _, c := range d.containers {
			if c.VolumeRef == ref {
				err = fmt.Errorf("delete volume %s: in use by container %s: %w", ref, c.ID, bay.ErrConflict)
				return d.end(call, nil, err)
			}
		}
		delete(d.volumes, ref)
	}
	return d.end(call, late, nil)
}

// InspectVolume returns the volume or an error wrapping bay.ErrNotFound.
func (d *Driver) InspectVolume(ctx context.Context, ref string) (bay.VolumeInfo, error) {
	call := Call{Method: MethodInspectVolume, Target: ref}
	late, err := d.begin(ctx, call)
	if err != nil {
		return bay.VolumeInfo{}, err
	}
	v, ok := d.volumes[ref]
	if !ok {
		return bay.VolumeInfo{}, d.end(call, nil, fmt.Errorf("inspect volume %s: %w", ref, bay.ErrNotFound))
	}
	out := *v
	out.Labels = maps.Clone(v.Labels)
	if err := d.end(call, late, nil); err != nil {
		return bay.VolumeInfo{}, err
	}
	return out, nil
}

// ListVolumes lists the volumes carrying all the given labels, ordered by name.
func (d *Driver) ListVolumes(ctx context.Context, labels map[string]string) ([]bay.VolumeInfo, error) {
	call := Call{Method: MethodListVolumes, Labels: labels}
	late, err := d.begin(ctx, call)
	if err != nil {
		return nil, err
	}
	var out []bay.VolumeInfo
	for _, name := range slices.Sorted(maps.Keys(d.volumes)) {
		v := d.volumes[name]
		if hasLabels(v.Labels, labels) {
			cp := *v
			cp.Labels = maps.Clone(v.Labels)
			out = append(out, cp)
		}
	}
	if err := d.end(call, late, nil); err != nil {
		return nil, err
	}
	return out, nil
}

// CreateInstance validates the spec like the Docker driver (images present, volume exists,
// name free) and records the instance with every container running. A FailLate rule leaves the
// instance behind and fails the call, as a bay killed in the middle of a create would.
func (d *Driver) CreateInstance(ctx context.Context, spec bay.InstanceSpec) (bay.Instance, error) {
	spec = cloneInstanceSpec(spec)
	asked := cloneInstanceSpec(spec)
	call := Call{Method: MethodCreateInstance, Target: spec.Name, Spec: &asked, Labels: asked.Labels}
	late, err := d.begin(ctx, call)
	if err != nil {
		return bay.Instance{}, err
	}
	fail := func(format string, args ...any) (bay.Instance, error) {
		return bay.Instance{}, d.end(call, nil, fmt.Errorf("create instance %s: "+format, append([]any{spec.Name}, args...)...))
	}
	switch {
	case spec.Name == "":
		return fail("no name")
	case len(spec.Containers) == 0:
		return fail("no containers")
	case spec.VolumeRef != "" && spec.MountPath == "":
		return fail("volume %s without a mount path", spec.VolumeRef)
	case !slices.Contains([]bay.NetworkMode{"", bay.NetworkIsolated, bay.NetworkOpen, bay.NetworkNone, bay.NetworkAllowlist}, spec.Network.Mode):
		return fail("network mode %q is not supported", spec.Network.Mode)
	case spec.Network.Mode == bay.NetworkNone && len(spec.Containers) != 1:
		return fail("network mode none takes exactly one container")
	case !bay.ValidContainerRuntime(spec.Runtime):
		return fail("container runtime %q is not supported", spec.Runtime)
	case !d.hasRuntime(spec.Runtime):
		return fail("%w", d.runtimeMissing(spec.Runtime))
	}
	seen := map[string]bool{}
	ports := map[int]string{}
	for _, c := range spec.Containers {
		other, portTaken := ports[c.Port]
		switch {
		case c.Name == "" || seen[c.Name]:
			return fail("container name %q empty or used twice", c.Name)
		case portTaken && c.Port != 0:
			return fail("containers %s and %s both listen on port %d; the containers of an instance share one network", other, c.Name, c.Port)
		case c.Image == "":
			return fail("container %s: no image", c.Name)
		case len(c.Command) > 0 && (c.Port != 0 || len(c.CapAdd) > 0):
			return fail("container %s: a one-shot container has no runtime port and adds no capability", c.Name)
		case len(c.Command) > 0 && c.WorkDir != "" && !strings.HasPrefix(c.WorkDir, "/"):
			return fail("container %s: work dir %q is not absolute", c.Name, c.WorkDir)
		case len(c.Command) == 0 && (c.Port <= 0 || c.Port > 65535):
			return fail("container %s: invalid runtime port %d", c.Name, c.Port)
		case d.images != nil && !d.images[c.Image]:
			return fail("image %s not found locally; build it with `bay image build`", c.Image)
		case c.Seccomp != bay.SeccompDefault && c.Seccomp != bay.SeccompUserNamespaces:
			return fail("container %s: unknown seccomp filter %q", c.Name, c.Seccomp)
		}
		for _, cp := range c.CapAdd {
			if !slices.Contains(bay.AddableCaps, strings.TrimPrefix(strings.ToUpper(cp), "CAP_")) {
				return fail("container %s: capability %s may not be added", c.Name, cp)
			}
		}
		seen[c.Name] = true
		ports[c.Port] = c.Name
	}
	if _, ok := d.instances[spec.Name]; ok {
		return fail("name already in use: %w", bay.ErrConflict)
	}
	if spec.VolumeRef != "" {
		if _, ok := d.volumes[spec.VolumeRef]; !ok {
			return fail("volume %s: %w", spec.VolumeRef, bay.ErrNotFound)
		}
	}
	labels := maps.Clone(spec.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[bay.LabelManaged] = "true"
	now := d.now().UTC()
	inst := &instance{name: spec.Name, labels: labels, createdAt: now}
	// As the Docker driver: the containers marked StartFirst run when CreateInstance returns,
	// the others start in the background.
	first := slices.ContainsFunc(spec.Containers, func(c bay.ContainerSpec) bool { return c.StartFirst })
	lateStart := spec.LateStart && first && slices.ContainsFunc(spec.Containers, func(c bay.ContainerSpec) bool { return !c.StartFirst })
	for _, cs := range spec.Containers {
		pids := cs.Limits.PidsLimit
		if pids <= 0 {
			pids = DefaultPidsLimit
		}
		user := cs.User
		if user == "" {
			user = "1000:1000"
		}
		tmp := cs.Limits.TmpBytes
		if tmp <= 0 {
			tmp = DefaultTmpBytes
		}
		c := &Container{
			ID: newID(), Instance: spec.Name, Spec: cs, Labels: labels,
			VolumeRef: spec.VolumeRef, MountPath: spec.MountPath,
			State: bay.ContainerRunning, CreatedAt: now, Endpoint: d.endpoint(spec.Name, cs),
			User: user, CapDrop: []string{"ALL"}, CapAdd: slices.Clone(cs.CapAdd),
			SecurityOpt: []string{"no-new-privileges:true"}, PidsLimit: pids, MemorySwap: cs.Limits.MemoryBytes,
			ReadonlyRootfs: true, TmpBytes: tmp,
		}
		if len(cs.Command) > 0 {
			c.Endpoint = ""
		}
		if lateStart && !cs.StartFirst {
			c.State = bay.ContainerCreated
		}
		d.containers[c.ID] = c
		inst.containers = append(inst.containers, c.ID)
	}
	d.instances[spec.Name] = inst
	out := d.instanceLocked(inst)
	if err := d.end(call, late, nil); err != nil {
		return bay.Instance{}, err
	}
	if lateStart {
		out.Late = bay.NewLateStart()
		lctx, cancel := context.WithCancel(ctx)
		d.mu.Lock()
		inst.lateCancel, inst.lateDone = cancel, out.Late.Done()
		d.mu.Unlock()
		go d.startLate(lctx, spec, inst, out.Late)
	}
	return out, nil
}

// startLate starts the containers CreateInstance left created, as the Docker driver does in the
// background: after the caller's Begin or the spec's LateStartHold, through the SetLateStart
// function, then bounded by ctx; a failure, or the
// instance's destruction meanwhile, removes whatever is left of the instance.
func (d *Driver) startLate(ctx context.Context, spec bay.InstanceSpec, inst *instance, ls *bay.LateStart) {
	held := ls.Hold(ctx, spec.LateStartHold)
	d.mu.Lock()
	fn := d.lateStart
	d.mu.Unlock()
	errs := make([]error, len(spec.Containers))
	if held == nil && fn != nil {
		var wg sync.WaitGroup
		for i, c := range spec.Containers {
			if c.StartFirst {
				continue
			}
			wg.Go(func() {
				if err := fn(ctx, spec.Name, cloneContainerSpec(c)); err != nil {
					errs[i] = fmt.Errorf("container %s: %w", c.Name, err)
				}
			})
		}
		wg.Wait()
	}
	err := errors.Join(errs...)
	if err == nil {
		err = cmp.Or(held, ctx.Err())
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err == nil && d.instances[spec.Name] != inst {
		err = fmt.Errorf("instance destroyed while its containers started: %w", bay.ErrNotFound)
	}
	if err == nil {
		for _, id := range inst.containers {
			c, ok := d.containers[id]
			if !ok {
				err = fmt.Errorf("container %s removed while it started: %w", id, bay.ErrNotFound)
				break
			}
			if c.State == bay.ContainerCreated {
				c.State = bay.ContainerRunning
			}
		}
	}
	if err != nil {
		if d.instances[spec.Name] == inst {
			for _, id := range inst.containers {
				delete(d.containers, id)
			}
			delete(d.instances, spec.Name)
		}
		ls.Finish(bay.Instance{}, fmt.Errorf("create instance %s: late start: %w", spec.Name, err))
		return
	}
	ls.Finish(d.instanceLocked(inst), nil)
}

// InspectInstance returns the instance or an error wrapping bay.ErrNotFound.
func (d *Driver) InspectInstance(ctx context.Context, name string) (bay.Instance, error) {
	call := Call{Method: MethodInspectInstance, Target: name}
	late, err := d.begin(ctx, call)
	if err != nil {
		return bay.Instance{}, err
	}
	inst, ok := d.instances[name]
	if !ok || len(d.instanceLocked(inst).Containers) == 0 {
		return bay.Instance{}, d.end(call, nil, fmt.Errorf("inspect instance %s: %w", name, bay.ErrNotFound))
	}
	out := d.instanceLocked(inst)
	if err := d.end(call, late, nil); err != nil {
		return bay.Instance{}, err
	}
	return out, nil
}

// DestroyInstance removes the instance and its containers; missing is success.
func (d *Driver) DestroyInstance(ctx context.Context, name string) error {
	call := Call{Method: MethodDestroyInstance, Target: name}
	late, err := d.begin(ctx, call)
	if err != nil {
		return err
	}
	var lateCancel context.CancelFunc
	var lateDone <-chan struct{}
	if inst, ok := d.instances[name]; ok {
		for _, id := range inst.containers {
			delete(d.containers, id)
		}
		delete(d.instances, name)
		lateCancel, lateDone = inst.lateCancel, inst.lateDone
	}
	err = d.end(call, late, nil)
	// As the Docker driver does: a late start under way is ended before the destroy returns.
	if lateCancel != nil {
		lateCancel()
		select {
		case <-lateDone:
		case <-ctx.Done():
		}
	}
	return err
}

// ListInstances lists the instances carrying all the given labels, ordered by name.
func (d *Driver) ListInstances(ctx context.Context, labels map[string]string) ([]bay.Instance, error) {
	call := Call{Method: MethodListInstances, Labels: labels}
	late, err := d.begin(ctx, call)
	if err != nil {
		return nil, err
	}
	var out []bay.Instance
	for _, name := range slices.Sorted(maps.Keys(d.instances)) {
		if inst := d.instances[name]; hasLabels(inst.labels, labels) {
			out = append(out, d.instanceLocked(inst))
		}
	}
	if err := d.end(call, late, nil); err != nil {
		return nil, err
	}
	return out, nil
}

// WatchDeaths registers died until ctx ends; Kill reports to it.
func (d *Driver) WatchDeaths(ctx context.Context, labels map[string]string, died func(instance string)) error {
	call := Call{Method: MethodWatchDeaths, Labels: labels}
	late, err := d.begin(ctx, call)
	if err != nil {
		return err
	}
	id := d.nextWatch
	d.nextWatch++
	d.watchers[id] = watcher{labels: maps.Clone(labels), died: died}
	if err := d.end(call, late, nil); err != nil {
		return err
	}
	<-ctx.Done()
	d.mu.Lock()
	delete(d.watchers, id)
	d.mu.Unlock()
	return nil
}

// WaitInstance runs the primary one-shot container's script (WithOneShot) the first time, marks
// it exited, and copies its output into the writers (every call, like a re-read of the logs).
// A script that returns an error (ctx ended: a timeout or cancel) counts as killed: its partial
// result is kept with exit code 137 and the error is returned with it.
func (d *Driver) WaitInstance(ctx context.Context, name string, stdout, stderr io.Writer) (bay.Exit, error) {
	call := Call{Method: MethodWaitInstance, Target: name}
	late, err := d.begin(ctx, call)
	if err != nil {
		return bay.Exit{}, err
	}
	inst, ok := d.instances[name]
	if !ok || len(inst.containers) == 0 || d.containers[inst.containers[0]] == nil {
		return bay.Exit{}, d.end(call, nil, fmt.Errorf("wait instance %s: %w", name, bay.ErrNotFound))
	}
	c := d.containers[inst.containers[0]]
	ran, spec := c.Ran, cloneContainerSpec(c.Spec)
	d.mu.Unlock()
	var killed error
	if ran == nil {
		res, err := d.oneShot(ctx, spec)
		if err != nil {
			killed = fmt.Errorf("wait instance %s: %w", name, err)
			res.Exit = bay.Exit{Code: 137}
		}
		ran = &res
	}
	_, _ = io.WriteString(stdout, ran.Stdout)
	_, _ = io.WriteString(stderr, ran.Stderr)
	d.mu.Lock()
	if c := d.containers[c.ID]; c != nil && c.Ran == nil {
		c.Ran, c.State, c.ExitCode, c.Endpoint = ran, bay.ContainerExited, ran.Exit.Code, ""
	}
	if err := d.end(call, late, killed); err != nil {
		return ran.Exit, err
	}
	return ran.Exit, nil
}

// instanceLocked renders an instance with the containers still present. Requires d.mu.
func (d *Driver) instanceLocked(inst *instance) bay.Instance {
	out := bay.Instance{Name: inst.name, Labels: maps.Clone(inst.labels), CreatedAt: inst.createdAt}
	for _, id := range inst.containers {
		if c, ok := d.containers[id]; ok {
			out.Containers = append(out.Containers, c.info())
		}
	}
	return out
}

// ---------------------------------------------------------------------------------------------
// helpers
// ---------------------------------------------------------------------------------------------

// lookupLocked finds a container by id or name. Requires d.mu.
func (d *Driver) lookupLocked(idOrName string) *Container {
	if idOrName == "" {
		return nil
	}
	if c, ok := d.containers[idOrName]; ok {
		return c
	}
	if inst, ok := d.instances[idOrName]; ok {
		for _, id := range inst.containers {
			if c, ok := d.containers[id]; ok {
				return c
			}
		}
	}
	return nil
}

// sortedContainersLocked returns the containers by creation time, then id. Requires d.mu.
func (d *Driver) sortedContainersLocked() []*Container {
	out := slices.Collect(maps.Values(d.containers))
	slices.SortFunc(out, func(a, b *Container) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		if a.ID < b.ID {
			return -1
		}
		if a.ID > b.ID {
			return 1
		}
		return 0
	})
	return out
}

func hasLabels(have, want map[string]string) bool {
	for k, v := range want {
		if got, ok := have[k]; !ok || got != v {
			return false
		}
	}
	return true
}

func cloneContainerSpec(s bay.ContainerSpec) bay.ContainerSpec {
	s.Env = maps.Clone(s.Env)
	s.CapAdd = slices.Clone(s.CapAdd)
	s.Mounts = slices.Clone(s.Mounts)
	s.Command = slices.Clone(s.Command)
	return s
}

func cloneInstanceSpec(s bay.InstanceSpec) bay.InstanceSpec {
	s.Labels = maps.Clone(s.Labels)
	s.Containers = slices.Clone(s.Containers)
	for i := range s.Containers {
		s.Containers[i] = cloneContainerSpec(s.Containers[i])
	}
	return s
}

// newID returns a Docker-like 64-hex-digit container id.
func newID() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("crypto/rand failed: " + err.Error())
	}
	return hex.EncodeToString(b[:])
}
