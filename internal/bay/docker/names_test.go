package docker_test

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/docker"
)

// stillEgress stands in for bay's resolver and gateway: it confines nothing and answers
// nothing, which is all the driver needs to place an instance on a closed policy's network.
type stillEgress struct{}

func (stillEgress) Attach(_ context.Context, _ string, gw netip.Addr) (string, error) {
	return "http://" + netip.AddrPortFrom(gw, 3128).String(), nil
}
func (stillEgress) Seal(context.Context, string, netip.Addr) error { return nil }
func (stillEgress) Register(netip.Addr, netip.Addr, string, string, bay.NetworkPolicy) error {
	return nil
}
func (stillEgress) Restore(netip.Addr, netip.Addr, string, string, bay.NetworkPolicy) (bool, error) {
	return false, nil
}
func (stillEgress) Known(string) bool                         { return false }
func (stillEgress) Update(string, bay.NetworkPolicy) error    { return nil }
func (stillEgress) Unregister(string)                         {}
func (stillEgress) Events(string) ([]bay.NetworkEvent, int64) { return nil, 0 }

var _ docker.Egress = stillEgress{}

// requireRunsc fails the test when the engine lacks runsc (scripts/gvisor.sh registers it).
func requireRunsc(t *testing.T, d *docker.Driver) {
	t.Helper()
	if err := d.CheckRuntime(t.Context(), bay.ContainerRuntimeRunsc); err != nil {
		t.Fatalf("the engine lacks runsc (run scripts/gvisor.sh): %v", err)
	}
}

// pairSpec is a two-container instance ("ship" and "gull") of the test image.
func (f *fixture) pairSpec(suffix, runtime string, mode bay.NetworkMode) bay.InstanceSpec {
	spec := f.spec(suffix)
	spec.Runtime = runtime
	spec.Network = bay.NetworkPolicy{Mode: mode}
	if mode == bay.NetworkAllowlist {
		spec.Network.Allow = []string{"example.com"}
	}
	return withPeer(spec)
}

func get(t *testing.T, u string) (int, string) {
	t.Helper()
	return do(t, http.MethodGet, u, "")
}

// TestRunscNames: in each network mode, the containers of a two-container instance under
// runsc resolve each other by hostname and by engine name through the hosts file the driver
// binds, their /etc/resolv.conf names bay's resolver on the policy network's gateway (modes
// allowlist and none) or the host's non-loopback resolvers (open), both files are the
// driver's read-only binds, and destroying the instance removes them.
func TestRunscNames(t *testing.T) {
	hostConf := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(hostConf, []byte("nameserver 127.0.0.53\nnameserver 192.0.2.53\nsearch corp.test\noptions edns0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []bay.NetworkMode{bay.NetworkOpen, bay.NetworkAllowlist, bay.NetworkNone} {
		t.Run(string(mode), func(t *testing.T) {
			cfg := modeConfig(docker.ConnectContainerNetwork)
			cfg.NamesDir = filepath.Join(t.TempDir(), "names")
			f := newFixture(t, cfg)
			requireRunsc(t, f.d)
			f.d.SetEgress(stillEgress{})
			docker.SetResolvFiles(f.d, hostConf)
			spec := f.pairSpec("names-"+string(mode), bay.ContainerRuntimeRunsc, mode)
			inst := f.create(f.d, spec)
			dir := filepath.Join(cfg.NamesDir, spec.Name)
			// gVisor's sandboxes cannot share a network stack: they keep a bridge of their own.
			if _, err := f.cli.NetworkInspect(t.Context(), spec.Name+"-net", client.NetworkInspectOptions{}); err != nil {
				t.Errorf("the instance's own network under runsc: %v", err)
			}
			if info, err := os.Stat(cfg.NamesDir); err != nil || info.Mode().Perm() != 0o755 {
				t.Errorf("names_dir: %v, %v; want a directory of mode 0755", info, err)
			}

			wantServer := "nameserver 192.0.2.53\n"
			if mode != bay.NetworkOpen {
				net := docker.EgressNetwork
				if mode == bay.NetworkNone {
					net = docker.NoneNetwork
				}
				res, err := f.cli.NetworkInspect(t.Context(), net, client.NetworkInspectOptions{})
				if err != nil {
					t.Fatal(err)
				}
				for _, c := range res.Network.IPAM.Config {
					if c.Gateway.Is4() {
						wantServer = fmt.Sprintf("nameserver %s\n", c.Gateway)
					}
				}
			}
			for _, c := range inst.Containers {
				waitHealthy(t, c.Endpoint)
			}
			for i, c := range inst.Containers {
				code, conf := get(t, c.Endpoint+"/file?path=/etc/resolv.conf")
				if code != 200 || !strings.Contains(conf, wantServer) || strings.Count(conf, "nameserver") != 1 {
					t.Errorf("%s: /etc/resolv.conf: %d %q, want only %q", c.Name, code, conf, wantServer)
				}
				if mode == bay.NetworkOpen && !strings.Contains(conf, "search corp.test\noptions edns0\n") {
					t.Errorf("%s: /etc/resolv.conf lacks the host's search and options lines: %q", c.Name, conf)
				}
				peer, peerPort := inst.Containers[1-i].Name, spec.Containers[1-i].Port
				for _, name := range []string{peer, spec.Name + "-" + peer, "localhost"} {
					if code, body := get(t, c.Endpoint+"/resolve?name="+url.QueryEscape(name)); code != 200 {
						t.Errorf("%s resolving %s: %d %s", c.Name, name, code, body)
					}
				}
				if mode == bay.NetworkOpen {
					// The peer answers at the address its name gives (in closed modes the
					// stand-in gateway is the containers' proxy, and it answers nothing).
					u := fmt.Sprintf("http://%s:%d/health", peer, peerPort)
					if code, body := get(t, c.Endpoint+"/fetch?url="+url.QueryEscape(u)); code != 200 || !strings.Contains(body, `"status":200`) {
						t.Errorf("%s fetching %s: %d %s", c.Name, u, code, body)
					}
				}
				res, err := f.cli.ContainerInspect(t.Context(), c.ID, client.ContainerInspectOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if res.Container.HostConfig.Runtime != bay.ContainerRuntimeRunsc {
					t.Errorf("%s runs under %q", c.Name, res.Container.HostConfig.Runtime)
				}
				binds := map[string]string{}
				for _, m := range res.Container.Mounts {
					if m.Destination == "/etc/resolv.conf" || m.Destination == "/etc/hosts" {
						if m.RW {
							t.Errorf("%s: %s is bound read-write", c.Name, m.Destination)
						}
						binds[m.Destination] = m.Source
					}
				}
				if binds["/etc/resolv.conf"] != filepath.Join(dir, "resolv.conf") || binds["/etc/hosts"] != filepath.Join(dir, "hosts") {
					t.Errorf("%s: binds %v, want the files of %s", c.Name, binds, dir)
				}
			}
			hosts, err := os.ReadFile(filepath.Join(dir, "hosts"))
			if err != nil || !strings.HasPrefix(string(hosts), "127.0.0.1\tlocalhost\n") || !strings.Contains(string(hosts), "\tship "+spec.Name+"-ship\n") ||
				!strings.Contains(string(hosts), "\tgull "+spec.Name+"-gull\n") {
				t.Errorf("hosts file: %q, %v", hosts, err)
			}

			ctx, cancel := f.detached()
			defer cancel()
			if err := f.d.DestroyInstance(ctx, spec.Name); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Errorf("the name files outlive the instance: %v", err)
			}
		})
	}
}

// TestRunscNamesHostWithoutResolver: a host with loopback resolvers only gives an instance in
// mode open a resolv.conf without servers (names then fail at once instead of timing out on
// an address the sandbox cannot reach), still with its peers in the hosts file.
func TestRunscNamesHostWithoutResolver(t *testing.T) {
	hostConf := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(hostConf, []byte("nameserver 127.0.0.53\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := modeConfig(docker.ConnectContainerNetwork)
	cfg.NamesDir = filepath.Join(t.TempDir(), "names")
	f := newFixture(t, cfg)
	requireRunsc(t, f.d)
	docker.SetResolvFiles(f.d, hostConf)
	spec := f.spec("names-noresolver")
	spec.Runtime = bay.ContainerRuntimeRunsc
	inst := f.create(f.d, spec)
	c := inst.Containers[0]
	waitHealthy(t, c.Endpoint)
	if code, conf := get(t, c.Endpoint+"/file?path=/etc/resolv.conf"); code != 200 || strings.Contains(conf, "nameserver") {
		t.Errorf("/etc/resolv.conf: %d %q, want no server", code, conf)
	}
	for _, name := range []string{"sandbox", spec.Name} {
		if code, body := get(t, c.Endpoint+"/resolve?name="+name); code != 200 {
			t.Errorf("resolving its own name %s: %d %s", name, code, body)
		}
	}
}

// TestRuncKeepsEngineNames: under runc nothing changes: no bind over /etc/resolv.conf or
// /etc/hosts, no name files, and the containers still resolve each other through the engine.
func TestRuncKeepsEngineNames(t *testing.T) {
	cfg := modeConfig(docker.ConnectContainerNetwork)
	cfg.NamesDir = filepath.Join(t.TempDir(), "names")
	f := newFixture(t, cfg)
	spec := f.pairSpec("names-runc", bay.ContainerRuntimeRunc, bay.NetworkOpen)
	inst := f.create(f.d, spec)
	for _, c := range inst.Containers {
		waitHealthy(t, c.Endpoint)
	}
	for i, c := range inst.Containers {
		res, err := f.cli.ContainerInspect(t.Context(), c.ID, client.ContainerInspectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range res.Container.Mounts {
			if m.Destination == "/etc/resolv.conf" || m.Destination == "/etc/hosts" {
				t.Errorf("%s: %s is bound from %s under runc", c.Name, m.Destination, m.Source)
			}
		}
		if code, conf := get(t, c.Endpoint+"/file?path=/etc/resolv.conf"); code != 200 || !strings.Contains(conf, "nameserver 127.0.0.11") {
			t.Errorf("%s: /etc/resolv.conf %d %q, want the engine's embedded server", c.Name, code, conf)
		}
		peer := inst.Containers[1-i].Name
		if code, body := get(t, c.Endpoint+"/resolve?name="+peer); code != 200 {
			t.Errorf("%s resolving %s through the engine: %d %s", c.Name, peer, code, body)
		}
	}
	if _, err := os.Stat(cfg.NamesDir); !os.IsNotExist(err) {
		t.Errorf("names_dir made for a runc instance: %v", err)
	}
}

// TestStaleInstanceFiles: the name files of an instance of which the engine has nothing are
// listed once old enough, those of a live instance and young ones are not, and removing them
// removes the directory.
func TestStaleInstanceFiles(t *testing.T) {
	cfg := modeConfig(docker.ConnectContainerNetwork)
	cfg.NamesDir = filepath.Join(t.TempDir(), "names")
	f := newFixture(t, cfg)
	requireRunsc(t, f.d)
	if got, err := f.d.StaleInstanceFiles(t.Context(), time.Now()); err != nil || len(got) != 0 {
		t.Fatalf("without names_dir: %v, %v", got, err)
	}
	spec := f.spec("names-live")
	spec.Runtime = bay.ContainerRuntimeRunsc
	f.create(f.d, spec)
	gone := "drivertest-" + f.run + "-names-gone"
	young := "drivertest-" + f.run + "-names-young"
	old := time.Now().Add(-time.Hour)
	for _, n := range []string{gone, young} {
		if err := os.MkdirAll(filepath.Join(cfg.NamesDir, n), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(cfg.NamesDir, n, "hosts"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{filepath.Join(cfg.NamesDir, gone), filepath.Join(cfg.NamesDir, spec.Name)} {
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}
	got, err := f.d.StaleInstanceFiles(t.Context(), time.Now())
	if err != nil || len(got) != 1 || got[0] != gone {
		t.Fatalf("stale: %v, %v; want [%s]", got, err, gone)
	}
	if got, err := f.d.StaleInstanceFiles(t.Context(), old.Add(-time.Minute)); err != nil || len(got) != 0 {
		t.Errorf("stale before an earlier time: %v, %v; want none", got, err)
	}
	if err := f.d.RemoveInstanceFiles(t.Context(), gone); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(cfg.NamesDir, gone)); !os.IsNotExist(err) {
		t.Errorf("removed files still there: %v", err)
	}
}
