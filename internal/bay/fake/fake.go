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
//   - Kill, Vanish and SetState make containers die or disappear behind the driver's back;
//   - Calls, CallCount, Containers, Volumes and Networks show what happened.
//
// The endpoint a started container reports is configurable with WithEndpointFunc, so that tests
// can point it at an httptest server standing in for ship.
//
// A Driver is safe for concurrent use. One mutex guards all state; latency is served outside it.
package fake

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

// Method names accepted by Fail, FailAfter, FailLate, FailWhen, SetLatency and CallCount. They
// are the names of the bay.Driver methods.
const (
	MethodPing             = "Ping"
	MethodCreateVolume     = "CreateVolume"
	MethodDeleteVolume     = "DeleteVolume"
	MethodInspectVolume    = "InspectVolume"
	MethodListVolumes      = "ListVolumes"
	MethodCreateContainer  = "CreateContainer"
	MethodStartContainer   = "StartContainer"
	MethodInspectContainer = "InspectContainer"
	MethodRemoveContainer  = "RemoveContainer"
	MethodListContainers   = "ListContainers"
	MethodCreateNetwork    = "CreateNetwork"
	MethodRemoveNetwork    = "RemoveNetwork"
	MethodListNetworks     = "ListNetworks"
)

var methods = []string{
	MethodPing, MethodCreateVolume, MethodDeleteVolume, MethodInspectVolume, MethodListVolumes,
	MethodCreateContainer, MethodStartContainer, MethodInspectContainer, MethodRemoveContainer,
	MethodListContainers, MethodCreateNetwork, MethodRemoveNetwork, MethodListNetworks,
}

// Always makes an injected failure permanent (pass it as times).
const Always = -1

// DefaultPidsLimit is the pids limit the fake reports when the spec leaves it 0, like the Docker
// driver's default.
const DefaultPidsLimit = 256

// Call is one recorded Driver call.
type Call struct {
	Method string
	// Target is the container id or name, volume ref or network name the call was about; ""
	// for Ping and the List methods. For CreateContainer it is the spec's name.
	Target string
	Spec   *bay.ContainerSpec // CreateContainer only (a copy)
	Labels map[string]string  // CreateVolume, CreateNetwork and the List methods
	Err    error              // what the call returned
}

// Container is the fake engine's view of one container.
type Container struct {
	ID        string
	Spec      bay.ContainerSpec
	State     bay.ContainerState
	ExitCode  int
	CreatedAt time.Time
	Starts    int    // how many times it was started
	Endpoint  string // set while running

	// The effective hardening, as the Docker driver applies it regardless of the spec.
	CapDrop     []string // ["ALL"]
	SecurityOpt []string // ["no-new-privileges:true"]
	Privileged  bool     // always false
	PidsLimit   int64    // spec's, or DefaultPidsLimit
	MemorySwap  int64    // = Spec.MemoryBytes (swap cannot bypass the memory limit)
}

// Info returns the bay.ContainerInfo the driver reports for c.
func (c *Container) Info() bay.ContainerInfo {
	info := bay.ContainerInfo{
		ID:        c.ID,
		Name:      c.Spec.Name,
		Image:     c.Spec.Image,
		State:     c.State,
		Labels:    maps.Clone(c.Spec.Labels),
		CreatedAt: c.CreatedAt,
	}
	if c.State == bay.ContainerRunning {
		info.Endpoint = c.Endpoint
	}
	return info
}

func (c *Container) clone() Container {
	cp := *c
	cp.Spec = cloneSpec(c.Spec)
	cp.CapDrop = slices.Clone(c.CapDrop)
	cp.SecurityOpt = slices.Clone(c.SecurityOpt)
	return cp
}

// Option configures a Driver.
type Option func(*Driver)

// WithEndpointFunc sets the endpoint a started container reports. The default is
// "http://<name>:<runtime port>" (the name, or the id when the spec has none).
func WithEndpointFunc(fn func(spec bay.ContainerSpec) string) Option {
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

// WithClock sets the clock used for CreatedAt (default time.Now).
func WithClock(now func() time.Time) Option {
	return func(d *Driver) { d.now = now }
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
	endpoint func(bay.ContainerSpec) string
	now      func() time.Time

	mu         sync.Mutex
	images     map[string]bool // nil = every image exists
	containers map[string]*Container
	volumes    map[string]*bay.VolumeInfo
	networks   map[string]*bay.NetworkInfo
	rules      map[string][]*rule
	latency    map[string]time.Duration
	calls      []Call
	pingDown   bool
}

var _ bay.Driver = (*Driver)(nil)

// New returns an empty fake engine (no containers, volumes or networks; every image present
// unless WithImages is given).
func New(opts ...Option) *Driver {
	d := &Driver{
		now:        time.Now,
		containers: map[string]*Container{},
		volumes:    map[string]*bay.VolumeInfo{},
		networks:   map[string]*bay.NetworkInfo{},
		rules:      map[string][]*rule{},
		latency:    map[string]time.Duration{},
	}
	d.endpoint = func(spec bay.ContainerSpec) string {
		host := spec.Name
		if host == "" {
			host = "fake"
		}
		return "http://" + host + ":" + strconv.Itoa(spec.RuntimePort)
	}
	for _, o := range opts {
		o(d)
	}
	return d
}

// ---------------------------------------------------------------------------------------------
// Scripting knobs
// ---------------------------------------------------------------------------------------------

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
	return true
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
		c.Endpoint = d.endpoint(c.Spec)
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
			s := cloneSpec(*c.Spec)
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

// Container returns a snapshot of one container (by id or name).
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

// Networks returns the names of every network, sorted.
func (d *Driver) Networks() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Sorted(maps.Keys(d.networks))
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
func (d *Driver) CreateVolume(ctx context.Context, name string, labels map[string]string) (string, error) {
	call := Call{Method: MethodCreateVolume, Target: name, Labels: labels}
	late, err := d.begin(ctx, call)
	if err != nil {
		return "", err
	}
	if name == "" {
		return "", d.end(call, nil, fmt.Errorf("create volume: empty name"))
	}
	if _, ok := d.volumes[name]; !ok {
		d.volumes[name] = &bay.VolumeInfo{Name: name, Labels: maps.Clone(labels), CreatedAt: d.now().UTC()}
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
			if c.Spec.VolumeRef == ref {
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

// CreateContainer validates the spec like the Docker driver (image present, volume and network
// exist, name free) and records a created container.
func (d *Driver) CreateContainer(ctx context.Context, spec bay.ContainerSpec) (string, error) {
	spec = cloneSpec(spec)
	asked := cloneSpec(spec)
	call := Call{Method: MethodCreateContainer, Target: spec.Name, Spec: &asked, Labels: asked.Labels}
	late, err := d.begin(ctx, call)
	if err != nil {
		return "", err
	}
	fail := func(format string, args ...any) (string, error) {
		return "", d.end(call, nil, fmt.Errorf("create container %s: "+format, append([]any{spec.Name}, args...)...))
	}
	switch {
	case spec.Image == "":
		return fail("no image")
	case spec.RuntimePort <= 0 || spec.RuntimePort > 65535:
		return fail("invalid runtime port %d", spec.RuntimePort)
	case spec.VolumeRef != "" && spec.MountPath == "":
		return fail("volume %s without a mount path", spec.VolumeRef)
	}
	if d.images != nil && !d.images[spec.Image] {
		return fail("image %s not found locally; build it with `bay image build`", spec.Image)
	}
	if spec.Name != "" && d.lookupLocked(spec.Name) != nil {
		return fail("name already in use: %w", bay.ErrConflict)
	}
	if spec.VolumeRef != "" {
		if _, ok := d.volumes[spec.VolumeRef]; !ok {
			return fail("volume %s: %w", spec.VolumeRef, bay.ErrNotFound)
		}
	}
	if spec.Network != "" && spec.Network != "bridge" {
		if _, ok := d.networks[spec.Network]; !ok {
			return fail("network %s: %w", spec.Network, bay.ErrNotFound)
		}
	}
	id := newID()
	labels := maps.Clone(spec.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[bay.LabelManaged] = "true"
	spec.Labels = labels
	pids := spec.PidsLimit
	if pids <= 0 {
		pids = DefaultPidsLimit
	}
	d.containers[id] = &Container{
		ID:          id,
		Spec:        spec,
		State:       bay.ContainerCreated,
		CreatedAt:   d.now().UTC(),
		CapDrop:     []string{"ALL"},
		SecurityOpt: []string{"no-new-privileges:true"},
		PidsLimit:   pids,
		MemorySwap:  spec.MemoryBytes,
	}
	if err := d.end(call, late, nil); err != nil {
		return "", err
	}
	return id, nil
}

// StartContainer starts (or restarts) a container and returns its endpoint.
func (d *Driver) StartContainer(ctx context.Context, id string) (string, error) {
	call := Call{Method: MethodStartContainer, Target: id}
	late, err := d.begin(ctx, call)
	if err != nil {
		return "", err
	}
	c := d.lookupLocked(id)
	if c == nil {
		return "", d.end(call, nil, fmt.Errorf("start container %s: %w", id, bay.ErrNotFound))
	}
	if c.State == bay.ContainerRemoving {
		return "", d.end(call, nil, fmt.Errorf("start container %s: being removed: %w", id, bay.ErrConflict))
	}
	if c.State != bay.ContainerRunning {
		c.State, c.ExitCode = bay.ContainerRunning, 0
		c.Starts++
		c.Endpoint = d.endpoint(c.Spec)
	}
	endpoint := c.Endpoint
	if err := d.end(call, late, nil); err != nil {
		return "", err
	}
	return endpoint, nil
}

// InspectContainer returns the container (by id or name) or an error wrapping bay.ErrNotFound.
func (d *Driver) InspectContainer(ctx context.Context, id string) (bay.ContainerInfo, error) {
	call := Call{Method: MethodInspectContainer, Target: id}
	late, err := d.begin(ctx, call)
	if err != nil {
		return bay.ContainerInfo{}, err
	}
	c := d.lookupLocked(id)
	if c == nil {
		return bay.ContainerInfo{}, d.end(call, nil, fmt.Errorf("inspect container %s: %w", id, bay.ErrNotFound))
	}
	info := c.Info()
	if err := d.end(call, late, nil); err != nil {
		return bay.ContainerInfo{}, err
	}
	return info, nil
}

// RemoveContainer removes a container in any state; missing is success.
func (d *Driver) RemoveContainer(ctx context.Context, id string) error {
	call := Call{Method: MethodRemoveContainer, Target: id}
	late, err := d.begin(ctx, call)
	if err != nil {
		return err
	}
	if c := d.lookupLocked(id); c != nil {
		delete(d.containers, c.ID)
	}
	return d.end(call, late, nil)
}

// ListContainers lists containers in any state carrying all the given labels, by creation.
func (d *Driver) ListContainers(ctx context.Context, labels map[string]string) ([]bay.ContainerInfo, error) {
	call := Call{Method: MethodListContainers, Labels: labels}
	late, err := d.begin(ctx, call)
	if err != nil {
		return nil, err
	}
	var out []bay.ContainerInfo
	for _, c := range d.sortedContainersLocked() {
		if hasLabels(c.Spec.Labels, labels) {
			out = append(out, c.Info())
		}
	}
	if err := d.end(call, late, nil); err != nil {
		return nil, err
	}
	return out, nil
}

// CreateNetwork creates a network; an existing one with that name is success.
func (d *Driver) CreateNetwork(ctx context.Context, name string, labels map[string]string) error {
	call := Call{Method: MethodCreateNetwork, Target: name, Labels: labels}
	late, err := d.begin(ctx, call)
	if err != nil {
		return err
	}
	if name == "" {
		return d.end(call, nil, fmt.Errorf("create network: empty name"))
	}
	if _, ok := d.networks[name]; !ok {
		d.networks[name] = &bay.NetworkInfo{Name: name, ID: newID(), Labels: maps.Clone(labels), CreatedAt: d.now().UTC()}
	}
	return d.end(call, late, nil)
}

// RemoveNetwork removes a network; missing is success; a running container attached to it
// wraps bay.ErrConflict.
func (d *Driver) RemoveNetwork(ctx context.Context, name string) error {
	call := Call{Method: MethodRemoveNetwork, Target: name}
	late, err := d.begin(ctx, call)
	if err != nil {
		return err
	}
	if _, ok := d.networks[name]; ok {
		for _, c := range d.containers {
			if c.Spec.Network == name && c.State == bay.ContainerRunning {
				err = fmt.Errorf("remove network %s: in use by container %s: %w", name, c.ID, bay.ErrConflict)
				return d.end(call, nil, err)
			}
		}
		delete(d.networks, name)
	}
	return d.end(call, late, nil)
}

// ListNetworks lists the networks carrying all the given labels, ordered by name.
func (d *Driver) ListNetworks(ctx context.Context, labels map[string]string) ([]bay.NetworkInfo, error) {
	call := Call{Method: MethodListNetworks, Labels: labels}
	late, err := d.begin(ctx, call)
	if err != nil {
		return nil, err
	}
	var out []bay.NetworkInfo
	for _, name := range slices.Sorted(maps.Keys(d.networks)) {
		n := d.networks[name]
		if hasLabels(n.Labels, labels) {
			cp := *n
			cp.Labels = maps.Clone(n.Labels)
			out = append(out, cp)
		}
	}
	if err := d.end(call, late, nil); err != nil {
		return nil, err
	}
	return out, nil
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
	for _, c := range d.containers {
		if c.Spec.Name == idOrName {
			return c
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

func cloneSpec(s bay.ContainerSpec) bay.ContainerSpec {
	s.Env = maps.Clone(s.Env)
	s.Labels = maps.Clone(s.Labels)
	s.Mounts = slices.Clone(s.Mounts)
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
