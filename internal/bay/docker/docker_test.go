package docker_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/docker"
	"github.com/shipyard-dev/shipyard/internal/bay/drivertest"
	"github.com/shipyard-dev/shipyard/internal/bay/drivertest/testimage"
	"github.com/shipyard-dev/shipyard/internal/imagebuild"
)

// engine is the shared state of the tests against the real engine.
var engine struct {
	once  sync.Once
	cli   *client.Client
	image string
	err   error
}

// requireEngine returns a raw client and the test image. An unreachable engine fails the test:
// only SHIPYARD_SKIP_DOCKER=1, set explicitly, turns that into a skip.
func requireEngine(t testing.TB) (*client.Client, string) {
	t.Helper()
	engine.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cli, err := client.New(client.WithHost(docker.DefaultSocket))
		if err != nil {
			engine.err = err
			return
		}
		if _, err := cli.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
			engine.err = fmt.Errorf("docker engine at %s unreachable: %w", docker.DefaultSocket, err)
			return
		}
		engine.cli = cli
		engine.image, engine.err = testimage.Ensure(ctx, cli)
	})
	if engine.err != nil {
		if os.Getenv("SHIPYARD_SKIP_DOCKER") == "1" {
			t.Skipf("SHIPYARD_SKIP_DOCKER=1: %v", engine.err)
		}
		t.Fatalf("the Docker driver tests need a running engine (set SHIPYARD_SKIP_DOCKER=1 to skip): %v", engine.err)
	}
	return engine.cli, engine.image
}

func newDriver(t *testing.T, cfg docker.Config) *docker.Driver {
	t.Helper()
	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	d, err := docker.New(cfg, log)
	if err != nil {
		t.Fatalf("docker.New: %v", err)
	}
	t.Cleanup(func() { d.Close() })
	if err := d.Ping(t.Context()); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	return d
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func harness(t *testing.T, cli *client.Client, d *docker.Driver, image string) drivertest.Harness {
	return drivertest.Harness{
		Driver: d,
		Image:  image,
		Live:   true,
		Kill: func(t *testing.T, id string) {
			if _, err := cli.ContainerKill(t.Context(), id, client.ContainerKillOptions{Signal: "KILL"}); err != nil {
				t.Fatalf("kill %s: %v", id, err)
			}
			// The kill is asynchronous: wait for the engine to record the exit.
			waitRes := cli.ContainerWait(t.Context(), id, client.ContainerWaitOptions{})
			select {
			case <-waitRes.Result:
			case err := <-waitRes.Error:
				t.Fatalf("wait %s: %v", id, err)
			}
		},
		Effective: func(t *testing.T, id string) drivertest.Effective { return effective(t, cli, id) },
	}
}

func effective(t *testing.T, cli *client.Client, id string) drivertest.Effective {
	t.Helper()
	res, err := cli.ContainerInspect(t.Context(), id, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatalf("inspect %s: %v", id, err)
	}
	c := res.Container
	eff := drivertest.Effective{
		User:        c.Config.User,
		CapDrop:     c.HostConfig.CapDrop,
		CapAdd:      c.HostConfig.CapAdd,
		SecurityOpt: c.HostConfig.SecurityOpt,
		Privileged:  c.HostConfig.Privileged,
		Memory:      c.HostConfig.Memory,
		MemorySwap:  c.HostConfig.MemorySwap,
		NanoCPUs:    c.HostConfig.NanoCPUs,
	}
	if c.HostConfig.PidsLimit != nil {
		eff.PidsLimit = *c.HostConfig.PidsLimit
	}
	eff.ReadonlyRootfs = c.HostConfig.ReadonlyRootfs
	eff.TmpfsBytes = map[string]int64{}
	for dir, opts := range c.HostConfig.Tmpfs {
		for _, o := range strings.Split(opts, ",") {
			if v, ok := strings.CutPrefix(o, "size="); ok {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					t.Fatalf("tmpfs %s: size %q", dir, v)
				}
				eff.TmpfsBytes[dir] = n
			}
		}
	}
	addr := func(b interface{ String() string }, valid bool) string {
		if !valid {
			return ""
		}
		return b.String()
	}
	for _, bs := range c.HostConfig.PortBindings {
		for _, b := range bs {
			eff.PublishedHostIPs = append(eff.PublishedHostIPs, addr(b.HostIP, b.HostIP.IsValid()))
		}
	}
	if c.NetworkSettings != nil {
		for _, bs := range c.NetworkSettings.Ports {
			for _, b := range bs {
				eff.PublishedHostIPs = append(eff.PublishedHostIPs, addr(b.HostIP, b.HostIP.IsValid()))
			}
		}
	}
	return eff
}

func modeConfig(mode docker.ConnectMode) docker.Config {
	cfg := docker.DefaultConfig()
	cfg.ConnectMode = mode
	return cfg
}

// TestConformance runs the driver suite in every connect mode.
func TestConformance(t *testing.T) {
	cli, image := requireEngine(t)
	for _, mode := range []docker.ConnectMode{docker.ConnectContainerNetwork, docker.ConnectHostPort, docker.ConnectAuto} {
		t.Run(string(mode), func(t *testing.T) {
			cfg := modeConfig(mode)
			// Bounded cargos are required here: a host where bay cannot make them fails the
			// suite instead of passing it with unbounded volumes.
			cfg.CargoQuota, cfg.CargoDir = docker.CargoQuotaLoop, t.TempDir()
			drivertest.Run(t, harness(t, cli, newDriver(t, cfg), image))
		})
	}
}

// fixture creates and starts one container with the test image and removes it at the end.
type fixture struct {
	t     *testing.T
	d     *docker.Driver
	cli   *client.Client
	image string
	run   string
}

func newFixture(t *testing.T, cfg docker.Config) *fixture {
	cli, image := requireEngine(t)
	return &fixture{t: t, d: newDriver(t, cfg), cli: cli, image: image, run: fmt.Sprintf("%d", time.Now().UnixNano())}
}

// spec is a single-container instance of the test image.
func (f *fixture) spec(suffix string) bay.InstanceSpec {
	return bay.InstanceSpec{
		Name:      "drivertest-" + f.run + "-" + suffix,
		Labels:    map[string]string{drivertest.LabelTestRun: f.run},
		MountPath: "/workspace",
		Containers: []bay.ContainerSpec{{
			Name: "ship", RuntimeType: bay.RuntimeShip, Image: f.image, Port: testimage.Port, User: "1000:1000",
		}},
	}
}

// withPeer is spec with a second container of the test image, "gull", listening on the next
// port: the containers of an instance share one network namespace.
func withPeer(spec bay.InstanceSpec) bay.InstanceSpec {
	gull := spec.Containers[0]
	gull.Name, gull.Port = "gull", testimage.Port+1
	gull.Env = map[string]string{"PORT": strconv.Itoa(gull.Port)}
	spec.Containers = append(slices.Clone(spec.Containers), gull)
	return spec
}

func (f *fixture) detached() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(f.t.Context()), 30*time.Second)
}

// createStart creates the instance, waits for its first container and returns that one's id
// and endpoint.
func (f *fixture) createStart(spec bay.InstanceSpec) (id, endpoint string) {
	t := f.t
	t.Helper()
	inst := f.create(f.d, spec)
	for _, c := range inst.Containers {
		waitHealthy(t, c.Endpoint)
	}
	return inst.Containers[0].ID, inst.Containers[0].Endpoint
}

// create creates the instance with driver d and destroys it at the end.
func (f *fixture) create(d *docker.Driver, spec bay.InstanceSpec) bay.Instance {
	t := f.t
	t.Helper()
	t.Cleanup(func() {
		ctx, cancel := f.detached()
		defer cancel()
		if err := d.DestroyInstance(ctx, spec.Name); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	inst, err := d.CreateInstance(t.Context(), spec)
	if err != nil {
		t.Fatalf("CreateInstance: %v", err)
	}
	return inst
}

func (f *fixture) volume(name string) string {
	t := f.t
	ref, err := f.d.CreateVolume(t.Context(), bay.VolumeSpec{Name: "drivertest-" + f.run + "-" + name, Labels: map[string]string{drivertest.LabelTestRun: f.run}})
	if err != nil {
		t.Fatalf("CreateVolume: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := f.detached()
		defer cancel()
		if err := f.d.DeleteVolume(ctx, ref); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	return ref
}

// network creates a bridge network on the engine (as an operator would for
// driver.docker.network) and removes it at the end.
func (f *fixture) network(name string) string {
	t := f.t
	name = "drivertest-" + f.run + "-" + name
	if _, err := f.cli.NetworkCreate(t.Context(), name, client.NetworkCreateOptions{Driver: "bridge",
		Labels: map[string]string{drivertest.LabelTestRun: f.run}}); err != nil {
		t.Fatalf("NetworkCreate: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := f.detached()
		defer cancel()
		if _, err := f.cli.NetworkRemove(ctx, name, client.NetworkRemoveOptions{}); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	return name
}

var httpc = &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{Proxy: nil}}

func waitHealthy(t *testing.T, endpoint string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := httpc.Get(endpoint + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
			err = fmt.Errorf("status %d", resp.StatusCode)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never became healthy: %v", endpoint, err)
		}
		time.Sleep(50 * time.Millisecond) // waiting for a real process to listen; no timing logic under test
	}
}

func do(t *testing.T, method, u string, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), method, u, strings.NewReader(body))
	resp, err := httpc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func endpointHost(t *testing.T, endpoint string) (host, port string) {
	t.Helper()
	u, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	return u.Hostname(), u.Port()
}

// TestEndpointModes checks how each connect mode reaches the runtime from this host.
func TestEndpointModes(t *testing.T) {
	t.Run("container_network uses the container IP and publishes nothing", func(t *testing.T) {
		f := newFixture(t, modeConfig(docker.ConnectContainerNetwork))
		id, endpoint := f.createStart(f.spec("cn"))
		host, port := endpointHost(t, endpoint)
		if ip := net.ParseIP(host); ip == nil || ip.IsLoopback() || port != "8123" {
			t.Fatalf("endpoint %s: want http://<container ip>:8123", endpoint)
		}
		if eff := effective(t, f.cli, id); len(eff.PublishedHostIPs) != 0 {
			t.Fatalf("published %v in container_network mode", eff.PublishedHostIPs)
		}
	})
	t.Run("host_port publishes on 127.0.0.1 only", func(t *testing.T) {
		f := newFixture(t, modeConfig(docker.ConnectHostPort))
		id, endpoint := f.createStart(f.spec("hp"))
		host, port := endpointHost(t, endpoint)
		if host != "127.0.0.1" || port == "" || port == "8123" {
			t.Fatalf("endpoint %s: want http://127.0.0.1:<random port>", endpoint)
		}
		eff := effective(t, f.cli, id)
		if len(eff.PublishedHostIPs) == 0 {
			t.Fatal("nothing published in host_port mode")
		}
		for _, ip := range eff.PublishedHostIPs {
			if ip != "127.0.0.1" {
				t.Fatalf("published on %q, want 127.0.0.1 only (%v)", ip, eff.PublishedHostIPs)
			}
		}
		// Not reachable on the host's other addresses.
		if addr := nonLoopbackAddr(t); addr != "" {
			c, err := net.DialTimeout("tcp", net.JoinHostPort(addr, port), time.Second)
			if err == nil {
				c.Close()
				t.Fatalf("runtime port reachable on %s:%s", addr, port)
			}
		}
	})
	t.Run("host_port with a fixed port", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		free := l.Addr().(*net.TCPAddr).Port
		l.Close()
		cfg := modeConfig(docker.ConnectHostPort)
		cfg.HostPort = free
		f := newFixture(t, cfg)
		_, endpoint := f.createStart(f.spec("fixed"))
		if want := fmt.Sprintf("http://127.0.0.1:%d", free); endpoint != want {
			t.Fatalf("endpoint %s, want %s", endpoint, want)
		}
	})
	t.Run("auto prefers the container IP", func(t *testing.T) {
		f := newFixture(t, modeConfig(docker.ConnectAuto))
		id, endpoint := f.createStart(f.spec("auto"))
		if host, _ := endpointHost(t, endpoint); net.ParseIP(host).IsLoopback() {
			t.Fatalf("endpoint %s: auto mode should use the container IP", endpoint)
		}
		for _, ip := range effective(t, f.cli, id).PublishedHostIPs {
			if ip != "127.0.0.1" {
				t.Fatalf("published on %q in auto mode", ip)
			}
		}
		// ListInstances resolves the same endpoint from the engine's list.
		list, err := f.d.ListInstances(t.Context(), map[string]string{drivertest.LabelTestRun: f.run})
		if err != nil || len(list) != 1 || list[0].Containers[0].Endpoint != endpoint {
			t.Fatalf("ListInstances = %+v, %v; want endpoint %s", list, err, endpoint)
		}
	})
}

func nonLoopbackAddr(t *testing.T) string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return ""
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
			return n.IP.String()
		}
	}
	return ""
}

// TestRuntimeSees checks what the process in the container gets: user, env, hostname, a
// writable workspace volume, read-only extra mounts and a writable /tmp.
func TestRuntimeSees(t *testing.T) {
	f := newFixture(t, modeConfig(docker.ConnectAuto))
	ref := f.volume("ws")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "SKILL.md"), []byte("# skill"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	spec := f.spec("sees")
	spec.Containers[0].Env = map[string]string{"BAY_SANDBOX_ID": "sandbox-1", "URLISH": "http://a:b@c:1/x"}
	spec.VolumeRef = ref
	spec.Containers[0].Mounts = []bay.Mount{{Source: dir, Target: "/skills", ReadOnly: true}}
	_, endpoint := f.createStart(spec)

	code, body := do(t, "GET", endpoint+"/whoami", "")
	var who struct {
		UID, GID int
		Hostname string
		Env      []string
	}
	if err := json.Unmarshal([]byte(body), &who); code != 200 || err != nil {
		t.Fatalf("whoami: %d %s %v", code, body, err)
	}
	if who.UID != 1000 || who.GID != 1000 || who.Hostname != "sandbox" {
		t.Errorf("whoami = %+v, want uid/gid 1000, hostname sandbox", who)
	}
	for _, kv := range []string{"BAY_SANDBOX_ID=sandbox-1", "URLISH=http://a:b@c:1/x"} {
		if !slices.Contains(who.Env, kv) {
			t.Errorf("env %v lacks %s", who.Env, kv)
		}
	}
	if code, body := do(t, "PUT", endpoint+"/file?path=/workspace/hello.txt", "hi"); code != 204 {
		t.Fatalf("write to the workspace volume: %d %s", code, body)
	}
	if code, body := do(t, "GET", endpoint+"/file?path=/workspace/hello.txt", ""); code != 200 || body != "hi" {
		t.Fatalf("read back: %d %q", code, body)
	}
	if code, body := do(t, "GET", endpoint+"/file?path=/skills/SKILL.md", ""); code != 200 || body != "# skill" {
		t.Fatalf("read the extra mount: %d %q", code, body)
	}
	if code, _ := do(t, "PUT", endpoint+"/file?path=/skills/evil.md", "x"); code == 204 {
		t.Fatal("wrote to a read-only mount")
	}
	if code, body := do(t, "PUT", endpoint+"/file?path=/tmp/scratch", "x"); code != 204 {
		t.Fatalf("/tmp must stay writable (rootfs not read-only): %d %s", code, body)
	}
}

// TestConfiguredNetwork: the network owner of a multi-container instance (here the first)
// joins the configured network alone, and every container's endpoint is the owner's address on
// it with the container's own port.
func TestConfiguredNetwork(t *testing.T) {
	probe := newFixture(t, modeConfig(docker.ConnectContainerNetwork))
	configured := probe.network("cfg")

	cfg := modeConfig(docker.ConnectContainerNetwork)
	cfg.Network = configured
	f := newFixture(t, cfg)
	f.run = probe.run
	spec := withPeer(f.spec("two-nets"))
	inst := f.create(f.d, spec)

	res, err := f.cli.ContainerInspect(t.Context(), inst.Containers[0].ID, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nets := res.Container.NetworkSettings.Networks
	if nets[configured] == nil || len(nets) != 1 {
		t.Fatalf("networks = %v, want %s alone", slices.Collect(maps.Keys(nets)), configured)
	}
	for i, c := range inst.Containers {
		waitHealthy(t, c.Endpoint)
		host, port := endpointHost(t, c.Endpoint)
		if want := nets[configured].IPAddress.String(); host != want || port != strconv.Itoa(spec.Containers[i].Port) {
			t.Errorf("%s: endpoint %s, want the owner's IP on the configured network %s and port %d", c.Name, c.Endpoint, want, spec.Containers[i].Port)
		}
	}
}

// TestCreateRollsBack: when a create fails on the missing configured network, everything is
// removed again, the container created beside it in the owner's network namespace included (and,
// under runsc, the instance's own network made meanwhile).
func TestCreateRollsBack(t *testing.T) {
	probe := newFixture(t, modeConfig(docker.ConnectContainerNetwork))
	cfg := modeConfig(docker.ConnectContainerNetwork)
	cfg.Network = "drivertest-" + probe.run + "-missing"
	cfg.NamesDir = filepath.Join(t.TempDir(), "names")
	f := newFixture(t, cfg)
	f.run = probe.run
	for _, runtime := range []string{bay.ContainerRuntimeRunc, bay.ContainerRuntimeRunsc} {
		spec := withPeer(f.spec("rollback-" + runtime))
		spec.Runtime = runtime
		createRollsBack(t, f, spec)
	}
}

func createRollsBack(t *testing.T, f *fixture, spec bay.InstanceSpec) {
	t.Helper()
	_, err := f.d.CreateInstance(t.Context(), spec)
	if !bay.IsNotFound(err) {
		f.d.DestroyInstance(context.WithoutCancel(t.Context()), spec.Name)
		t.Fatalf("create with a missing configured network: %v, want not_found", err)
	}
	list, err := f.d.ListInstances(t.Context(), map[string]string{drivertest.LabelTestRun: f.run})
	if err != nil || len(list) != 0 {
		f.d.DestroyInstance(context.WithoutCancel(t.Context()), spec.Name)
		t.Fatalf("half-created instance left behind: %+v, %v", list, err)
	}
	nets, err := f.cli.NetworkList(t.Context(), client.NetworkListOptions{Filters: make(client.Filters).Add("name", spec.Name)})
	if err != nil || len(nets.Items) != 0 {
		f.d.DestroyInstance(context.WithoutCancel(t.Context()), spec.Name)
		t.Fatalf("the instance's network was left behind: %+v, %v", nets.Items, err)
	}
}

// TestStartFirst: a container marked StartFirst is started before the instance's others; it
// is the network owner, alone on the sandbox network, and the others share its network
// namespace. They reach each other by name.
func TestStartFirst(t *testing.T) {
	f := newFixture(t, modeConfig(docker.ConnectAuto))
	spec := withPeer(f.spec("start-first"))
	spec.Containers[1].StartFirst = true
	inst := f.create(f.d, spec)
	started := map[string]time.Time{}
	for _, c := range inst.Containers {
		waitHealthy(t, c.Endpoint)
		res, err := f.cli.ContainerInspect(t.Context(), c.ID, client.ContainerInspectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		at, err := time.Parse(time.RFC3339Nano, res.Container.State.StartedAt)
		if err != nil {
			t.Fatalf("%s started at %q: %v", c.Name, res.Container.State.StartedAt, err)
		}
		started[c.Name] = at
		nets := res.Container.NetworkSettings.Networks
		mode := res.Container.HostConfig.NetworkMode
		switch c.Name {
		case "gull":
			if nets[docker.SandboxNetwork] == nil || len(nets) != 1 || mode.IsContainer() {
				t.Errorf("gull is on %v (mode %s), want %s alone", slices.Collect(maps.Keys(nets)), mode, docker.SandboxNetwork)
			}
		case "ship":
			if len(nets) != 0 || !mode.IsContainer() || (mode.ConnectedContainer() != spec.Name+"-gull" && mode.ConnectedContainer() != inst.Containers[1].ID) {
				t.Errorf("ship is on %v in mode %s, want gull's network namespace", slices.Collect(maps.Keys(nets)), mode)
			}
		}
	}
	if !started["gull"].Before(started["ship"]) {
		t.Errorf("gull (StartFirst) started at %s, ship at %s: want gull first", started["gull"], started["ship"])
	}
	for i, c := range inst.Containers {
		peer := spec.Containers[1-i]
		u := fmt.Sprintf("http://%s:%d/health", peer.Name, peer.Port)
		code, body := do(t, http.MethodGet, c.Endpoint+"/fetch?url="+url.QueryEscape(u), "")
		if code != http.StatusOK || !strings.Contains(body, `"status":200`) {
			t.Errorf("%s fetching %s: %d %s", c.Name, u, code, body)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*docker.Config)
		want   string // substring of the error, "" = valid
	}{
		{"defaults", func(*docker.Config) {}, ""},
		{"bare socket path", func(c *docker.Config) { c.Socket = "/run/docker.sock" }, ""},
		{"ssh socket", func(c *docker.Config) { c.Socket = "ssh://host" }, "socket"},
		{"bad mode", func(c *docker.Config) { c.ConnectMode = "bridge" }, "connect_mode"},
		{"host_port without publishing", func(c *docker.Config) {
			c.ConnectMode, c.PublishPorts = docker.ConnectHostPort, false
		}, "publish_ports"},
		{"publishing on all interfaces", func(c *docker.Config) { c.HostAddress = "0.0.0.0" }, "loopback"},
		{"publishing on a LAN address", func(c *docker.Config) { c.HostAddress = "192.168.1.5" }, "loopback"},
		{"localhost", func(c *docker.Config) { c.HostAddress = "localhost" }, ""},
		{"ipv6 loopback", func(c *docker.Config) { c.HostAddress = "::1" }, ""},
		{"host port out of range", func(c *docker.Config) { c.HostPort = 70000 }, "host_port"},
		{"host network", func(c *docker.Config) { c.Network = "host" }, "not allowed"},
		{"relative names_dir", func(c *docker.Config) { c.NamesDir = "names" }, "names_dir"},
		{"names_dir at the root", func(c *docker.Config) { c.NamesDir = "/" }, "names_dir"},
		{"names_dir elsewhere", func(c *docker.Config) { c.NamesDir = "/srv/names" }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := docker.DefaultConfig()
			tc.mutate(&cfg)
			d, err := docker.New(cfg, nil)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				if s := d.Config().Socket; !strings.HasPrefix(s, "unix://") && !strings.HasPrefix(s, "tcp://") {
					t.Fatalf("socket %q not normalised", s)
				}
				d.Close()
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: %v, want an error about %s", err, tc.want)
			}
		})
	}
}

// TestBadSpecs: what the Docker driver refuses beyond the conformance suite's cases.
func TestBadSpecs(t *testing.T) {
	d, err := docker.New(docker.DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	good := bay.InstanceSpec{Name: "x", Containers: []bay.ContainerSpec{{Name: "ship", Image: "img", Port: 8123}}}
	for name, mutate := range map[string]func(*bay.InstanceSpec){
		"relative mount":      func(s *bay.InstanceSpec) { s.Containers[0].Mounts = []bay.Mount{{Source: "skills", Target: "/skills"}} },
		"volume without path": func(s *bay.InstanceSpec) { s.VolumeRef = "v" },
		"volume as a path":    func(s *bay.InstanceSpec) { s.VolumeRef, s.MountPath = "/etc", "/workspace" },
		"upper-case name":     func(s *bay.InstanceSpec) { s.Containers[0].Name = "Ship" },
	} {
		spec := good
		spec.Containers = slices.Clone(good.Containers)
		mutate(&spec)
		if _, err := d.CreateInstance(t.Context(), spec); err == nil {
			t.Errorf("%s: CreateInstance accepted %+v", name, spec)
		}
	}
}

// TestUnreachableEngine needs no engine: a socket nobody listens on is code unavailable.
func TestUnreachableEngine(t *testing.T) {
	cfg := docker.DefaultConfig()
	cfg.Socket = "unix://" + filepath.Join(t.TempDir(), "nobody.sock")
	d, err := docker.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	err = d.Ping(t.Context())
	if bay.ErrorCode(err) != bay.CodeUnavailable {
		t.Fatalf("Ping = %v (code %s), want unavailable", err, bay.ErrorCode(err))
	}
	if _, err := d.InspectInstance(t.Context(), "x"); bay.ErrorCode(err) != bay.CodeUnavailable {
		t.Fatalf("InspectInstance = %v, want unavailable", err)
	}
}

// TestDestroyWaitsForCreateInFlight: the engine lists a container while its create is still
// copying the image's files into a fresh volume, but answers 404 to remove until the create has
// finished. A destroy in that window (a restarted bay cleaning up after the one that died
// mid-create) must wait and remove the container, not report success and leak it.
func TestDestroyWaitsForCreateInFlight(t *testing.T) {
	f := newFixture(t, modeConfig(docker.ConnectContainerNetwork))
	img, err := testimage.EnsureSlowCopyUp(t.Context(), f.cli, 5000)
	if err != nil {
		t.Fatal(err)
	}
	spec := f.spec("copyup")
	spec.Containers[0].Image = img
	spec.VolumeRef = f.volume("copyup")
	t.Cleanup(func() { // runs before the volume's cleanup
		ctx, cancel := f.detached()
		defer cancel()
		f.d.DestroyInstance(ctx, spec.Name)
	})

	type result struct {
		id  string
		err error
	}
	created := make(chan result, 1)
	go func() {
		inst, err := f.d.CreateInstance(context.WithoutCancel(t.Context()), spec)
		id := ""
		if err == nil {
			id = inst.Containers[0].ID
		}
		created <- result{id, err}
	}()
	nameFilter := make(client.Filters).Add("name", "^/"+spec.Name+"$")
	var listedID string
	for deadline := time.Now().Add(30 * time.Second); listedID == "" && time.Now().Before(deadline); {
		res, err := f.cli.ContainerList(t.Context(), client.ContainerListOptions{All: true, Filters: nameFilter})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Items) > 0 {
			listedID = res.Items[0].ID
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if listedID == "" {
		t.Fatal("the container never appeared in the engine's list")
	}
	select {
	case r := <-created:
		t.Fatalf("the create finished (%v) before the container was seen listed: the window this test needs did not open", r.err)
	default:
	}
	if _, err := f.cli.ContainerInspect(t.Context(), listedID, client.ContainerInspectOptions{}); err == nil {
		t.Log("the engine already knew the container when it was listed; the window closed early")
	}

	ctx, cancel := f.detached()
	defer cancel()
	if err := f.d.DestroyInstance(ctx, spec.Name); err != nil {
		t.Fatalf("DestroyInstance during the create: %v", err)
	}
	r := <-created
	t.Logf("the create returned id=%q err=%v", r.id, r.err)
	res, err := f.cli.ContainerList(t.Context(), client.ContainerListOptions{All: true, Filters: nameFilter})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Items) != 0 {
		t.Fatalf("container %s survived a destroy that reported success (state %s)", listedID, res.Items[0].State)
	}
}

// TestImageCache: an image declaring hot paths gets them copied once into volumes kept by a
// keeper container; later creates mount them read-only and run the image by id; a second
// driver (another bay, or a restart) reuses the keeper instead of copying again.
func TestImageCache(t *testing.T) {
	cfg := modeConfig(docker.ConnectAuto)
	cfg.ImageCache = docker.ImageCacheOn
	f := newFixture(t, cfg)
	img, err := testimage.EnsureHotPaths(t.Context(), f.cli, docker.LabelHotPaths)
	if err != nil {
		t.Fatal(err)
	}
	ins, err := f.cli.ImageInspect(t.Context(), img)
	if err != nil {
		t.Fatal(err)
	}
	removeKeeper := func() {
		ctx, cancel := f.detached()
		defer cancel()
		keeper := "shipyard-imagecache-" + strings.TrimPrefix(ins.ID, "sha256:")[:12]
		if k, err := f.cli.ContainerInspect(ctx, keeper, client.ContainerInspectOptions{}); err == nil {
			if _, err := f.cli.ContainerRemove(ctx, keeper, client.ContainerRemoveOptions{Force: true}); err != nil {
				t.Errorf("remove keeper: %v", err)
			}
			for _, m := range k.Container.Mounts {
				if _, err := f.cli.VolumeRemove(ctx, m.Name, client.VolumeRemoveOptions{}); err != nil {
					t.Errorf("remove cache volume: %v", err)
				}
			}
		}
	}
	removeKeeper() // left by an earlier run: this test wants the first copy
	t.Cleanup(removeKeeper)

	// The first create goes ahead without the cache and starts the copy.
	spec := f.spec("cache-1")
	spec.Containers[0].Image = img
	id1, _ := f.createStart(spec)
	if m := cacheMounts(t, f.cli, id1); len(m) != 0 {
		t.Fatalf("the first create already has cache mounts %v", m)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if used, err := f.d.WarmImageCache(ctx, img); err != nil || !used {
		t.Fatalf("WarmImageCache = %v, %v; want true", used, err)
	}

	spec = f.spec("cache-2")
	spec.Containers[0].Image = img
	id2, endpoint := f.createStart(spec)
	m := cacheMounts(t, f.cli, id2)
	if len(m) != 1 || m[0].RW {
		t.Fatalf("cache mounts %+v, want one read-only volume at %s", m, testimage.HotPath)
	}
	res, err := f.cli.ContainerInspect(t.Context(), id2, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Container.Image != ins.ID {
		t.Errorf("the container runs image %s, want the cached image's id %s", res.Container.Image, ins.ID)
	}
	if code, body := do(t, "GET", endpoint+"/file?path="+testimage.HotFile, ""); code != 200 || body != testimage.HotContent {
		t.Fatalf("read through the cache: %d %q", code, body)
	}
	if code, _ := do(t, "PUT", endpoint+"/file?path="+testimage.HotPath+"/new", "x"); code == 204 {
		t.Fatal("a sandbox wrote into the shared image cache")
	}

	// Another driver finds the keeper: no second copy, the same volume.
	other := newDriver(t, cfg)
	if used, err := other.WarmImageCache(ctx, img); err != nil || !used {
		t.Fatalf("second driver: WarmImageCache = %v, %v", used, err)
	}
	spec = f.spec("cache-3")
	spec.Containers[0].Image = img
	name3 := spec.Name
	id3 := f.create(other, spec).Containers[0].ID
	if m3 := cacheMounts(t, f.cli, id3); len(m3) != 1 || m3[0].Name != m[0].Name {
		t.Fatalf("second driver mounts %+v, want the keeper's volume %s", m3, m[0].Name)
	}

	// Two drivers warming a fresh cache at once: one copies, the other waits for its keeper.
	other.DestroyInstance(ctx, name3)
	f.d.DestroyInstance(ctx, f.spec("cache-2").Name)
	removeKeeper()
	a, b := newDriver(t, cfg), newDriver(t, cfg)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, d := range []*docker.Driver{a, b} {
		wg.Go(func() {
			used, err := d.WarmImageCache(ctx, img)
			if err == nil && !used {
				err = errors.New("cache not used")
			}
			errs[i] = err
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("concurrent warm: %v", err)
	}
	keepers, err := f.cli.ContainerList(t.Context(), client.ContainerListOptions{All: true,
		Filters: make(client.Filters).Add("label", "dev.shipyard.image-cache.key="+ins.ID)})
	if err != nil || len(keepers.Items) != 1 {
		t.Fatalf("keepers after a concurrent warm: %d (%v), want 1", len(keepers.Items), err)
	}
	vols, err := f.cli.VolumeList(t.Context(), client.VolumeListOptions{
		Filters: make(client.Filters).Add("label", "dev.shipyard.image-cache.key="+ins.ID)})
	if err != nil || len(vols.Items) != 1 {
		t.Fatalf("cache volumes after a concurrent warm: %d (%v), want 1: the loser must remove its own", len(vols.Items), err)
	}

	// The keeper removed by hand (and its volumes with it): the next create must not mount
	// the vanished volumes (the engine would create them empty), it goes without the cache.
	removeKeeper()
	spec = f.spec("cache-4")
	spec.Containers[0].Image = img
	id4, endpoint4 := f.createStart(spec)
	if m := cacheMounts(t, f.cli, id4); len(m) != 0 {
		t.Fatalf("a create after the keeper vanished mounts %+v", m)
	}
	if code, body := do(t, "GET", endpoint4+"/file?path="+testimage.HotFile, ""); code != 200 || body != testimage.HotContent {
		t.Fatalf("read from the image after the cache vanished: %d %q", code, body)
	}
}

// cacheMounts are the container's volume mounts at the test image's hot path.
func cacheMounts(t *testing.T, cli *client.Client, id string) []container.MountPoint {
	t.Helper()
	res, err := cli.ContainerInspect(t.Context(), id, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []container.MountPoint
	for _, m := range res.Container.Mounts {
		if m.Destination == testimage.HotPath {
			out = append(out, m)
		}
	}
	return out
}

// The sandbox image declares its hot paths with the labels the driver reads.
func TestHotPathLabelsMatchTheImageBuilder(t *testing.T) {
	if docker.LabelHotPaths != imagebuild.LabelHotPaths || docker.LabelHotPathsKey != imagebuild.LabelHotPathsKey {
		t.Fatalf("driver labels %q %q, image builder labels %q %q", docker.LabelHotPaths, docker.LabelHotPathsKey,
			imagebuild.LabelHotPaths, imagebuild.LabelHotPathsKey)
	}
}

// TestSandboxNetworkRace: bays starting together each create the isolated network; the engine
// allows duplicate names, and a container naming an ambiguous network fails to start. Every
// create must succeed, and one isolated network must remain.
func TestSandboxNetworkRace(t *testing.T) {
	probe := newFixture(t, modeConfig(docker.ConnectAuto))
	name := "drivertest-" + probe.run + "-isolated"
	t.Cleanup(func() {
		ctx, cancel := probe.detached()
		defer cancel()
		nets, _ := probe.cli.NetworkList(ctx, client.NetworkListOptions{Filters: make(client.Filters).Add("name", name)})
		for _, n := range nets.Items {
			probe.cli.NetworkRemove(ctx, n.ID, client.NetworkRemoveOptions{})
		}
	})
	const n = 4
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		f := newFixture(t, modeConfig(docker.ConnectAuto))
		f.run = probe.run
		docker.SetSandboxNetwork(f.d, name)
		wg.Go(func() {
			spec := f.spec(fmt.Sprintf("race-%d", i))
			t.Cleanup(func() {
				ctx, cancel := f.detached()
				defer cancel()
				f.d.DestroyInstance(ctx, spec.Name)
			})
			_, errs[i] = f.d.CreateInstance(t.Context(), spec)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("concurrent creates on a fresh isolated network: %v", err)
	}
	nets, err := probe.cli.NetworkList(t.Context(), client.NetworkListOptions{Filters: make(client.Filters).Add("name", name)})
	if err != nil {
		t.Fatal(err)
	}
	var kept []string
	for _, nw := range nets.Items {
		if nw.Name == name {
			kept = append(kept, nw.ID)
			if nw.Options["com.docker.network.bridge.enable_icc"] != "false" {
				t.Errorf("network %s has inter-container communication on", nw.ID)
			}
		}
	}
	if len(kept) != 1 {
		t.Fatalf("%d networks named %s remain, want 1", len(kept), name)
	}
}

// The image builder's runtime-caps label is the one the driver reads.
func TestRuntimeCapsLabelMatchesTheImageBuilder(t *testing.T) {
	if docker.LabelRuntimeCaps != imagebuild.LabelRuntimeCaps {
		t.Fatalf("driver label %q, image builder label %q", docker.LabelRuntimeCaps, imagebuild.LabelRuntimeCaps)
	}
}

// An image whose runtime separates privileges (LabelRuntimeCaps) starts as root holding only
// the capabilities it declares that a spec may add (a declared SYS_ADMIN is ignored), with
// no-new-privileges and every other capability dropped; an image without the label runs as
// the spec's user with none.
func TestRuntimeCapsFromTheImage(t *testing.T) {
	f := newFixture(t, modeConfig(docker.ConnectAuto))
	img, err := testimage.EnsureLabelled(t.Context(), f.cli, docker.LabelRuntimeCaps, "SETUID,SETGID,KILL,SYS_ADMIN")
	if err != nil {
		t.Fatal(err)
	}
	spec := f.spec("caps")
	spec.Containers[0].Image = img
	id, endpoint := f.createStart(spec)
	eff := effective(t, f.cli, id)
	for i := range eff.CapAdd {
		eff.CapAdd[i] = strings.TrimPrefix(eff.CapAdd[i], "CAP_")
	}
	slices.Sort(eff.CapAdd)
	if eff.User != "0:0" || !slices.Equal(eff.CapAdd, []string{"KILL", "SETGID", "SETUID"}) || !slices.Contains(eff.CapDrop, "ALL") ||
		!slices.Contains(eff.SecurityOpt, "no-new-privileges:true") || eff.Privileged {
		t.Fatalf("a separating runtime's container: %+v", eff)
	}
	if code, body := do(t, "GET", endpoint+"/whoami", ""); code != 200 || !strings.Contains(body, `"uid":0`) {
		t.Fatalf("whoami: %d %s", code, body)
	}
	plain := f.spec("nocaps")
	pid, _ := f.createStart(plain)
	if eff := effective(t, f.cli, pid); eff.User != "1000:1000" || len(eff.CapAdd) != 0 {
		t.Fatalf("an image without the label: %+v", eff)
	}
}
