// Package drivertest is the one conformance suite of bay.Driver. Every implementation (the
// in-memory fake, the Docker driver, later Kubernetes) runs it through Run with a Harness, so
// that the fake the service tests rely on cannot drift from the real platform.
//
// Every object the suite creates carries a unique name and the label LabelTestRun=<run id>, and
// is removed in t.Cleanup on a detached context, so parallel runs against one engine do not
// collide and a failed run leaves nothing behind.
package drivertest

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
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
	// Image is present on the platform. Its process (internal/bay/drivertest/testimage) serves
	// GET /health, /whoami, /file and /fetch on RuntimePort.
	Image string
	// RuntimePort is the port the image listens on (default 8123).
	RuntimePort int
	// Kill kills a container's main process behind the driver's back (SIGKILL); id is an
	// InstanceContainer.ID.
	Kill func(t *testing.T, id string)
	// Effective reports the settings the platform actually applied to a container.
	Effective func(t *testing.T, id string) Effective
	// Live is false for an implementation whose endpoints serve nothing (the fake): the checks
	// that talk to the image are skipped for it, every other check runs.
	Live bool
	// HTTPClient reaches endpoints (default: a client with a 2 s timeout and no proxy).
	HTTPClient *http.Client
	// ReadyTimeout bounds the wait for a started container to answer /health (default 20 s).
	ReadyTimeout time.Duration
	// NodePidsLimit is set for a platform that bounds the processes of every instance alike
	// rather than per spec (Kubernetes: the kubelet's podPidsLimit); the pids checks then want
	// this value.
	NodePidsLimit int64
}

// Effective is the platform's view of one container's isolation settings.
type Effective struct {
	User        string
	CapDrop     []string
	CapAdd      []string
	SecurityOpt []string
	Privileged  bool
	PidsLimit   int64
	Memory      int64
	MemorySwap  int64
	NanoCPUs    int64
	// ReadonlyRootfs: the container cannot write its root filesystem.
	ReadonlyRootfs bool
	// TmpfsBytes maps each memory-backed writable mount to its size limit in bytes.
	TmpfsBytes map[string]int64
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
		{"InstanceLifecycle", s.testLifecycle},
		{"MultiContainer", s.testMultiContainer},
		{"PeersByName", s.testPeersByName},
		{"LateStart", s.testLateStart},
		{"LateStartHoldExpires", s.testLateStartHoldExpires},
		{"LateStartCancelled", s.testLateStartCancelled},
		{"DestroyDuringLateStart", s.testDestroyDuringLateStart},
		{"Hardening", s.testHardening},
		{"DefaultPidsLimit", s.testDefaultPidsLimit},
		{"NameConflict", s.testNameConflict},
		{"ImageMissingRollsBack", s.testImageMissing},
		{"VolumeMissing", s.testVolumeMissing},
		{"BadSpecs", s.testBadSpecs},
		{"MissingInstance", s.testMissingInstance},
		{"KilledBehindTheDriversBack", s.testKilled},
		{"DeathsAreReported", s.testDeaths},
		{"ListFiltersByAllLabels", s.testListInstances},
		{"Volumes", s.testVolumes},
		{"VolumeSize", s.testVolumeSize},
		{"SeccompUserNamespaces", s.testSeccompUserNamespaces},
		{"VolumeInUse", s.testVolumeInUse},
		{"CancelledContext", s.testCancelled},
		{"OneShot", s.testOneShot},
		{"OneShotBadSpecs", s.testOneShotBadSpecs},
		{"OneShotKilledWhenWaitEnds", s.testOneShotKilled},
		{"Usage", s.testUsage},
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

// container returns a valid container spec named name.
func (s *suite) container(name string) bay.ContainerSpec {
	return bay.ContainerSpec{
		Name:        name,
		RuntimeType: bay.RuntimeShip,
		Image:       s.h.Image,
		Env:         map[string]string{"DRIVERTEST": "1", "PORT": fmt.Sprint(s.h.RuntimePort)},
		Port:        s.h.RuntimePort,
		User:        "1000:1000",
	}
}

// spec returns a valid single-container instance spec with a unique name. The containers of
// a multi-container spec listen on consecutive ports: on Kubernetes they share one network.
func (s *suite) spec(containers ...string) bay.InstanceSpec {
	if len(containers) == 0 {
		containers = []string{"ship"}
	}
	spec := bay.InstanceSpec{Name: s.name("i"), Labels: s.labels(), MountPath: "/workspace"}
	for i, c := range containers {
		cs := s.container(c)
		cs.Port += i
		cs.Env["PORT"] = fmt.Sprint(cs.Port)
		spec.Containers = append(spec.Containers, cs)
	}
	return spec
}

func detached(t *testing.T) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(t.Context()), 60*time.Second)
}

// createCleaned creates an instance and registers its destruction, whatever the create returned.
func (s *suite) createCleaned(t *testing.T, ctx context.Context, spec bay.InstanceSpec) (bay.Instance, error) {
	inst, err := s.h.Driver.CreateInstance(ctx, spec)
	t.Cleanup(func() {
		dctx, cancel := detached(t)
		defer cancel()
		if err := s.h.Driver.DestroyInstance(dctx, spec.Name); err != nil {
			t.Errorf("cleanup: DestroyInstance(%s): %v", spec.Name, err)
		}
	})
	return inst, err
}

// create creates an instance, registers its destruction and waits for every endpoint.
func (s *suite) create(t *testing.T, spec bay.InstanceSpec) bay.Instance {
	t.Helper()
	inst, err := s.createCleaned(t, t.Context(), spec)
	if err != nil {
		t.Fatalf("CreateInstance(%s): %v", spec.Name, err)
	}
	if inst.Name != spec.Name || len(inst.Containers) != len(spec.Containers) {
		t.Fatalf("CreateInstance(%s) = %+v, want %d containers", spec.Name, inst, len(spec.Containers))
	}
	for i, c := range inst.Containers {
		if c.Name != spec.Containers[i].Name || c.RuntimeType != spec.Containers[i].RuntimeType || c.ID == "" {
			t.Errorf("container %d = %+v, want name %s runtime %s and an id (spec order)", i, c, spec.Containers[i].Name, spec.Containers[i].RuntimeType)
		}
		if c.State != bay.ContainerRunning {
			t.Errorf("container %s state after create = %q, want running", c.Name, c.State)
		}
		if _, err := url.Parse(c.Endpoint); err != nil || !strings.HasPrefix(c.Endpoint, "http://") {
			t.Fatalf("container %s endpoint %q is not an http URL", c.Name, c.Endpoint)
		}
		s.waitHealthy(t, c.Endpoint)
	}
	return inst
}

// waitHealthy polls GET <endpoint>/health until it answers 200 (live implementations only).
// This waits for a real process to listen; it tests no timing logic.
func (s *suite) waitHealthy(t *testing.T, endpoint string) {
	t.Helper()
	if !s.h.Live {
		return
	}
	ctx, cancel := context.WithTimeout(t.Context(), s.h.ReadyTimeout)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		_, last = s.get(ctx, endpoint+"/health")
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

func (s *suite) do(ctx context.Context, method, u string, body io.Reader) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, err
	}
	resp, err := s.httpc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		return b, fmt.Errorf("%s %s: status %d: %s", method, u, resp.StatusCode, b)
	}
	return b, nil
}

func (s *suite) get(ctx context.Context, u string) ([]byte, error) {
	return s.do(ctx, http.MethodGet, u, nil)
}

func (s *suite) volume(t *testing.T, labels map[string]string) string {
	t.Helper()
	ref, err := s.h.Driver.CreateVolume(t.Context(), bay.VolumeSpec{Name: s.name("v"), Labels: labels})
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

// sweep removes everything the run left behind (after failures), on a detached context.
func (s *suite) sweep(t *testing.T) {
	ctx, cancel := detached(t)
	defer cancel()
	d := s.h.Driver
	is, err := d.ListInstances(ctx, s.labels())
	if err != nil {
		t.Errorf("sweep: ListInstances: %v", err)
	}
	for _, i := range is {
		t.Errorf("sweep: instance %s was left behind", i.Name)
		if err := d.DestroyInstance(ctx, i.Name); err != nil {
			t.Errorf("sweep: DestroyInstance(%s): %v", i.Name, err)
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

// gone checks that nothing of the instance named name exists.
func (s *suite) gone(t *testing.T, name, marker string) {
	t.Helper()
	ctx := t.Context()
	if _, err := s.h.Driver.InspectInstance(ctx, name); !bay.IsNotFound(err) {
		t.Errorf("InspectInstance(%s) = %v, want not_found", name, err)
	}
	list, err := s.h.Driver.ListInstances(ctx, s.labels("drivertest.marker", marker))
	if err != nil || len(list) != 0 {
		t.Errorf("ListInstances(marker %s) = %+v, %v; want nothing left", marker, list, err)
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

func (s *suite) testLifecycle(t *testing.T) {
	d, ctx := s.h.Driver, t.Context()
	ref := s.volume(t, s.labels())
	spec := s.spec()
	spec.VolumeRef = ref
	spec.Labels = s.labels("bay.session_id", "sess-lifecycle-"+s.run)

	before := time.Now()
	inst := s.create(t, spec)
	want := maps.Clone(spec.Labels)
	want[bay.LabelManaged] = "true"
	got, err := d.InspectInstance(ctx, spec.Name)
	if err != nil {
		t.Fatalf("InspectInstance after create: %v", err)
	}
	if !got.Running() || got.Name != spec.Name || len(got.Containers) != 1 {
		t.Fatalf("InspectInstance = %+v, want one running container", got)
	}
	if got.Containers[0].ID != inst.Containers[0].ID || got.Containers[0].Endpoint != inst.Containers[0].Endpoint {
		t.Errorf("inspect container %+v differs from create's %+v", got.Containers[0], inst.Containers[0])
	}
	for k, v := range want {
		if got.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, got.Labels[k], v)
		}
	}
	if got.CreatedAt.IsZero() || got.CreatedAt.Before(before.Add(-time.Minute)) || got.CreatedAt.After(time.Now().Add(time.Minute)) {
		t.Errorf("CreatedAt = %v, want about %v", got.CreatedAt, before)
	}
	if s.h.Live {
		// The cargo volume is mounted read-write at MountPath, and the env reached the process.
		ep := inst.Containers[0].Endpoint
		if _, err := s.do(ctx, http.MethodPut, ep+"/file?path=/workspace/hello", strings.NewReader("hi")); err != nil {
			t.Fatalf("write into the cargo volume: %v", err)
		}
		b, err := s.get(ctx, ep+"/whoami")
		if err != nil || !strings.Contains(string(b), "DRIVERTEST=1") {
			t.Errorf("whoami = %s, %v; want the spec's env", b, err)
		}
	}

	list, err := d.ListInstances(ctx, s.labels("bay.session_id", "sess-lifecycle-"+s.run))
	if err != nil || len(list) != 1 || list[0].Name != spec.Name || !list[0].Running() {
		t.Fatalf("ListInstances = %+v, %v; want just %s running", list, err, spec.Name)
	}

	if err := d.DestroyInstance(ctx, spec.Name); err != nil {
		t.Fatalf("DestroyInstance: %v", err)
	}
	if _, err := d.InspectInstance(ctx, spec.Name); !bay.IsNotFound(err) {
		t.Fatalf("InspectInstance after destroy: %v, want not_found", err)
	}
	if err := d.DestroyInstance(ctx, spec.Name); err != nil {
		t.Fatalf("DestroyInstance of a destroyed instance: %v, want success", err)
	}
	if _, err := d.InspectVolume(ctx, ref); err != nil {
		t.Fatalf("the cargo volume must survive its instance: %v", err)
	}
	list, err = d.ListInstances(ctx, s.labels("bay.session_id", "sess-lifecycle-"+s.run))
	if err != nil || len(list) != 0 {
		t.Fatalf("ListInstances after destroy = %+v, %v; want empty", list, err)
	}
	// The files outlive the instance: a new one on the same volume sees them.
	if s.h.Live {
		again := s.spec()
		again.VolumeRef = ref
		inst := s.create(t, again)
		if b, err := s.get(ctx, inst.Containers[0].Endpoint+"/file?path=/workspace/hello"); err != nil || string(b) != "hi" {
			t.Errorf("file on the volume after a new instance = %q, %v; want hi", b, err)
		}
	}
}

func (s *suite) testMultiContainer(t *testing.T) {
	ctx := t.Context()
	ref := s.volume(t, s.labels())
	spec := s.spec("ship", "gull")
	spec.Containers[1].RuntimeType = bay.RuntimeGull
	spec.VolumeRef = ref
	inst := s.create(t, spec)
	if inst.Containers[0].Endpoint == inst.Containers[1].Endpoint {
		t.Fatalf("both containers report endpoint %s", inst.Containers[0].Endpoint)
	}
	if s.h.Live {
		a, b := inst.Containers[0].Endpoint, inst.Containers[1].Endpoint
		// One cargo for both.
		if _, err := s.do(ctx, http.MethodPut, a+"/file?path=/workspace/shared", strings.NewReader("from ship")); err != nil {
			t.Fatal(err)
		}
		if got, err := s.get(ctx, b+"/file?path=/workspace/shared"); err != nil || string(got) != "from ship" {
			t.Errorf("gull reads %q, %v; want the file ship wrote", got, err)
		}
	}
	s.reachByName(t, spec, inst)
	if err := s.h.Driver.DestroyInstance(ctx, spec.Name); err != nil {
		t.Fatalf("DestroyInstance: %v", err)
	}
	s.gone(t, spec.Name, "none")
}

// reachByName checks that each container of inst reaches every other one's runtime port by
// the other's container name (live implementations only).
func (s *suite) reachByName(t *testing.T, spec bay.InstanceSpec, inst bay.Instance) {
	t.Helper()
	if !s.h.Live {
		return
	}
	for i, from := range inst.Containers {
		for j, to := range spec.Containers {
			if i == j {
				continue
			}
			target := fmt.Sprintf("http://%s:%d/health", to.Name, to.Port)
			out, err := s.get(t.Context(), from.Endpoint+"/fetch?url="+url.QueryEscape(target))
			var res struct{ Status int }
			if err != nil || json.Unmarshal(out, &res) != nil || res.Status != 200 {
				t.Errorf("%s fetching %s: %s, %v; want status 200", from.Name, target, out, err)
			}
		}
	}
}

// testPeersByName: the containers of an instance reach each other by name whichever of them
// starts first, also once a late start has ended, and each keeps its own endpoint.
func (s *suite) testPeersByName(t *testing.T) {
	for _, tc := range []struct {
		name  string
		first int // the container marked StartFirst, -1 for none
		late  bool
	}{{"none first", -1, false}, {"second first", 1, false}, {"second first, late start", 1, true}} {
		t.Run(tc.name, func(t *testing.T) {
			spec := s.spec("ship", "gull", "extra")
			spec.Containers[1].RuntimeType = bay.RuntimeGull
			if tc.first >= 0 {
				spec.Containers[tc.first].StartFirst = true
			}
			spec.LateStart = tc.late
			inst, err := s.createCleaned(t, t.Context(), spec)
			if err != nil {
				t.Fatalf("CreateInstance: %v", err)
			}
			if inst.Late != nil {
				if inst, err = inst.Late.Wait(t.Context()); err != nil {
					t.Fatalf("late start: %v", err)
				}
			}
			seen := map[string]bool{}
			for _, c := range inst.Containers {
				if c.State != bay.ContainerRunning || !strings.HasPrefix(c.Endpoint, "http://") || seen[c.Endpoint] {
					t.Fatalf("container %+v: want running with an endpoint of its own (%+v)", c, inst)
				}
				seen[c.Endpoint] = true
				s.waitHealthy(t, c.Endpoint)
			}
			s.reachByName(t, spec, inst)
			got, err := s.h.Driver.InspectInstance(t.Context(), spec.Name)
			if err != nil || !got.Running() {
				t.Fatalf("InspectInstance = %+v, %v; want every container running", got, err)
			}
			for i, c := range got.Containers {
				if c.Endpoint != inst.Containers[i].Endpoint {
					t.Errorf("InspectInstance reports %s at %s, create at %s", c.Name, c.Endpoint, inst.Containers[i].Endpoint)
				}
			}
		})
	}
}

// lateSpec is a two-container spec whose second container (gull) starts first and whose
// first (ship, the primary) the driver may start after CreateInstance returned, held until
// Late.Begin for at most hold.
func (s *suite) lateSpec(marker string, hold time.Duration) bay.InstanceSpec {
	spec := s.spec("ship", "gull")
	spec.Labels = s.labels("drivertest.marker", marker)
	spec.Containers[1].RuntimeType = bay.RuntimeGull
	spec.Containers[1].StartFirst = true
	spec.LateStart = true
	spec.LateStartHold = hold
	return spec
}

// longHold holds a late start far longer than any of these tests waits: only Begin or the
// create's ctx ends it.
const longHold = 10 * time.Minute

// createLate creates spec and registers its destruction; it checks what every driver must
// report at once: the StartFirst container running with its endpoint, and the other either
// running too (a platform that starts them together: Late nil) or not yet started (Late set).
func (s *suite) createLate(t *testing.T, ctx context.Context, spec bay.InstanceSpec) bay.Instance {
	t.Helper()
	inst, err := s.createCleaned(t, ctx, spec)
	if err != nil {
		t.Fatalf("CreateInstance(%s): %v", spec.Name, err)
	}
	if len(inst.Containers) != 2 || inst.Containers[0].Name != "ship" || inst.Containers[1].Name != "gull" {
		t.Fatalf("CreateInstance = %+v, want ship and gull in spec order", inst)
	}
	if g := inst.Containers[1]; g.State != bay.ContainerRunning || !strings.HasPrefix(g.Endpoint, "http://") || g.ID == "" {
		t.Fatalf("StartFirst container after create = %+v, want running with an endpoint", g)
	}
	sh := inst.Containers[0]
	switch {
	case sh.ID == "":
		t.Errorf("late container %+v has no id", sh)
	case inst.Late == nil && (sh.State != bay.ContainerRunning || sh.Endpoint == ""):
		t.Errorf("without a late start, container %+v must run with an endpoint", sh)
	case inst.Late != nil && (sh.State == bay.ContainerRunning || sh.Endpoint != ""):
		t.Errorf("a late container is reported %+v before its start ended, want not running and no endpoint", sh)
	}
	return inst
}

// testLateStart: the late container is not started while the late start is held (the first
// serves meanwhile); Begin starts it.
func (s *suite) testLateStart(t *testing.T) {
	ctx := t.Context()
	marker := s.name("m")
	spec := s.lateSpec(marker, longHold)
	inst := s.createLate(t, ctx, spec)
	s.waitHealthy(t, inst.Containers[1].Endpoint)
	full := inst
	if inst.Late != nil {
		held, err := s.h.Driver.InspectInstance(ctx, spec.Name)
		if err != nil || len(held.Containers) != 2 || held.Containers[0].State == bay.ContainerRunning || held.Containers[1].State != bay.ContainerRunning {
			t.Fatalf("InspectInstance while the late start is held = %+v, %v; want ship not running, gull running", held, err)
		}
		select {
		case <-inst.Late.Done():
			t.Fatal("the late start ended while held")
		default:
		}
		inst.Late.Begin()
		inst.Late.Begin() // a second Begin does nothing
		if full, err = inst.Late.Wait(ctx); err != nil {
			t.Fatalf("late start: %v", err)
		}
		if full.Late != nil {
			t.Error("the instance a late start reports carries a late start again")
		}
	}
	if !full.Running() || len(full.Containers) != 2 {
		t.Fatalf("instance after the late start = %+v, want both running", full)
	}
	for i, c := range full.Containers {
		if c.ID != inst.Containers[i].ID || !strings.HasPrefix(c.Endpoint, "http://") {
			t.Errorf("container %d after the late start = %+v, want id %s and an endpoint", i, c, inst.Containers[i].ID)
		}
		s.waitHealthy(t, c.Endpoint)
	}
	got, err := s.h.Driver.InspectInstance(ctx, spec.Name)
	if err != nil || !got.Running() || got.Late != nil {
		t.Fatalf("InspectInstance after the late start = %+v, %v; want every container running", got, err)
	}
	if err := s.h.Driver.DestroyInstance(ctx, spec.Name); err != nil {
		t.Fatalf("DestroyInstance: %v", err)
	}
	s.gone(t, spec.Name, marker)
}

// testLateStartHoldExpires: a late start nobody lets begin starts once its hold has passed.
func (s *suite) testLateStartHoldExpires(t *testing.T) {
	ctx := t.Context()
	spec := s.lateSpec(s.name("m"), 300*time.Millisecond)
	inst := s.createLate(t, ctx, spec)
	if inst.Late == nil {
		return // started together
	}
	full, err := inst.Late.Wait(ctx)
	if err != nil || !full.Running() {
		t.Fatalf("late start without Begin = %+v, %v; want every container running once the hold passed", full, err)
	}
}

// testLateStartCancelled: CreateInstance's ctx ends while the late start is held (and once
// more while it starts). The late start fails and everything of the instance is removed, the
// started container included.
func (s *suite) testLateStartCancelled(t *testing.T) {
	for _, begin := range []bool{false, true} {
		marker := s.name("m")
		spec := s.lateSpec(marker, longHold)
		ctx, cancel := context.WithCancel(t.Context())
		inst := s.createLate(t, ctx, spec)
		if inst.Late == nil {
			cancel()
			return // started together; the ordinary cancellation case covers the rest
		}
		if begin {
			inst.Late.Begin()
		}
		cancel()
		_, err := inst.Late.Wait(t.Context())
		switch {
		case err == nil && begin:
			// The late start finished before the cancel reached it: a correct outcome.
			t.Log("the late start ended before the cancel; nothing to roll back")
			continue
		case err == nil:
			t.Fatal("a held late start succeeded after its create's ctx ended")
		case !errors.Is(err, context.Canceled):
			t.Logf("late start after the cancel: %v", err)
		}
		s.gone(t, spec.Name, marker)
	}
}

// testDestroyDuringLateStart: a DestroyInstance while the late start is held ends the late
// start before it returns (neither is left removing or starting containers of the other's, so
// the instance's volume is free at once) and leaves nothing.
func (s *suite) testDestroyDuringLateStart(t *testing.T) {
	ctx := t.Context()
	marker := s.name("m")
	spec := s.lateSpec(marker, longHold)
	inst := s.createLate(t, ctx, spec)
	if err := s.h.Driver.DestroyInstance(ctx, spec.Name); err != nil {
		t.Fatalf("DestroyInstance during the late start: %v", err)
	}
	if inst.Late != nil {
		select {
		case <-inst.Late.Done():
		default:
			t.Fatal("the late start is still under way after DestroyInstance returned")
		}
		if _, err := inst.Late.Wait(ctx); err == nil {
			t.Error("a late start ended by DestroyInstance reported success")
		}
	}
	s.gone(t, spec.Name, marker)
}

func (s *suite) testHardening(t *testing.T) {
	spec := s.spec()
	c := &spec.Containers[0]
	c.Limits = bay.Limits{MemoryBytes: 64 << 20, NanoCPUs: 500_000_000, PidsLimit: 100, TmpBytes: 16 << 20}
	c.CapAdd = []string{"SETUID", "SETGID", "KILL"}
	c.User = ""
	inst := s.create(t, spec)
	eff := s.h.Effective(t, inst.Containers[0].ID)
	if !slices.Contains(eff.CapDrop, "ALL") {
		t.Errorf("CapDrop = %v, want ALL", eff.CapDrop)
	}
	slices.Sort(eff.CapAdd)
	for i := range eff.CapAdd {
		eff.CapAdd[i] = strings.TrimPrefix(eff.CapAdd[i], "CAP_")
	}
	if !slices.Equal(eff.CapAdd, []string{"KILL", "SETGID", "SETUID"}) {
		t.Errorf("CapAdd = %v, want exactly the spec's", eff.CapAdd)
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
		t.Errorf("User = %q, want the default 1000:1000", eff.User)
	}
	if want := cmp.Or(s.h.NodePidsLimit, 100); eff.PidsLimit != want {
		t.Errorf("PidsLimit = %d, want %d", eff.PidsLimit, want)
	}
	if eff.Memory != c.Limits.MemoryBytes || eff.MemorySwap != c.Limits.MemoryBytes {
		t.Errorf("Memory/MemorySwap = %d/%d, want %d/%d (no swap beyond the limit)", eff.Memory, eff.MemorySwap, c.Limits.MemoryBytes, c.Limits.MemoryBytes)
	}
	if eff.NanoCPUs != c.Limits.NanoCPUs {
		t.Errorf("NanoCPUs = %d, want %d", eff.NanoCPUs, c.Limits.NanoCPUs)
	}
	// The disk a container can fill is bounded: no writable root filesystem, and the
	// temporary directories are as large as the spec says.
	if !eff.ReadonlyRootfs {
		t.Error("the root filesystem is writable")
	}
	for _, dir := range []string{"/tmp", "/var/tmp"} {
		if got := eff.TmpfsBytes[dir]; got != c.Limits.TmpBytes {
			t.Errorf("%s size = %d, want %d", dir, got, c.Limits.TmpBytes)
		}
	}
	if s.h.Live {
		ctx, ep := t.Context(), inst.Containers[0].Endpoint
		if _, err := s.do(ctx, http.MethodPut, ep+"/file?path=/probe", strings.NewReader("x")); err == nil ||
			!strings.Contains(err.Error(), "read-only file system") {
			t.Errorf("write to the root filesystem: %v, want read-only file system", err)
		}
		if _, err := s.do(ctx, http.MethodPut, ep+"/file?path=/tmp/small", bytes.NewReader(make([]byte, 1<<20))); err != nil {
			t.Errorf("write 1 MiB to /tmp: %v", err)
		}
		big := bytes.NewReader(make([]byte, c.Limits.TmpBytes+1<<20))
		if _, err := s.do(ctx, http.MethodPut, ep+"/file?path=/var/tmp/big", big); err == nil ||
			!strings.Contains(err.Error(), "no space left on device") {
			t.Errorf("write beyond /var/tmp's size: %v, want no space left on device", err)
		}
	}
	for _, ip := range eff.PublishedHostIPs {
		if !isLoopback(ip) {
			t.Errorf("a port is published on %q; runtime ports must be published on loopback only", ip)
		}
	}
}

func (s *suite) testDefaultPidsLimit(t *testing.T) {
	inst := s.create(t, s.spec())
	eff := s.h.Effective(t, inst.Containers[0].ID)
	if eff.PidsLimit <= 0 || eff.PidsLimit > 4096 {
		t.Errorf("PidsLimit with none in the spec = %d, want the driver default (256)", eff.PidsLimit)
	}
	if got := eff.TmpfsBytes["/tmp"]; got <= 0 || got > 1<<30 {
		t.Errorf("/tmp size with none in the spec = %d, want the driver default (256 MiB)", got)
	}
	if s.h.NodePidsLimit > 0 && eff.PidsLimit != s.h.NodePidsLimit {
		t.Errorf("PidsLimit = %d, want the node's %d", eff.PidsLimit, s.h.NodePidsLimit)
	}
}

func (s *suite) testNameConflict(t *testing.T) {
	spec := s.spec()
	first := s.create(t, spec)
	_, err := s.h.Driver.CreateInstance(t.Context(), spec)
	if !bay.IsConflict(err) {
		t.Fatalf("second CreateInstance with the same name: %v, want conflict", err)
	}
	// The failed create must not have rolled back the instance that holds the name.
	got, err := s.h.Driver.InspectInstance(t.Context(), spec.Name)
	if err != nil || !got.Running() || got.Containers[0].ID != first.Containers[0].ID {
		t.Fatalf("the first instance after a conflicting create: %+v, %v; want it untouched", got, err)
	}
}

func (s *suite) testImageMissing(t *testing.T) {
	marker := s.name("m")
	spec := s.spec("ship", "gull")
	spec.Labels = s.labels("drivertest.marker", marker)
	spec.Containers[1].Image = "shipyard-drivertest-missing:" + s.run
	_, err := s.h.Driver.CreateInstance(t.Context(), spec)
	if err == nil {
		t.Fatal("CreateInstance with a missing image succeeded")
	}
	if bay.IsConflict(err) || bay.IsNotFound(err) {
		t.Errorf("missing image classified as %s; it is a deployment problem, not a missing object", bay.ErrorCode(err))
	}
	if msg := err.Error(); !strings.Contains(msg, spec.Containers[1].Image) || !strings.Contains(msg, "not found locally") {
		t.Errorf("error %q should name the image and say it is not found locally", msg)
	}
	// All or nothing: the container that could be created is gone again.
	s.gone(t, spec.Name, marker)
}

func (s *suite) testVolumeMissing(t *testing.T) {
	marker := s.name("m")
	spec := s.spec()
	spec.Labels = s.labels("drivertest.marker", marker)
	spec.VolumeRef = s.name("missing-v")
	_, err := s.h.Driver.CreateInstance(t.Context(), spec)
	if !bay.IsNotFound(err) {
		t.Fatalf("CreateInstance with a missing volume: %v, want not_found (a platform must not create an empty one)", err)
	}
	if vs, _ := s.h.Driver.ListVolumes(t.Context(), nil); slices.ContainsFunc(vs, func(v bay.VolumeInfo) bool { return v.Name == spec.VolumeRef }) {
		_ = s.h.Driver.DeleteVolume(context.WithoutCancel(t.Context()), spec.VolumeRef)
		t.Fatal("the missing volume was created")
	}
	s.gone(t, spec.Name, marker)
}

func (s *suite) testBadSpecs(t *testing.T) {
	cases := map[string]func(*bay.InstanceSpec){
		"no containers":        func(sp *bay.InstanceSpec) { sp.Containers = nil },
		"no name":              func(sp *bay.InstanceSpec) { sp.Name = "" },
		"duplicate names":      func(sp *bay.InstanceSpec) { sp.Containers[1].Name = sp.Containers[0].Name },
		"no image":             func(sp *bay.InstanceSpec) { sp.Containers[1].Image = "" },
		"bad port":             func(sp *bay.InstanceSpec) { sp.Containers[0].Port = 70000 },
		"dangerous cap":        func(sp *bay.InstanceSpec) { sp.Containers[0].CapAdd = []string{"SYS_ADMIN"} },
		"unknown network mode": func(sp *bay.InstanceSpec) { sp.Network.Mode = "wide-open" },
		// The containers of an instance may share one network (a Pod): one port each.
		"one port for two": func(sp *bay.InstanceSpec) { sp.Containers[1].Port = sp.Containers[0].Port },
	}
	for name, mutate := range cases {
		marker := s.name("m")
		spec := s.spec("ship", "gull")
		spec.Labels = s.labels("drivertest.marker", marker)
		mutate(&spec)
		if _, err := s.h.Driver.CreateInstance(t.Context(), spec); err == nil {
			if spec.Name != "" {
				_ = s.h.Driver.DestroyInstance(context.WithoutCancel(t.Context()), spec.Name)
			}
			t.Errorf("%s: CreateInstance succeeded, want an error", name)
			continue
		}
		if spec.Name != "" {
			s.gone(t, spec.Name, marker)
		}
	}
}

func (s *suite) testMissingInstance(t *testing.T) {
	d, ctx := s.h.Driver, t.Context()
	missing := s.name("missing-i")
	if _, err := d.InspectInstance(ctx, missing); !bay.IsNotFound(err) {
		t.Errorf("InspectInstance(missing): %v, want not_found", err)
	}
	if err := d.DestroyInstance(ctx, missing); err != nil {
		t.Errorf("DestroyInstance(missing): %v, want success", err)
	}
}

func (s *suite) testKilled(t *testing.T) {
	d, ctx := s.h.Driver, t.Context()
	spec := s.spec("ship", "gull")
	inst := s.create(t, spec)
	s.h.Kill(t, inst.Containers[1].ID)
	got, err := d.InspectInstance(ctx, spec.Name)
	if err != nil {
		t.Fatalf("InspectInstance after a kill: %v", err)
	}
	if got.Running() {
		t.Fatalf("instance with a killed container reports running: %+v", got)
	}
	i := slices.IndexFunc(got.Containers, func(c bay.InstanceContainer) bool { return c.ID == inst.Containers[1].ID })
	switch {
	case i < 0:
		t.Fatalf("the killed container is not listed: %+v", got)
	case got.Containers[i].State != bay.ContainerExited:
		t.Errorf("killed container state = %q, want exited", got.Containers[i].State)
	case got.Containers[i].Endpoint != "":
		t.Errorf("endpoint of an exited container = %q, want empty", got.Containers[i].Endpoint)
	}
	if got.Containers[0].State != bay.ContainerRunning {
		t.Errorf("the other container = %q, want running", got.Containers[0].State)
	}
	if err := d.DestroyInstance(ctx, spec.Name); err != nil {
		t.Fatalf("DestroyInstance with an exited container: %v", err)
	}
	s.gone(t, spec.Name, "none")
}

func (s *suite) testDeaths(t *testing.T) {
	marker := s.name("m")
	labels := s.labels("drivertest.marker", marker)
	ctx, cancel := context.WithCancel(t.Context())
	died := make(chan string, 8)
	watching := make(chan error, 1)
	go func() {
		watching <- s.h.Driver.WatchDeaths(ctx, labels, func(name string) {
			select {
			case died <- name:
			default:
			}
		})
	}()
	// Another instance's death is not reported: only the labelled ones are watched.
	other := s.create(t, s.spec())
	spec := s.spec("ship", "gull")
	spec.Labels = labels
	inst := s.create(t, spec)
	// The watch subscribes asynchronously; a death before it does would be missed, which the
	// port allows, so give it a moment as a platform's event stream needs.
	time.Sleep(500 * time.Millisecond)
	s.h.Kill(t, other.Containers[0].ID)
	s.h.Kill(t, inst.Containers[1].ID)
	select {
	case name := <-died:
		if name != spec.Name {
			t.Errorf("died(%q), want %q", name, spec.Name)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no death reported within 10 s of a kill")
	}
	cancel()
	select {
	case err := <-watching:
		if err != nil {
			t.Errorf("WatchDeaths after its context ended: %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("WatchDeaths did not return after its context ended")
	}
	for {
		select {
		case name := <-died:
			if name != spec.Name {
				t.Errorf("died(%q): an instance without the watched labels was reported", name)
			}
			continue
		default:
		}
		break
	}
}

func (s *suite) testListInstances(t *testing.T) {
	d, ctx := s.h.Driver, t.Context()
	a, b := s.spec(), s.spec("ship", "gull")
	a.Labels = s.labels("bay.sandbox_id", "sb-a", "bay.profile_id", "p1")
	b.Labels = s.labels("bay.sandbox_id", "sb-b", "bay.profile_id", "p1")
	s.create(t, a)
	s.create(t, b)
	names := func(labels map[string]string) []string {
		t.Helper()
		list, err := d.ListInstances(ctx, labels)
		if err != nil {
			t.Fatalf("ListInstances(%v): %v", labels, err)
		}
		var out []string
		for _, i := range list {
			if !i.Running() {
				t.Errorf("instance %s listed as not running: %+v", i.Name, i)
			}
			out = append(out, i.Name)
		}
		slices.Sort(out)
		return out
	}
	both := []string{a.Name, b.Name}
	slices.Sort(both)
	if got := names(s.labels("bay.profile_id", "p1")); !slices.Equal(got, both) {
		t.Errorf("by profile: %v, want %v (once each, whatever their container count)", got, both)
	}
	if got := names(s.labels("bay.profile_id", "p1", "bay.sandbox_id", "sb-a")); !slices.Equal(got, []string{a.Name}) {
		t.Errorf("by profile and sandbox: %v, want [%s] (all labels must match)", got, a.Name)
	}
	if got := names(s.labels("bay.sandbox_id", "sb-c")); len(got) != 0 {
		t.Errorf("by unknown sandbox: %v, want none", got)
	}
	if got := names(s.labels(bay.LabelManaged, "true", "bay.sandbox_id", "sb-b")); !slices.Equal(got, []string{b.Name}) {
		t.Errorf("by bay.managed: %v, want [%s]", got, b.Name)
	}
}

func (s *suite) testVolumes(t *testing.T) {
	d, ctx := s.h.Driver, t.Context()
	name := s.name("v")
	labels := s.labels("bay.cargo_id", "ws-"+s.run, bay.LabelManaged, "false")
	before := time.Now()
	ref, err := d.CreateVolume(ctx, bay.VolumeSpec{Name: name, Labels: labels})
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
	again, err := d.CreateVolume(ctx, bay.VolumeSpec{Name: name, Labels: labels})
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

// testVolumeSize: a volume created with a size reports it, and on a live platform a sandbox
// cannot write beyond it (the host's disk is untouched) while what it wrote shows as used.
func (s *suite) testVolumeSize(t *testing.T) {
	d, ctx := s.h.Driver, t.Context()
	const size = 32 << 20
	labels := s.labels()
	ref, err := d.CreateVolume(ctx, bay.VolumeSpec{Name: s.name("v"), Labels: labels, SizeBytes: size})
	if err != nil {
		t.Fatalf("CreateVolume with a size: %v", err)
	}
	t.Cleanup(func() {
		c, cancel := detached(t)
		defer cancel()
		if err := d.DeleteVolume(c, ref); err != nil {
			t.Errorf("cleanup: DeleteVolume(%s): %v", ref, err)
		}
	})
	v, err := d.InspectVolume(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	// A filesystem keeps some of its size for itself.
	if v.SizeBytes < size*85/100 || v.SizeBytes > size {
		t.Errorf("SizeBytes = %d, want about %d", v.SizeBytes, size)
	}
	if !maps.Equal(v.Labels, labels) {
		t.Errorf("labels = %v, want exactly %v", v.Labels, labels)
	}
	if !s.h.Live {
		return
	}
	spec := s.spec()
	spec.VolumeRef = ref
	inst := s.create(t, spec)
	ep := inst.Containers[0].Endpoint
	if _, err := s.do(ctx, http.MethodPut, ep+"/file?path=/workspace/small", bytes.NewReader(make([]byte, 4<<20))); err != nil {
		t.Fatalf("write 4 MiB into a 32 MiB cargo: %v", err)
	}
	if _, err := s.do(ctx, http.MethodPut, ep+"/file?path=/workspace/big", bytes.NewReader(make([]byte, size))); err == nil ||
		!strings.Contains(err.Error(), "no space left on device") {
		t.Errorf("write beyond the cargo's size: %v, want no space left on device", err)
	}
	// -1: the platform cannot tell cheaply (the port allows it; Kubernetes); never a wrong number.
	if v, err = d.InspectVolume(ctx, ref); err != nil || (v.UsedBytes != -1 && (v.UsedBytes < 4<<20 || v.UsedBytes > size)) {
		t.Errorf("UsedBytes = %d (%v), want between 4 MiB and the size, or -1", v.UsedBytes, err)
	}
	// The volume keeps its bound and its content across instances.
	if err := d.DestroyInstance(ctx, spec.Name); err != nil {
		t.Fatal(err)
	}
	spec.Name = s.name("i")
	inst = s.create(t, spec)
	if b, err := s.get(ctx, inst.Containers[0].Endpoint+"/file?path=/workspace/small"); err != nil || len(b) != 4<<20 {
		t.Errorf("the cargo's file in the next instance: %d bytes, %v", len(b), err)
	}
}

// testSeccompUserNamespaces: by default a container cannot make user namespaces (the
// platform's filter refuses it without capabilities); a spec asking for
// SeccompUserNamespaces can, and keeps every other hardening.
func (s *suite) testSeccompUserNamespaces(t *testing.T) {
	def := s.create(t, s.spec())
	spec := s.spec()
	spec.Containers[0].Seccomp = bay.SeccompUserNamespaces
	opted := s.create(t, spec)
	eff := s.h.Effective(t, opted.Containers[0].ID)
	if !slices.Contains(eff.CapDrop, "ALL") || len(eff.CapAdd) != 0 || eff.Privileged ||
		!slices.ContainsFunc(eff.SecurityOpt, func(o string) bool { return strings.HasPrefix(o, "no-new-privileges") }) {
		t.Errorf("the opted-in container lost its hardening: %+v", eff)
	}
	bad := s.spec()
	bad.Containers[0].Seccomp = "unconfined"
	if _, err := s.h.Driver.CreateInstance(t.Context(), bad); err == nil {
		_ = s.h.Driver.DestroyInstance(t.Context(), bad.Name)
		t.Error("a spec asking for an unconfined filter was accepted")
	}
	if !s.h.Live {
		return
	}
	ctx := t.Context()
	if _, err := s.do(ctx, http.MethodPost, def.Containers[0].Endpoint+"/userns", nil); err == nil {
		t.Error("a default container made a user namespace")
	}
	if _, err := s.do(ctx, http.MethodPost, opted.Containers[0].Endpoint+"/userns", nil); err != nil {
		t.Errorf("the opted-in container cannot make a user namespace: %v", err)
	}
}

func (s *suite) testVolumeInUse(t *testing.T) {
	d, ctx := s.h.Driver, t.Context()
	ref := s.volume(t, s.labels())
	spec := s.spec()
	spec.VolumeRef = ref
	inst := s.create(t, spec)
	if err := d.DeleteVolume(ctx, ref); !bay.IsConflict(err) {
		t.Fatalf("DeleteVolume of a volume used by a running instance: %v, want conflict", err)
	}
	s.h.Kill(t, inst.Containers[0].ID)
	if err := d.DeleteVolume(ctx, ref); !bay.IsConflict(err) {
		t.Fatalf("DeleteVolume of a volume used by an exited container: %v, want conflict", err)
	}
	if err := d.DestroyInstance(ctx, spec.Name); err != nil {
		t.Fatal(err)
	}
	if err := d.DeleteVolume(ctx, ref); err != nil {
		t.Fatalf("DeleteVolume once the instance is gone: %v", err)
	}
}

func (s *suite) testCancelled(t *testing.T) {
	d := s.h.Driver
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	marker := s.name("m")
	spec := s.spec()
	spec.Labels = s.labels("drivertest.marker", marker)
	_, err := d.CreateInstance(ctx, spec)
	if err == nil {
		_ = d.DestroyInstance(context.WithoutCancel(t.Context()), spec.Name)
		t.Fatal("CreateInstance with a cancelled context succeeded")
	}
	if !errors.Is(err, context.Canceled) {
		t.Errorf("CreateInstance with a cancelled context: %v, want context.Canceled in the chain", err)
	}
	s.gone(t, spec.Name, marker)
	if err := d.Ping(ctx); err == nil {
		t.Error("Ping with a cancelled context succeeded")
	}
}

// oneShotSpec is a one-shot instance without network or volume running the test image's
// oneshot mode: it prints its uid and network interfaces and out on stdout, errText on stderr,
// and exits with code.
func (s *suite) oneShotSpec(out, errText string, code int) bay.InstanceSpec {
	return bay.InstanceSpec{
		Name: s.name("o"), Labels: s.labels(), Network: bay.NetworkPolicy{Mode: bay.NetworkNone},
		Containers: []bay.ContainerSpec{{
			Name: "exec", RuntimeType: "exec", Image: s.h.Image, User: "1000:1000",
			Command: []string{"/server", "oneshot", out, errText, fmt.Sprint(code)},
			WorkDir: "/workspace", Limits: bay.Limits{PidsLimit: 64, MemoryBytes: 64 << 20},
		}},
	}
}

// testOneShot: a one-shot runs its argv as uid 1000 with loopback only and no capability; its
// stdout and stderr come back apart, with its exit code, and again on a second wait.
func (s *suite) testOneShot(t *testing.T) {
	d, ctx := s.h.Driver, t.Context()
	spec := s.oneShotSpec("hello\n", "oops", 3)
	inst, err := d.CreateInstance(ctx, spec)
	t.Cleanup(func() {
		ctx, cancel := detached(t)
		defer cancel()
		if err := d.DestroyInstance(ctx, spec.Name); err != nil {
			t.Errorf("cleanup: DestroyInstance(%s): %v", spec.Name, err)
		}
	})
	if err != nil {
		t.Fatalf("CreateInstance(one-shot): %v", err)
	}
	if len(inst.Containers) != 1 || inst.Containers[0].Endpoint != "" {
		t.Fatalf("one-shot instance = %+v, want one container without an endpoint", inst)
	}
	eff := s.h.Effective(t, inst.Containers[0].ID)
	if eff.User != "1000:1000" || !slices.Equal(eff.CapDrop, []string{"ALL"}) || len(eff.CapAdd) != 0 || eff.Privileged {
		t.Errorf("one-shot hardening = %+v, want 1000:1000, all caps dropped, none added", eff)
	}
	for round := 1; round <= 2; round++ {
		var stdout, stderr strings.Builder
		exit, err := d.WaitInstance(ctx, spec.Name, &stdout, &stderr)
		if err != nil {
			t.Fatalf("WaitInstance (round %d): %v", round, err)
		}
		want := "uid=1000 ifaces=lo\nhello\n"
		if exit.Code != 3 || exit.OOMKilled || stdout.String() != want || stderr.String() != "oops" {
			t.Errorf("round %d: exit %+v stdout %q stderr %q, want code 3, %q, %q", round, exit, stdout.String(), stderr.String(), want, "oops")
		}
	}
	if err := d.DestroyInstance(ctx, spec.Name); err != nil {
		t.Fatalf("DestroyInstance(one-shot): %v", err)
	}
	if _, err := d.WaitInstance(ctx, spec.Name, io.Discard, io.Discard); !bay.IsNotFound(err) {
		t.Errorf("WaitInstance(destroyed): %v, want not_found", err)
	}
}

// testOneShotBadSpecs: a one-shot with a runtime port or a capability, and network none with
// two containers, are refused and leave nothing behind.
func (s *suite) testOneShotBadSpecs(t *testing.T) {
	cases := map[string]func(*bay.InstanceSpec){
		"port":             func(sp *bay.InstanceSpec) { sp.Containers[0].Port = 8123 },
		"capability":       func(sp *bay.InstanceSpec) { sp.Containers[0].CapAdd = []string{"KILL"} },
		"relative workdir": func(sp *bay.InstanceSpec) { sp.Containers[0].WorkDir = "work" },
		"none with two": func(sp *bay.InstanceSpec) {
			c := sp.Containers[0]
			c.Name = "second"
			sp.Containers = append(sp.Containers, c)
		},
	}
	for name, mutate := range cases {
		marker := s.name("m")
		spec := s.oneShotSpec("", "", 0)
		spec.Labels = s.labels("drivertest.marker", marker)
		mutate(&spec)
		if _, err := s.h.Driver.CreateInstance(t.Context(), spec); err == nil {
			_ = s.h.Driver.DestroyInstance(context.WithoutCancel(t.Context()), spec.Name)
			t.Errorf("%s: CreateInstance succeeded, want an error", name)
			continue
		}
		s.gone(t, spec.Name, marker)
	}
}

// testOneShotKilled: when the wait's context ends first, WaitInstance kills the process, still
// returns the output it wrote, and an error wrapping the context's; the container has stopped.
func (s *suite) testOneShotKilled(t *testing.T) {
	d := s.h.Driver
	spec := s.oneShotSpec("partial\n", "", 0)
	spec.Containers[0].Command = append(spec.Containers[0].Command, "600000")
	if _, err := d.CreateInstance(t.Context(), spec); err != nil {
		t.Fatalf("CreateInstance(one-shot): %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := detached(t)
		defer cancel()
		if err := d.DestroyInstance(ctx, spec.Name); err != nil {
			t.Errorf("cleanup: DestroyInstance(%s): %v", spec.Name, err)
		}
	})
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	var stdout strings.Builder
	start := time.Now()
	_, err := d.WaitInstance(ctx, spec.Name, &stdout, io.Discard)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitInstance past its deadline: %v, want an error wrapping context.DeadlineExceeded", err)
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("WaitInstance returned %v after its deadline", took)
	}
	if !strings.HasSuffix(stdout.String(), "partial\n") {
		t.Errorf("output of the killed one-shot = %q, want it to end with %q", stdout.String(), "partial\n")
	}
	inst, err := d.InspectInstance(t.Context(), spec.Name)
	if err != nil {
		t.Fatalf("InspectInstance(killed one-shot): %v", err)
	}
	if c := inst.Containers[0]; c.State == bay.ContainerRunning {
		t.Errorf("the one-shot still runs after the wait ended: %+v", c)
	}
}
