// Package drivertest is the one conformance suite of bay.Driver. Every implementation (the
// in-memory fake, the Docker driver, later Kubernetes) runs it through Run with a Harness, so
// that the fake the service tests rely on cannot drift from the real engine.
//
// Every object the suite creates carries a unique name and the label LabelTestRun=<run id>, and
// is removed in t.Cleanup on a detached context, so parallel runs against one engine do not
// collide and a failed run leaves nothing behind.
package drivertest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

// LabelTestRun marks every object a suite run creates.
const LabelTestRun = "bay.test_run"

// Harness is what an implementation provides to the suite.
type Harness struct {
	// Driver under test.
	Driver bay.Driver
	// Image is present in the engine. Its process serves GET /health with status 200 on
	// RuntimePort (internal/bay/drivertest/testimage builds such an image for Docker).
	Image string
	// RuntimePort is the port the image listens on (default 8123).
	RuntimePort int
	// Kill kills the container's main process behind the driver's back (SIGKILL).
	Kill func(t *testing.T, id string)
	// Effective reports the settings the engine actually applied to the container.
	Effective func(t *testing.T, id string) Effective
	// HTTPClient reaches endpoints (default: a client with a 2 s timeout and no proxy).
	HTTPClient *http.Client
	// ReadyTimeout bounds the wait for a started container to answer /health (default 20 s).
	ReadyTimeout time.Duration
}

// Effective is the engine's view of one container's isolation settings.
type Effective struct {
	User        string
	CapDrop     []string
	SecurityOpt []string
	Privileged  bool
	PidsLimit   int64
	Memory      int64
	MemorySwap  int64
	NanoCPUs    int64
	// PublishedHostIPs lists the host address of every published port binding, requested and
	// actual ("" stands for all interfaces).
	PublishedHostIPs []string
}

// suite is one Run's state.
type suite struct {
	h     Harness
	run   string
	seq   atomic.Int64
	httpc *http.Client

	mu       sync.Mutex
	networks []string
}

// Run runs the conformance suite against h. Subtests run in parallel.
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.Driver == nil || h.Image == "" || h.Kill == nil || h.Effective == nil {
		t.Fatal("drivertest: Harness needs Driver, Image, Kill and Effective")
	}
	if h.RuntimePort == 0 {
		h.RuntimePort = 8123
	}
	if h.ReadyTimeout == 0 {
		h.ReadyTimeout = 20 * time.Second
	}
	s := &suite{h: h, run: randomHex(4), httpc: h.HTTPClient}
	if s.httpc == nil {
		s.httpc = &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{Proxy: nil}}
	}
	t.Logf("drivertest run id %s (label %s=%s)", s.run, LabelTestRun, s.run)
	t.Cleanup(func() { s.sweep(t) })

	tests := []struct {
		name string
		fn   func(*testing.T)
	}{
		{"Ping", s.testPing},
		{"ContainerLifecycle", s.testContainerLifecycle},
		{"Hardening", s.testHardening},
		{"DefaultPidsLimit", s.testDefaultPidsLimit},
		{"NameConflict", s.testNameConflict},
		{"ImageMissing", s.testImageMissing},
		{"VolumeMissing", s.testVolumeMissing},
		{"MissingContainer", s.testMissingContainer},
		{"KilledBehindTheDriversBack", s.testKilled},
		{"RestartAfterExit", s.testRestart},
		{"ListFiltersByAllLabels", s.testListContainers},
		{"Volumes", s.testVolumes},
		{"VolumeInUse", s.testVolumeInUse},
		{"Networks", s.testNetworks},
		{"CancelledContext", s.testCancelled},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t)
		})
	}
}

// ---------------------------------------------------------------------------------------------
// helpers
// ---------------------------------------------------------------------------------------------

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// name returns a unique object name for this run.
func (s *suite) name(kind string) string {
	return fmt.Sprintf("drivertest-%s-%s-%d", s.run, kind, s.seq.Add(1))
}

// labels returns the run label plus extra pairs.
func (s *suite) labels(kv ...string) map[string]string {
	m := map[string]string{LabelTestRun: s.run}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

// spec returns a valid container spec with a unique name.
func (s *suite) spec() bay.ContainerSpec {
	name := s.name("c")
	return bay.ContainerSpec{
		Name:        name,
		Image:       s.h.Image,
		Hostname:    "drivertest",
		Env:         map[string]string{"DRIVERTEST": "1"},
		Labels:      s.labels(),
		RuntimePort: s.h.RuntimePort,
		User:        "1000:1000",
	}
}

func detached(t *testing.T) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(t.Context()), 30*time.Second)
}

// create creates a container and registers its removal.
func (s *suite) create(t *testing.T, spec bay.ContainerSpec) string {
	t.Helper()
	id, err := s.h.Driver.CreateContainer(t.Context(), spec)
	if err != nil {
		t.Fatalf("CreateContainer(%s): %v", spec.Name, err)
	}
	if id == "" {
		t.Fatalf("CreateContainer(%s) returned an empty id", spec.Name)
	}
	t.Cleanup(func() {
		ctx, cancel := detached(t)
		defer cancel()
		if err := s.h.Driver.RemoveContainer(ctx, id); err != nil {
			t.Errorf("cleanup: RemoveContainer(%s): %v", id, err)
		}
	})
	return id
}

// start starts a container and waits until its endpoint answers /health.
func (s *suite) start(t *testing.T, id string) string {
	t.Helper()
	endpoint, err := s.h.Driver.StartContainer(t.Context(), id)
	if err != nil {
		t.Fatalf("StartContainer(%s): %v", id, err)
	}
	if _, err := url.Parse(endpoint); err != nil || !strings.HasPrefix(endpoint, "http://") {
		t.Fatalf("StartContainer(%s) endpoint %q is not an http URL", id, endpoint)
	}
	s.waitHealthy(t, endpoint)
	return endpoint
}

// waitHealthy polls GET <endpoint>/health until it answers 200. This waits for a real process
// to listen, which takes a few milliseconds; it tests no timing logic.
func (s *suite) waitHealthy(t *testing.T, endpoint string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), s.h.ReadyTimeout)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		last = s.get(ctx, endpoint+"/health")
		if last == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("endpoint %s never became healthy: %v", endpoint, last)
		case <-tick.C:
		}
	}
}

func (s *suite) get(ctx context.Context, u string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := s.httpc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: status %d", u, resp.StatusCode)
	}
	return nil
}

func (s *suite) volume(t *testing.T, labels map[string]string) string {
	t.Helper()
	ref, err := s.h.Driver.CreateVolume(t.Context(), s.name("v"), labels)
	if err != nil {
		t.Fatalf("CreateVolume: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := detached(t)
		defer cancel()
		if err := s.h.Driver.DeleteVolume(ctx, ref); err != nil {
			t.Errorf("cleanup: DeleteVolume(%s): %v", ref, err)
		}
	})
	return ref
}

// network creates a network labelled s.labels(kv...); the sweep removes it if the test does not.
func (s *suite) network(t *testing.T, kv ...string) string {
	t.Helper()
	name := s.name("n")
	s.mu.Lock()
	s.networks = append(s.networks, name)
	s.mu.Unlock()
	if err := s.h.Driver.CreateNetwork(t.Context(), name, s.labels(kv...)); err != nil {
		t.Fatalf("CreateNetwork(%s): %v", name, err)
	}
	return name
}

// sweep removes everything the run left behind (after failures), on a detached context.
func (s *suite) sweep(t *testing.T) {
	ctx, cancel := detached(t)
	defer cancel()
	d := s.h.Driver
	cs, err := d.ListContainers(ctx, s.labels())
	if err != nil {
		t.Errorf("sweep: ListContainers: %v", err)
	}
	for _, c := range cs {
		t.Errorf("sweep: container %s (%s) was left behind", c.Name, c.ID)
		if err := d.RemoveContainer(ctx, c.ID); err != nil {
			t.Errorf("sweep: RemoveContainer(%s): %v", c.ID, err)
		}
	}
	s.mu.Lock()
	networks := slices.Clone(s.networks)
	s.mu.Unlock()
	for _, n := range networks {
		if err := d.RemoveNetwork(ctx, n); err != nil {
			t.Errorf("sweep: RemoveNetwork(%s): %v", n, err)
		}
	}
	vs, err := d.ListVolumes(ctx, s.labels())
	if err != nil {
		t.Errorf("sweep: ListVolumes: %v", err)
	}
	for _, v := range vs {
		t.Errorf("sweep: volume %s was left behind", v.Name)
		if err := d.DeleteVolume(ctx, v.Name); err != nil {
			t.Errorf("sweep: DeleteVolume(%s): %v", v.Name, err)
		}
	}
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// ---------------------------------------------------------------------------------------------
// the tests
// ---------------------------------------------------------------------------------------------

func (s *suite) testPing(t *testing.T) {
	if err := s.h.Driver.Ping(t.Context()); err != nil {
		t.Fatalf("Ping: %v", err)
	}
}

func (s *suite) testContainerLifecycle(t *testing.T) {
	d, ctx := s.h.Driver, t.Context()
	ref := s.volume(t, s.labels())
	spec := s.spec()
	spec.VolumeRef, spec.MountPath = ref, "/workspace"
	spec.Labels = s.labels("bay.session_id", "sess-lifecycle")

	before := time.Now()
	id := s.create(t, spec)
	info, err := d.InspectContainer(ctx, id)
	if err != nil {
		t.Fatalf("InspectContainer after create: %v", err)
	}
	if info.ID != id || info.Name != spec.Name || info.Image != spec.Image {
		t.Errorf("inspect = id %q name %q image %q, want %q %q %q", info.ID, info.Name, info.Image, id, spec.Name, spec.Image)
	}
	if info.State != bay.ContainerCreated {
		t.Errorf("state after create = %q, want created", info.State)
	}
	if info.Endpoint != "" {
		t.Errorf("endpoint of a created container = %q, want empty", info.Endpoint)
	}
	want := maps.Clone(spec.Labels)
	want[bay.LabelManaged] = "true"
	for k, v := range want {
		if info.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, info.Labels[k], v)
		}
	}
	if info.CreatedAt.IsZero() || info.CreatedAt.Before(before.Add(-time.Minute)) || info.CreatedAt.After(time.Now().Add(time.Minute)) {
		t.Errorf("CreatedAt = %v, want about %v", info.CreatedAt, before)
	}

	endpoint := s.start(t, id)
	info, err = d.InspectContainer(ctx, id)
	if err != nil {
		t.Fatalf("InspectContainer after start: %v", err)
	}
	if info.State != bay.ContainerRunning || info.Endpoint != endpoint {
		t.Errorf("after start: state %q endpoint %q, want running %q", info.State, info.Endpoint, endpoint)
	}
	// Starting a running container again is harmless and reports the same endpoint.
	if again, err := d.StartContainer(ctx, id); err != nil || again != endpoint {
		t.Errorf("second StartContainer = %q, %v; want %q, nil", again, err, endpoint)
	}

	list, err := d.ListContainers(ctx, s.labels("bay.session_id", "sess-lifecycle"))
	if err != nil {
		t.Fatalf("ListContainers: %v", err)
	}
	if len(list) != 1 || list[0].ID != id || list[0].State != bay.ContainerRunning || list[0].Name != spec.Name {
		t.Fatalf("ListContainers = %+v, want just %s running", list, id)
	}
	if list[0].CreatedAt.Sub(info.CreatedAt).Abs() > time.Second {
		t.Errorf("list CreatedAt %v differs from inspect %v", list[0].CreatedAt, info.CreatedAt)
	}

	if err := d.RemoveContainer(ctx, id); err != nil {
		t.Fatalf("RemoveContainer: %v", err)
	}
	if _, err := d.InspectContainer(ctx, id); !bay.IsNotFound(err) {
		t.Fatalf("InspectContainer after remove: %v, want not_found", err)
	}
	if err := d.RemoveContainer(ctx, id); err != nil {
		t.Fatalf("RemoveContainer of a removed container: %v, want success", err)
	}
	if _, err := d.InspectVolume(ctx, ref); err != nil {
		t.Fatalf("the named volume must survive its container's removal: %v", err)
	}
	list, err = d.ListContainers(ctx, s.labels("bay.session_id", "sess-lifecycle"))
	if err != nil || len(list) != 0 {
		t.Fatalf("ListContainers after remove = %+v, %v; want empty", list, err)
	}
}

func (s *suite) testHardening(t *testing.T) {
	spec := s.spec()
	spec.MemoryBytes = 64 << 20
	spec.NanoCPUs = 500_000_000
	spec.PidsLimit = 100
	id := s.create(t, spec)
	s.start(t, id)
	eff := s.h.Effective(t, id)
	if !slices.Contains(eff.CapDrop, "ALL") {
		t.Errorf("CapDrop = %v, want ALL", eff.CapDrop)
	}
	if !slices.ContainsFunc(eff.SecurityOpt, func(o string) bool {
		return o == "no-new-privileges:true" || o == "no-new-privileges"
	}) {
		t.Errorf("SecurityOpt = %v, want no-new-privileges", eff.SecurityOpt)
	}
	if eff.Privileged {
		t.Error("container is privileged")
	}
	if eff.User != "1000:1000" {
		t.Errorf("User = %q, want 1000:1000", eff.User)
	}
	if eff.PidsLimit != 100 {
		t.Errorf("PidsLimit = %d, want 100", eff.PidsLimit)
	}
	if eff.Memory != spec.MemoryBytes || eff.MemorySwap != spec.MemoryBytes {
		t.Errorf("Memory/MemorySwap = %d/%d, want %d/%d (no swap beyond the limit)", eff.Memory, eff.MemorySwap, spec.MemoryBytes, spec.MemoryBytes)
	}
	if eff.NanoCPUs != spec.NanoCPUs {
		t.Errorf("NanoCPUs = %d, want %d", eff.NanoCPUs, spec.NanoCPUs)
	}
	for _, ip := range eff.PublishedHostIPs {
		if !isLoopback(ip) {
			t.Errorf("a port is published on %q; runtime ports must be published on loopback only", ip)
		}
	}
}

func (s *suite) testDefaultPidsLimit(t *testing.T) {
	id := s.create(t, s.spec())
	if eff := s.h.Effective(t, id); eff.PidsLimit <= 0 || eff.PidsLimit > 4096 {
		t.Errorf("PidsLimit with none in the spec = %d, want the driver default (256)", eff.PidsLimit)
	}
}

func (s *suite) testNameConflict(t *testing.T) {
	spec := s.spec()
	s.create(t, spec)
	id, err := s.h.Driver.CreateContainer(t.Context(), spec)
	if !bay.IsConflict(err) {
		if id != "" {
			_ = s.h.Driver.RemoveContainer(context.WithoutCancel(t.Context()), id)
		}
		t.Fatalf("second CreateContainer with the same name: %v, want conflict", err)
	}
}

func (s *suite) testImageMissing(t *testing.T) {
	spec := s.spec()
	spec.Image = "shipyard-drivertest-missing:" + s.run
	id, err := s.h.Driver.CreateContainer(t.Context(), spec)
	if err == nil {
		_ = s.h.Driver.RemoveContainer(context.WithoutCancel(t.Context()), id)
		t.Fatal("CreateContainer with a missing image succeeded")
	}
	if bay.IsConflict(err) || bay.IsNotFound(err) {
		t.Errorf("missing image classified as %s; it is a deployment problem, not a missing object", bay.ErrorCode(err))
	}
	if msg := err.Error(); !strings.Contains(msg, spec.Image) || !strings.Contains(msg, "not found locally") {
		t.Errorf("error %q should name the image and say it is not found locally", msg)
	}
}

func (s *suite) testVolumeMissing(t *testing.T) {
	spec := s.spec()
	spec.VolumeRef, spec.MountPath = s.name("missing-v"), "/workspace"
	id, err := s.h.Driver.CreateContainer(t.Context(), spec)
	if !bay.IsNotFound(err) {
		if id != "" {
			_ = s.h.Driver.RemoveContainer(context.WithoutCancel(t.Context()), id)
		}
		t.Fatalf("CreateContainer with a missing volume: %v, want not_found (an engine must not create an empty one)", err)
	}
	if vs, _ := s.h.Driver.ListVolumes(t.Context(), nil); slices.ContainsFunc(vs, func(v bay.VolumeInfo) bool { return v.Name == spec.VolumeRef }) {
		_ = s.h.Driver.DeleteVolume(context.WithoutCancel(t.Context()), spec.VolumeRef)
		t.Fatal("the missing volume was created")
	}
}

func (s *suite) testMissingContainer(t *testing.T) {
	d, ctx := s.h.Driver, t.Context()
	missing := s.name("missing-c")
	if _, err := d.InspectContainer(ctx, missing); !bay.IsNotFound(err) {
		t.Errorf("InspectContainer(missing): %v, want not_found", err)
	}
	if _, err := d.StartContainer(ctx, missing); !bay.IsNotFound(err) {
		t.Errorf("StartContainer(missing): %v, want not_found", err)
	}
	if err := d.RemoveContainer(ctx, missing); err != nil {
		t.Errorf("RemoveContainer(missing): %v, want success", err)
	}
}

func (s *suite) testKilled(t *testing.T) {
	d, ctx := s.h.Driver, t.Context()
	spec := s.spec()
	id := s.create(t, spec)
	s.start(t, id)
	s.h.Kill(t, id)
	info, err := d.InspectContainer(ctx, id)
	switch {
	case bay.IsNotFound(err):
		return
	case err != nil:
		t.Fatalf("InspectContainer after kill: %v", err)
	case info.State != bay.ContainerExited:
		t.Fatalf("state after kill = %q, want exited", info.State)
	case info.Endpoint != "":
		t.Errorf("endpoint of an exited container = %q, want empty", info.Endpoint)
	}
	list, err := d.ListContainers(ctx, s.labels())
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(list, func(c bay.ContainerInfo) bool { return c.ID == id })
	if i < 0 || list[i].State != bay.ContainerExited {
		t.Fatalf("ListContainers must include stopped containers; got %+v", list)
	}
	if err := d.RemoveContainer(ctx, id); err != nil {
		t.Fatalf("RemoveContainer of an exited container: %v", err)
	}
}

func (s *suite) testRestart(t *testing.T) {
	d := s.h.Driver
	id := s.create(t, s.spec())
	s.start(t, id)
	s.h.Kill(t, id)
	endpoint := s.start(t, id)
	info, err := d.InspectContainer(t.Context(), id)
	if err != nil || info.State != bay.ContainerRunning || info.Endpoint != endpoint {
		t.Fatalf("after restart: %+v, %v", info, err)
	}
}

func (s *suite) testListContainers(t *testing.T) {
	d, ctx := s.h.Driver, t.Context()
	a, b := s.spec(), s.spec()
	a.Labels = s.labels("bay.sandbox_id", "sb-a", "bay.profile_id", "p1")
	b.Labels = s.labels("bay.sandbox_id", "sb-b", "bay.profile_id", "p1")
	idA, idB := s.create(t, a), s.create(t, b)

	ids := func(labels map[string]string) []string {
		t.Helper()
		list, err := d.ListContainers(ctx, labels)
		if err != nil {
			t.Fatalf("ListContainers(%v): %v", labels, err)
		}
		var out []string
		for _, c := range list {
			if c.State != bay.ContainerCreated {
				t.Errorf("container %s listed as %q, want created", c.ID, c.State)
			}
			out = append(out, c.ID)
		}
		slices.Sort(out)
		return out
	}
	both := []string{idA, idB}
	slices.Sort(both)
	if got := ids(s.labels("bay.profile_id", "p1")); !slices.Equal(got, both) {
		t.Errorf("by profile: %v, want %v", got, both)
	}
	if got := ids(s.labels("bay.profile_id", "p1", "bay.sandbox_id", "sb-a")); !slices.Equal(got, []string{idA}) {
		t.Errorf("by profile and sandbox: %v, want [%s] (all labels must match)", got, idA)
	}
	if got := ids(s.labels("bay.sandbox_id", "sb-c")); len(got) != 0 {
		t.Errorf("by unknown sandbox: %v, want none", got)
	}
	if got := ids(s.labels(bay.LabelManaged, "true", "bay.sandbox_id", "sb-b")); !slices.Equal(got, []string{idB}) {
		t.Errorf("by bay.managed: %v, want [%s]", got, idB)
	}
}

func (s *suite) testVolumes(t *testing.T) {
	d, ctx := s.h.Driver, t.Context()
	name := s.name("v")
	labels := s.labels("bay.cargo_id", "ws-"+s.run, bay.LabelManaged, "false")
	before := time.Now()
	ref, err := d.CreateVolume(ctx, name, labels)
	if err != nil {
		t.Fatalf("CreateVolume: %v", err)
	}
	t.Cleanup(func() {
		c, cancel := detached(t)
		defer cancel()
		_ = d.DeleteVolume(c, ref)
	})
	if ref == "" {
		t.Fatal("CreateVolume returned an empty ref")
	}
	again, err := d.CreateVolume(ctx, name, labels)
	if err != nil || again != ref {
		t.Fatalf("CreateVolume again = %q, %v; want %q, nil (idempotent)", again, err, ref)
	}
	v, err := d.InspectVolume(ctx, ref)
	if err != nil {
		t.Fatalf("InspectVolume: %v", err)
	}
	if v.Name != name || !maps.Equal(v.Labels, labels) {
		t.Errorf("InspectVolume = %+v, want name %s labels %v", v, name, labels)
	}
	if v.CreatedAt.IsZero() || v.CreatedAt.Before(before.Add(-time.Minute)) || v.CreatedAt.After(time.Now().Add(time.Minute)) {
		t.Errorf("volume CreatedAt = %v, want about %v", v.CreatedAt, before)
	}
	list, err := d.ListVolumes(ctx, s.labels("bay.cargo_id", "ws-"+s.run))
	if err != nil || len(list) != 1 || list[0].Name != name {
		t.Fatalf("ListVolumes(cargo) = %+v, %v; want [%s]", list, err, name)
	}
	list, err = d.ListVolumes(ctx, s.labels("bay.cargo_id", "ws-other"))
	if err != nil || len(list) != 0 {
		t.Fatalf("ListVolumes(other cargo) = %+v, %v; want none", list, err)
	}
	if err := d.DeleteVolume(ctx, ref); err != nil {
		t.Fatalf("DeleteVolume: %v", err)
	}
	if _, err := d.InspectVolume(ctx, ref); !bay.IsNotFound(err) {
		t.Fatalf("InspectVolume after delete: %v, want not_found", err)
	}
	if err := d.DeleteVolume(ctx, ref); err != nil {
		t.Fatalf("DeleteVolume of a deleted volume: %v, want success", err)
	}
}

func (s *suite) testVolumeInUse(t *testing.T) {
	d, ctx := s.h.Driver, t.Context()
	ref := s.volume(t, s.labels())
	spec := s.spec()
	spec.VolumeRef, spec.MountPath = ref, "/workspace"
	id := s.create(t, spec)
	if err := d.DeleteVolume(ctx, ref); !bay.IsConflict(err) {
		t.Fatalf("DeleteVolume of a volume used by a created container: %v, want conflict", err)
	}
	s.start(t, id)
	s.h.Kill(t, id)
	if err := d.DeleteVolume(ctx, ref); !bay.IsConflict(err) {
		t.Fatalf("DeleteVolume of a volume used by an exited container: %v, want conflict", err)
	}
	if err := d.RemoveContainer(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := d.DeleteVolume(ctx, ref); err != nil {
		t.Fatalf("DeleteVolume once the container is gone: %v", err)
	}
}

// networkNames lists the names of the networks carrying all of labels.
func (s *suite) networkNames(t *testing.T, labels map[string]string) []string {
	t.Helper()
	list, err := s.h.Driver.ListNetworks(t.Context(), labels)
	if err != nil {
		t.Fatalf("ListNetworks(%v): %v", labels, err)
	}
	var out []string
	for _, n := range list {
		out = append(out, n.Name)
	}
	slices.Sort(out)
	return out
}

func (s *suite) testNetworks(t *testing.T) {
	d, ctx := s.h.Driver, t.Context()
	labels1 := s.labels("bay.session_id", "sess-net1", bay.LabelManaged, "true")
	before := time.Now()
	net1 := s.network(t, "bay.session_id", "sess-net1", bay.LabelManaged, "true")
	if err := d.CreateNetwork(ctx, net1, labels1); err != nil {
		t.Fatalf("CreateNetwork again: %v, want success (idempotent)", err)
	}
	net2 := s.network(t, "bay.session_id", "sess-net2")

	list, err := d.ListNetworks(ctx, labels1)
	if err != nil {
		t.Fatalf("ListNetworks: %v", err)
	}
	if len(list) != 1 || list[0].Name != net1 || list[0].ID == "" {
		t.Fatalf("ListNetworks(%v) = %+v, want just %s with its id (once, though created twice)", labels1, list, net1)
	}
	for k, v := range labels1 {
		if list[0].Labels[k] != v {
			t.Errorf("network label %s = %q, want %q", k, list[0].Labels[k], v)
		}
	}
	if c := list[0].CreatedAt; c.IsZero() || c.Before(before.Add(-time.Minute)) || c.After(time.Now().Add(time.Minute)) {
		t.Errorf("network CreatedAt = %v, want about %v", c, before)
	}
	both := []string{net1, net2}
	slices.Sort(both)
	if got := s.networkNames(t, s.labels()); !slices.Equal(got, both) {
		t.Errorf("ListNetworks(run) = %v, want %v", got, both)
	}
	if got := s.networkNames(t, s.labels("bay.session_id", "sess-net2", bay.LabelManaged, "true")); len(got) != 0 {
		t.Errorf("ListNetworks with a label %s lacks = %v, want none (all labels must match)", net2, got)
	}
	if got := s.networkNames(t, s.labels("bay.session_id", "sess-other")); len(got) != 0 {
		t.Errorf("ListNetworks(other session) = %v, want none", got)
	}

	spec := s.spec()
	spec.Network = net1
	id := s.create(t, spec)
	s.start(t, id)
	if err := d.RemoveNetwork(ctx, net1); !bay.IsConflict(err) {
		t.Fatalf("RemoveNetwork with a running container attached: %v, want conflict", err)
	}
	if err := d.RemoveContainer(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := d.RemoveNetwork(ctx, net1); err != nil {
		t.Fatalf("RemoveNetwork: %v", err)
	}
	if got := s.networkNames(t, s.labels()); !slices.Equal(got, []string{net2}) {
		t.Errorf("ListNetworks after removing %s = %v, want [%s]", net1, got, net2)
	}
	if err := d.RemoveNetwork(ctx, net1); err != nil {
		t.Fatalf("RemoveNetwork of a removed network: %v, want success", err)
	}

	spec = s.spec()
	spec.Network = s.name("missing-n")
	id, err = d.CreateContainer(ctx, spec)
	if !bay.IsNotFound(err) {
		if id != "" {
			_ = d.RemoveContainer(context.WithoutCancel(ctx), id)
		}
		t.Fatalf("CreateContainer on a missing network: %v, want not_found", err)
	}
}

func (s *suite) testCancelled(t *testing.T) {
	d := s.h.Driver
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	spec := s.spec()
	id, err := d.CreateContainer(ctx, spec)
	if err == nil {
		_ = d.RemoveContainer(context.WithoutCancel(t.Context()), id)
		t.Fatal("CreateContainer with a cancelled context succeeded")
	}
	if !errors.Is(err, context.Canceled) {
		t.Errorf("CreateContainer with a cancelled context: %v, want context.Canceled in the chain", err)
	}
	if err := d.Ping(ctx); err == nil {
		t.Error("Ping with a cancelled context succeeded")
	}
}
