package docker_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"

	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/docker"
	"github.com/shipyard-dev/shipyard/internal/bay/drivertest"
	"github.com/shipyard-dev/shipyard/internal/bay/drivertest/testimage"
)

// sharedPair creates ship and gull (marked StartFirst, so the network owner) with a late start
// that begins at once, waits for both, and returns the instance.
func (f *fixture) sharedPair(d *docker.Driver, spec bay.InstanceSpec) bay.Instance {
	t := f.t
	t.Helper()
	spec.Containers[1].StartFirst = true
	spec.LateStart = true
	inst := f.create(d, spec)
	if inst.Late != nil {
		var err error
		if inst, err = inst.Late.Wait(t.Context()); err != nil {
			t.Fatalf("late start: %v", err)
		}
	}
	for _, c := range inst.Containers {
		waitHealthy(t, c.Endpoint)
	}
	return inst
}

func (f *fixture) inspect(id string) container.InspectResponse {
	f.t.Helper()
	res, err := f.cli.ContainerInspect(f.t.Context(), id, client.ContainerInspectOptions{})
	if err != nil {
		f.t.Fatalf("inspect %s: %v", id, err)
	}
	return res.Container
}

// namespace is the link of a namespace of the container's main process ("net:[4026532...]").
func (f *fixture) namespace(id, kind string) string {
	f.t.Helper()
	c := f.inspect(id)
	link, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/%s", c.State.Pid, kind))
	if err != nil {
		f.t.Fatalf("namespace %s of %s: %v", kind, id, err)
	}
	return link
}

// resolveIn resolves name with Go's resolver in the container at endpoint.
func resolveIn(t *testing.T, endpoint, name string) []string {
	t.Helper()
	code, body := get(t, endpoint+"/resolve?name="+url.QueryEscape(name))
	var res struct{ Addrs []string }
	if code != http.StatusOK || json.Unmarshal([]byte(body), &res) != nil {
		t.Errorf("resolving %s at %s: %d %s", name, endpoint, code, body)
	}
	return res.Addrs
}

// fetchIn reports whether the container at endpoint gets a 200 from u.
func fetchIn(t *testing.T, endpoint, u string) bool {
	t.Helper()
	code, body := get(t, endpoint+"/fetch?url="+url.QueryEscape(u))
	return code == http.StatusOK && strings.Contains(body, `"status":200`)
}

// instanceNetworks lists the engine's networks carrying the instance's label or name.
func (f *fixture) instanceNetworks(name string) []string {
	f.t.Helper()
	var out []string
	for _, filter := range []client.Filters{make(client.Filters).Add("label", bay.LabelInstance+"="+name), make(client.Filters).Add("name", name)} {
		res, err := f.cli.NetworkList(f.t.Context(), client.NetworkListOptions{Filters: filter})
		if err != nil {
			f.t.Fatal(err)
		}
		for _, n := range res.Items {
			out = append(out, n.Name)
		}
	}
	return out
}

// TestSharedNetworkNamespace: under runc the containers of a two-container instance share the
// network namespace of the one marked StartFirst (and nothing else of it); no network of the
// instance's own is made; the owner alone is on the sandbox network, with hostname sandbox;
// both resolve each container's name and engine name to loopback and reach each other by
// name; bay reaches each at the owner's address on its own port, as create, inspect and list
// all report.
func TestSharedNetworkNamespace(t *testing.T) {
	f := newFixture(t, modeConfig(docker.ConnectAuto))
	spec := withPeer(f.spec("shared"))
	inst := f.sharedPair(f.d, spec)
	ship, gull := inst.Containers[0], inst.Containers[1]

	if nets := f.instanceNetworks(spec.Name); len(nets) != 0 {
		t.Errorf("networks of the instance: %v, want none", nets)
	}
	if nets := f.inspect(gull.ID).NetworkSettings.Networks; len(nets) != 1 || nets[docker.SandboxNetwork] == nil {
		t.Errorf("gull is on %v, want %s alone", slices.Collect(maps.Keys(nets)), docker.SandboxNetwork)
	}
	if mode := f.inspect(ship.ID).HostConfig.NetworkMode; !mode.IsContainer() {
		t.Errorf("ship's network mode %s, want gull's namespace", mode)
	}
	if a, b := f.namespace(ship.ID, "net"), f.namespace(gull.ID, "net"); a != b {
		t.Errorf("network namespaces: ship %s, gull %s; want one", a, b)
	}
	for _, kind := range []string{"pid", "mnt", "ipc"} {
		if a, b := f.namespace(ship.ID, kind), f.namespace(gull.ID, kind); a == b {
			t.Errorf("ship and gull share their %s namespace %s", kind, a)
		}
	}

	ownerIP, _ := endpointHost(t, gull.Endpoint)
	for i, c := range inst.Containers {
		host, port := endpointHost(t, c.Endpoint)
		if host != ownerIP || port != strconv.Itoa(spec.Containers[i].Port) {
			t.Errorf("%s's endpoint %s, want the owner's address %s and port %d", c.Name, c.Endpoint, ownerIP, spec.Containers[i].Port)
		}
		var who struct{ Hostname string }
		if code, body := get(t, c.Endpoint+"/whoami"); code != 200 || json.Unmarshal([]byte(body), &who) != nil || who.Hostname != "sandbox" {
			t.Errorf("%s's hostname: %d %s, want sandbox", c.Name, code, body)
		}
		for _, name := range []string{"ship", "gull", spec.Name + "-ship", spec.Name + "-gull"} {
			if addrs := resolveIn(t, c.Endpoint, name); !slices.Equal(addrs, []string{"127.0.0.1"}) {
				t.Errorf("%s resolves %s to %v, want 127.0.0.1", c.Name, name, addrs)
			}
		}
		for j, peer := range spec.Containers {
			for _, host := range []string{peer.Name, "127.0.0.1"} {
				if u := fmt.Sprintf("http://%s:%d/health", host, peer.Port); i != j && !fetchIn(t, c.Endpoint, u) {
					t.Errorf("%s cannot reach %s", c.Name, u)
				}
			}
		}
	}

	got, err := f.d.InspectInstance(t.Context(), spec.Name)
	if err != nil || !got.Running() {
		t.Fatalf("InspectInstance = %+v, %v; want running", got, err)
	}
	list, err := f.d.ListInstances(t.Context(), map[string]string{drivertest.LabelTestRun: f.run})
	if err != nil || len(list) != 1 || !list[0].Running() {
		t.Fatalf("ListInstances = %+v, %v; want the instance running", list, err)
	}
	for i, c := range inst.Containers {
		if got.Containers[i].Endpoint != c.Endpoint || list[0].Containers[i].Endpoint != c.Endpoint {
			t.Errorf("%s: inspect reports %s, list %s, create %s", c.Name, got.Containers[i].Endpoint, list[0].Containers[i].Endpoint, c.Endpoint)
		}
	}
}

// TestSharedHostPort: in host_port mode the owner publishes every runtime port of the
// instance on loopback, and each runtime is reached through its own.
func TestSharedHostPort(t *testing.T) {
	f := newFixture(t, modeConfig(docker.ConnectHostPort))
	spec := withPeer(f.spec("shared-hp"))
	inst := f.sharedPair(f.d, spec)
	ship, gull := inst.Containers[0], inst.Containers[1]
	if ship.Endpoint == gull.Endpoint {
		t.Fatalf("both runtimes at %s", ship.Endpoint)
	}
	for _, c := range inst.Containers {
		if host, _ := endpointHost(t, c.Endpoint); host != "127.0.0.1" {
			t.Errorf("%s's endpoint %s, want a port published on 127.0.0.1", c.Name, c.Endpoint)
		}
	}
	if ports := f.inspect(gull.ID).NetworkSettings.Ports; len(ports) != 2 {
		t.Errorf("the owner publishes %v, want both runtime ports", ports)
	}
	if eff := effective(t, f.cli, ship.ID); len(eff.PublishedHostIPs) != 0 {
		t.Errorf("the joined container publishes %v itself", eff.PublishedHostIPs)
	}
}

// TestSharedOwnerGone: a joined container keeps the network namespace its owner had when it
// started. Once the owner has been restarted it can never be reached again: the driver
// reports it exited, so the instance is not running (and bay replaces it). The same holds
// while the owner is dead; destroying such an instance removes everything.
func TestSharedOwnerGone(t *testing.T) {
	f := newFixture(t, modeConfig(docker.ConnectAuto))
	for _, how := range []string{"restart", "kill"} {
		t.Run(how, func(t *testing.T) {
			f := &fixture{t: t, d: f.d, cli: f.cli, image: f.image, run: f.run}
			spec := withPeer(f.spec("owner-" + how))
			spec.Labels = map[string]string{drivertest.LabelTestRun: f.run, "drivertest.case": how}
			inst := f.sharedPair(f.d, spec)
			ship, gull := inst.Containers[0], inst.Containers[1]
			if how == "restart" {
				grace := 1
				if _, err := f.cli.ContainerRestart(t.Context(), gull.ID, client.ContainerRestartOptions{Timeout: &grace}); err != nil {
					t.Fatal(err)
				}
				// The engine may give the restarted owner another address (a loaded engine with
				// many containers did): wait for it where it is now.
				_, port := endpointHost(t, gull.Endpoint)
				var now string
				for _, n := range f.inspect(gull.ID).NetworkSettings.Networks {
					if n != nil && n.IPAddress.IsValid() {
						now = "http://" + net.JoinHostPort(n.IPAddress.String(), port)
					}
				}
				if now == "" {
					t.Fatal("the restarted owner has no address")
				}
				waitHealthy(t, now)
				// Where the owner kept its address, ship's old endpoint no longer answers; where
				// it did not, another container may have that address now (another test's ship
				// once answered there), and only the driver's report below tells.
				if now == gull.Endpoint {
					if _, err := httpc.Get(ship.Endpoint + "/health"); err == nil {
						t.Errorf("ship answers at %s after its owner's restart", ship.Endpoint)
					}
				}
			} else {
				harness(t, f.cli, f.d, f.image).Kill(t, gull.ID)
			}
			got, err := f.d.InspectInstance(t.Context(), spec.Name)
			if err != nil {
				t.Fatal(err)
			}
			if got.Running() || got.Containers[0].State != bay.ContainerExited || got.Containers[0].Endpoint != "" {
				t.Errorf("InspectInstance after the owner's %s = %+v; want ship exited without an endpoint", how, got)
			}
			if f.inspect(ship.ID).State.Running != true {
				t.Errorf("ship's process stopped: the driver must report it, not kill it")
			}
			wantGull := bay.ContainerRunning
			if how == "kill" {
				wantGull = bay.ContainerExited
				list, err := f.d.ListInstances(t.Context(), spec.Labels)
				if err != nil || len(list) != 1 || list[0].Running() || list[0].Containers[0].State != bay.ContainerExited {
					t.Errorf("ListInstances with a dead owner = %+v, %v; want ship reported exited", list, err)
				}
			}
			if got.Containers[1].State != wantGull {
				t.Errorf("gull after its %s: %s, want %s", how, got.Containers[1].State, wantGull)
			}
			ctx, cancel := f.detached()
			defer cancel()
			if err := f.d.DestroyInstance(ctx, spec.Name); err != nil {
				t.Fatal(err)
			}
			if _, err := f.d.InspectInstance(t.Context(), spec.Name); !bay.IsNotFound(err) {
				t.Errorf("InspectInstance after destroy: %v, want not_found", err)
			}
		})
	}
}

// recordingEgress is stillEgress that records the addresses registered per instance.
type recordingEgress struct {
	stillEgress
	mu    sync.Mutex
	addrs map[string][]netip.Addr
}

func (r *recordingEgress) Register(addr, _ netip.Addr, instance, _ string, _ bay.NetworkPolicy) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.addrs[instance] = append(r.addrs[instance], addr)
	return nil
}

func (r *recordingEgress) registered(instance string) []netip.Addr {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.addrs[instance])
}

// TestSharedUnderClosedPolicies: under allowlist and none the owner alone is on the policy's
// network and is the one address registered with the gateway; the peers reach each other by
// name on loopback, under allowlist without the proxy (NO_PROXY names them).
func TestSharedUnderClosedPolicies(t *testing.T) {
	for _, mode := range []bay.NetworkMode{bay.NetworkAllowlist, bay.NetworkNone} {
		t.Run(string(mode), func(t *testing.T) {
			f := newFixture(t, modeConfig(docker.ConnectContainerNetwork))
			eg := &recordingEgress{addrs: map[string][]netip.Addr{}}
			f.d.SetEgress(eg)
			spec := f.pairSpec("shared-"+string(mode), bay.ContainerRuntimeRunc, mode)
			inst := f.sharedPair(f.d, spec)
			ship, gull := inst.Containers[0], inst.Containers[1]
			policyNet := docker.EgressNetwork
			if mode == bay.NetworkNone {
				policyNet = docker.NoneNetwork
			}
			nets := f.inspect(gull.ID).NetworkSettings.Networks
			if len(nets) != 1 || nets[policyNet] == nil {
				t.Fatalf("gull is on %v, want %s alone", slices.Collect(maps.Keys(nets)), policyNet)
			}
			if mode := f.inspect(ship.ID).HostConfig.NetworkMode; !mode.IsContainer() {
				t.Errorf("ship's network mode %s, want gull's namespace", mode)
			}
			if got, want := eg.registered(spec.Name), []netip.Addr{nets[policyNet].IPAddress}; !slices.Equal(got, want) {
				t.Errorf("registered with the gateway: %v, want the owner's %v alone", got, want)
			}
			if nets := f.instanceNetworks(spec.Name); len(nets) != 0 {
				t.Errorf("networks of the instance: %v, want none", nets)
			}
			for i, c := range inst.Containers {
				if mode == bay.NetworkAllowlist {
					var who struct{ Env []string }
					_, body := get(t, c.Endpoint+"/whoami")
					if json.Unmarshal([]byte(body), &who) != nil || !slices.ContainsFunc(who.Env, func(kv string) bool {
						return strings.HasPrefix(kv, "NO_PROXY=") && strings.Contains(kv+",", ",ship,") && strings.Contains(kv+",", ",gull,")
					}) {
						t.Errorf("%s's NO_PROXY lacks the peers: %s", c.Name, body)
					}
				}
				peer := spec.Containers[1-i]
				if addrs := resolveIn(t, c.Endpoint, peer.Name); !slices.Equal(addrs, []string{"127.0.0.1"}) {
					t.Errorf("%s resolves %s to %v, want 127.0.0.1", c.Name, peer.Name, addrs)
				}
				if u := fmt.Sprintf("http://%s:%d/health", peer.Name, peer.Port); !fetchIn(t, c.Endpoint, u) {
					t.Errorf("%s cannot reach %s", c.Name, u)
				}
			}
		})
	}
}

// TestOldLayoutInstance: an instance made before its containers shared a network namespace
// (a container on a bridge "<instance>-net" labelled with the instance) is still listed and
// destroyed with its network.
func TestOldLayoutInstance(t *testing.T) {
	f := newFixture(t, modeConfig(docker.ConnectContainerNetwork))
	name := "drivertest-" + f.run + "-old"
	labels := map[string]string{drivertest.LabelTestRun: f.run, bay.LabelInstance: name, bay.LabelManaged: "true"}
	ctx := t.Context()
	t.Cleanup(func() {
		ctx, cancel := f.detached()
		defer cancel()
		_, _ = f.cli.ContainerRemove(ctx, name+"-ship", client.ContainerRemoveOptions{Force: true})
		_, _ = f.cli.NetworkRemove(ctx, name+"-net", client.NetworkRemoveOptions{})
	})
	if _, err := f.cli.NetworkCreate(ctx, name+"-net", client.NetworkCreateOptions{Driver: "bridge", Labels: labels}); err != nil {
		t.Fatal(err)
	}
	ship := maps.Clone(labels)
	ship[bay.LabelContainerName], ship[bay.LabelRuntimePort] = "ship", strconv.Itoa(testimage.Port)
	res, err := f.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name:       name + "-ship",
		Config:     &container.Config{Image: f.image, User: "1000:1000", Labels: ship},
		HostConfig: &container.HostConfig{NetworkMode: container.NetworkMode(name + "-net")},
		NetworkingConfig: &network.NetworkingConfig{
			EndpointsConfig: map[string]*network.EndpointSettings{name + "-net": {}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.cli.ContainerStart(ctx, res.ID, client.ContainerStartOptions{}); err != nil {
		t.Fatal(err)
	}
	list, err := f.d.ListInstances(ctx, map[string]string{drivertest.LabelTestRun: f.run})
	if err != nil || len(list) != 1 || list[0].Name != name || !list[0].Running() || list[0].Containers[0].Endpoint == "" {
		t.Fatalf("ListInstances = %+v, %v; want %s running with an endpoint", list, err, name)
	}
	if err := f.d.DestroyInstance(ctx, name); err != nil {
		t.Fatal(err)
	}
	if nets := f.instanceNetworks(name); len(nets) != 0 {
		t.Errorf("networks left after destroy: %v", nets)
	}
	if _, err := f.cli.ContainerInspect(ctx, res.ID, client.ContainerInspectOptions{}); !cerrdefs.IsNotFound(err) {
		t.Errorf("the container after destroy: %v, want not found", err)
	}
}
