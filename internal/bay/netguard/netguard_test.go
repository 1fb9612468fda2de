package netguard_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/docker"
	"github.com/shipyard-dev/shipyard/internal/bay/drivertest/testimage"
	"github.com/shipyard-dev/shipyard/internal/bay/netguard"
	"github.com/shipyard-dev/shipyard/internal/testenv"
)

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// listen serves "ok\n" to every connection on addr until the test ends.
func listen(t *testing.T, network, addr string) string {
	t.Helper()
	ln, err := net.Listen(network, addr)
	if err != nil {
		t.Fatalf("listen %s: %v", addr, err)
	}
	t.Cleanup(func() { ln.Close() })
	go testenv.Answer(ln, []byte("ok\n"))
	return ln.Addr().String()
}

// inNetns runs f on a thread that has joined the network namespace at nsPath; sockets f
// creates live in that namespace.
func inNetns(t *testing.T, nsPath string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		orig, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", syscall.Gettid()))
		if err != nil {
			t.Error(err)
			runtime.UnlockOSThread()
			return
		}
		defer orig.Close()
		target, err := os.Open(nsPath)
		if err != nil {
			t.Error(err)
			runtime.UnlockOSThread()
			return
		}
		defer target.Close()
		if err := setns(target); err != nil {
			t.Errorf("setns %s: %v", nsPath, err)
			runtime.UnlockOSThread()
			return
		}
		f()
		if err := setns(orig); err != nil {
			// The thread stays locked and dies with this goroutine: never reused in the wrong
			// namespace.
			t.Errorf("setns back: %v", err)
			return
		}
		runtime.UnlockOSThread()
	}()
	<-done
}

func setns(f *os.File) error {
	if _, _, e := syscall.RawSyscall(sysSetns, f.Fd(), syscall.CLONE_NEWNET, 0); e != 0 {
		return e
	}
	return nil
}

// dialFrom connects to addr from inside the namespace and reads the greeting.
func dialFrom(t *testing.T, nsPath, addr string) error {
	var err error
	inNetns(t, nsPath, func() {
		var c net.Conn
		c, err = net.DialTimeout("tcp", addr, 3*time.Second)
		if err != nil {
			return
		}
		defer c.Close()
		_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
		var line string
		line, err = bufio.NewReader(c).ReadString('\n')
		if err == nil && line != "ok\n" {
			err = fmt.Errorf("unexpected greeting %q", line)
		}
	})
	return err
}

// hostHas reports whether ip is an address of an interface of this host.
func hostHas(t *testing.T, ip netip.Addr) bool {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil && p.Addr() == ip {
			return true
		}
	}
	return false
}

func run(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
}

// privateNetns makes a network namespace joined to the host by a veth pair on a /30 of the
// shared address space (100.64.0.0/10, blocked by default) that no interface here uses; it
// returns the namespace's path and its address.
func privateNetns(t *testing.T) (string, netip.Addr) {
	t.Helper()
	var subnet netip.Prefix
	for range 20 {
		b := make([]byte, 2)
		_, _ = rand.Read(b)
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{100, 100 + b[0]%27, b[1], 0}), 24).Masked()
		out, _ := exec.Command("ip", "-4", "route", "show", "match", p.Addr().Next().String()).Output()
		if !strings.Contains(string(out), "100.") {
			subnet = p
			break
		}
	}
	if !subnet.IsValid() {
		t.Fatal("no free /24 in 100.64.0.0/10 for the test namespace")
	}
	id := randHex(3)
	ns, host, peer := "syng-"+id, "syngh"+id, "syngp"+id
	run(t, "ip", "netns", "add", ns)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
	run(t, "ip", "link", "add", host, "type", "veth", "peer", "name", peer)
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", host).Run() })
	run(t, "ip", "link", "set", peer, "netns", ns)
	hostIP, nsIP := subnet.Addr().Next(), subnet.Addr().Next().Next()
	run(t, "ip", "addr", "add", hostIP.String()+"/30", "dev", host)
	run(t, "ip", "link", "set", host, "up")
	run(t, "ip", "-n", ns, "addr", "add", nsIP.String()+"/30", "dev", peer)
	run(t, "ip", "-n", ns, "link", "set", peer, "up")
	run(t, "ip", "-n", ns, "link", "set", "lo", "up")
	run(t, "ip", "-n", ns, "route", "add", "default", "via", hostIP.String())
	return "/run/netns/" + ns, nsIP
}

// sandboxNetwork creates an isolated bridge network like the driver's sandbox network and
// starts a container on it through the Docker driver (hardened as every sandbox). It returns
// the driver, the network, and the container's network namespace.
func sandboxNetwork(t *testing.T, ctx context.Context) (*docker.Driver, string, string) {
	cli, err := client.New(client.WithHost(docker.DefaultSocket))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	image, err := testimage.Ensure(ctx, cli)
	if err != nil {
		t.Fatalf("test image: %v", err)
	}
	name := "shipyard-netguard-test-" + randHex(4)
	res, err := cli.NetworkCreate(ctx, name, client.NetworkCreateOptions{Driver: "bridge",
		Labels:  map[string]string{"shipyard.test": "netguard"},
		Options: map[string]string{"com.docker.network.bridge.enable_icc": "false"}})
	if err != nil {
		t.Fatalf("create network: %v", err)
	}
	dc := docker.DefaultConfig()
	dc.Network = name
	dc.ConnectMode = docker.ConnectContainerNetwork
	dc.PublishPorts = false
	d, err := docker.New(dc, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := d.DestroyInstance(ctx, name); err != nil {
			t.Errorf("destroy instance: %v", err)
		}
		if _, err := cli.NetworkRemove(ctx, res.ID, client.NetworkRemoveOptions{}); err != nil {
			t.Errorf("remove network: %v", err)
		}
		d.Close()
	})
	inst, err := d.CreateInstance(ctx, bay.InstanceSpec{Name: name, Labels: map[string]string{"shipyard.test": "netguard"},
		Containers: []bay.ContainerSpec{{Name: "ship", RuntimeType: bay.RuntimeShip, Image: image, Port: testimage.Port}}})
	if err != nil {
		t.Fatal(err)
	}
	id := inst.Containers[0].ID
	ins, err := cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil || ins.Container.State == nil || ins.Container.State.Pid == 0 {
		t.Fatalf("inspect container: %v", err)
	}
	return d, name, fmt.Sprintf("/proc/%d/ns/net", ins.Container.State.Pid)
}

// gateway reads a network's IPv4 gateway from the engine.
func gateway(t *testing.T, ctx context.Context, name string) (netip.Addr, string) {
	t.Helper()
	cli, err := client.New(client.WithHost(docker.DefaultSocket))
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	res, err := cli.NetworkInspect(ctx, name, client.NetworkInspectOptions{})
	if err != nil {
		t.Fatalf("inspect network %s: %v", name, err)
	}
	bridge := netguard.BridgeName(res.Network.ID, res.Network.Options)
	for _, c := range res.Network.IPAM.Config {
		if c.Gateway.Is4() {
			return c.Gateway, bridge
		}
		// The engine leaves the default bridge's gateway out: it is the address of the
		// bridge interface the engine names, inside the subnet the engine reports.
		if c.Subnet.Addr().Is4() {
			ifc, err := net.InterfaceByName(bridge)
			if err != nil {
				t.Fatalf("bridge %s of network %s: %v", bridge, name, err)
			}
			addrs, _ := ifc.Addrs()
			for _, a := range addrs {
				if p, err := netip.ParsePrefix(a.String()); err == nil && c.Subnet.Contains(p.Addr()) {
					return p.Addr(), bridge
				}
			}
		}
	}
	t.Fatalf("network %s has no IPv4 gateway", name)
	return netip.Addr{}, ""
}

func newGuard(t *testing.T, ctx context.Context, table string, allowed ...netip.Prefix) *netguard.Guard {
	t.Helper()
	blocked, err := netguard.ParseHosts(netguard.DefaultBlocked)
	if err != nil {
		t.Fatal(err)
	}
	g, err := netguard.New(ctx, netguard.Config{Table: table, Blocked: blocked, Allowed: allowed})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// A container on a sandbox network reaches a host listener through its gateway, a listener on
// another host address (the default bridge's gateway, read from the engine) and a private
// address forwarded off the host (a namespace of the test's own) without the firewall, and
// none of them with it; allowed ranges are let through again; installing twice or from
// several guards at once leaves one copy of the rules.
func TestGuardBlocksHostAndPrivateRanges(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	d, netName, sandboxNS := sandboxNetwork(t, ctx)
	gw, bridge := gateway(t, ctx, netName)
	docker0, _ := gateway(t, ctx, "bridge")
	if !hostHas(t, gw) || !hostHas(t, docker0) {
		t.Fatalf("gateways %s and %s must be addresses of this host", gw, docker0)
	}
	_, anyPort, _ := net.SplitHostPort(listen(t, "tcp4", "0.0.0.0:0"))
	viaGateway := net.JoinHostPort(gw.String(), anyPort)
	onDocker0 := listen(t, "tcp4", net.JoinHostPort(docker0.String(), "0"))
	nsPath, nsIP := privateNetns(t)
	var private string
	inNetns(t, nsPath, func() { private = listen(t, "tcp4", net.JoinHostPort(nsIP.String(), "0")) })
	targets := []string{viaGateway, onDocker0, private}

	// Control: without the firewall every target answers.
	for _, a := range targets {
		if err := dialFrom(t, sandboxNS, a); err != nil {
			t.Fatalf("control: %s unreachable from the sandbox without the firewall: %v", a, err)
		}
	}

	table := "shipyard_test_" + randHex(4)
	g := newGuard(t, ctx, table)
	t.Cleanup(func() {
		if err := g.Uninstall(context.Background()); err != nil {
			t.Errorf("uninstall: %v", err)
		}
	})
	// The driver calls Protect for the networks sandboxes join (the e2e firewall test covers
	// that path through the bay binary); here the test network is protected directly.
	if err := g.Protect(ctx, bridge); err != nil {
		t.Fatalf("Protect: %v", err)
	}
	if got, err := g.Bridges(ctx); err != nil || len(got) != 1 || got[0] != bridge {
		t.Fatalf("guarded bridges = %v, %v; want [%s]", got, err, bridge)
	}
	for _, a := range targets {
		began := time.Now()
		err := dialFrom(t, sandboxNS, a)
		if err == nil {
			t.Errorf("%s reachable from the sandbox with the firewall", a)
		} else if took := time.Since(began); took > 5*time.Second {
			t.Errorf("%s: blocked after %v, want a prompt refusal", a, took)
		} else {
			t.Logf("%s blocked after %v: %v", a, took.Round(time.Millisecond), err)
		}
	}
	// The host still reaches the sandbox (replies to connections it opens pass).
	ip, err := sandboxIP(ctx, d, netName)
	if err != nil {
		t.Fatal(err)
	}
	if c, err := net.DialTimeout("tcp", net.JoinHostPort(ip, fmt.Sprint(testimage.Port)), 3*time.Second); err != nil {
		t.Errorf("host to sandbox runtime: %v", err)
	} else {
		c.Close()
	}

	// A table removed behind bay's back comes back on the next refresh.
	if out, err := exec.Command("nft", "delete", "table", "inet", table).CombinedOutput(); err != nil {
		t.Fatalf("delete: %v %s", err, out)
	}
	if err := g.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if err := dialFrom(t, sandboxNS, viaGateway); err == nil {
		t.Errorf("%s reachable after the refresh", viaGateway)
	}

	before := listTable(t, table)
	// Idempotent: another guard (another bay) installing again, several at once.
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			if err := newGuard(t, ctx, table).Protect(ctx, bridge); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if after := listTable(t, table); after != before {
		t.Errorf("reinstalling changed the table:\nbefore:\n%s\nafter:\n%s", before, after)
	}

	// Allowed ranges win over the blocked ranges and over the host block.
	allowed := newGuard(t, ctx, table, netip.PrefixFrom(docker0, 32), netip.PrefixFrom(nsIP, 32))
	if err := allowed.Protect(ctx, bridge); err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{onDocker0, private} {
		if err := dialFrom(t, sandboxNS, a); err != nil {
			t.Errorf("%s allowed but unreachable: %v", a, err)
		}
	}
	if err := dialFrom(t, sandboxNS, viaGateway); err == nil {
		t.Errorf("%s reachable although not allowed", viaGateway)
	}

	// A restarted bay (a new guard) finds the bridges in the table and installs its own
	// configuration on its first refresh, before any sandbox starts: the exceptions are gone.
	if err := newGuard(t, ctx, table).Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if err := dialFrom(t, sandboxNS, onDocker0); err == nil {
		t.Errorf("%s still allowed after a restart without the exception", onDocker0)
	}

	// The host's resolvers stay reachable on port 53 only (a resolver of the test's own).
	var dnsPort string
	inNetns(t, nsPath, func() { dnsPort = listen(t, "tcp4", net.JoinHostPort(nsIP.String(), "53")) })
	blocked, _ := netguard.ParseHosts(netguard.DefaultBlocked)
	dns, err := netguard.New(ctx, netguard.Config{Table: table, Blocked: blocked, Resolvers: []netip.Addr{nsIP}})
	if err != nil {
		t.Fatal(err)
	}
	if err := dns.Protect(ctx, bridge); err != nil {
		t.Fatal(err)
	}
	if err := dialFrom(t, sandboxNS, dnsPort); err != nil {
		t.Errorf("resolver %s unreachable: %v", dnsPort, err)
	}
	if err := dialFrom(t, sandboxNS, private); err == nil {
		t.Errorf("%s reachable: only port 53 of a resolver is", private)
	}

	// Releasing the bridge opens it again (tests only; bay never releases).
	if err := dns.Release(ctx, bridge); err != nil {
		t.Fatal(err)
	}
	if err := dialFrom(t, sandboxNS, viaGateway); err != nil {
		t.Errorf("after release: %v", err)
	}
}

func sandboxIP(ctx context.Context, d *docker.Driver, netName string) (string, error) {
	cli, err := client.New(client.WithHost(docker.DefaultSocket))
	if err != nil {
		return "", err
	}
	defer cli.Close()
	res, err := cli.NetworkInspect(ctx, netName, client.NetworkInspectOptions{})
	if err != nil {
		return "", err
	}
	for _, c := range res.Network.Containers {
		if c.IPv4Address.IsValid() {
			return c.IPv4Address.Addr().String(), nil
		}
	}
	return "", errors.New("no container on " + netName)
}

func listTable(t *testing.T, table string) string {
	t.Helper()
	out, err := exec.Command("nft", "-s", "list", "table", "inet", table).CombinedOutput()
	if err != nil {
		t.Fatalf("nft list: %v: %s", err, out)
	}
	return string(out)
}

// Where the firewall cannot be installed, the guard says so and how to run without it.
func TestGuardUnavailable(t *testing.T) {
	_, err := netguard.New(t.Context(), netguard.Config{NFT: "/nonexistent/nft"})
	if !errors.Is(err, netguard.ErrUnavailable) || !strings.Contains(err.Error(), "security.sandbox_firewall: false") {
		t.Fatalf("missing nft: %v", err)
	}
	g := newGuard(t, t.Context(), "shipyard_test_"+randHex(4))
	t.Cleanup(func() { _ = g.Uninstall(context.Background()) })
	if err := g.Protect(t.Context(), "br-"+randHex(5)); !errors.Is(err, netguard.ErrUnavailable) {
		t.Fatalf("bridge not on this host: %v", err)
	}
	if err := g.Protect(t.Context(), `x"; flush ruleset`); err == nil {
		t.Fatal("a hostile interface name was accepted")
	}
}

func TestParseHosts(t *testing.T) {
	got, err := netguard.ParseHosts([]string{"10.1.2.3", "10.1.2.0/24", "fd00::1", "::ffff:10.0.0.1", "172.16.5.4/12"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"10.1.2.3/32", "10.1.2.0/24", "fd00::1/128", "10.0.0.1/32", "172.16.0.0/12"}
	for i, p := range got {
		if p.String() != want[i] {
			t.Errorf("[%d] = %s, want %s", i, p, want[i])
		}
	}
	for _, bad := range []string{"", "intranet", "10.0.0.0/33", "fe80::1%eth0", "10.0.0.1-10.0.0.5"} {
		if _, err := netguard.ParseHosts([]string{bad}); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestResolvers(t *testing.T) {
	f := t.TempDir() + "/resolv.conf"
	if err := os.WriteFile(f, []byte("# x\nnameserver 10.255.255.53\nnameserver 10.255.255.53\nnameserver 127.0.0.53\nnameserver fe80::1%eth0\nnameserver fd00::53\nsearch example\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(netguard.Resolvers(f))
	if got != "[10.255.255.53 fd00::53]" {
		t.Fatalf("resolvers = %s", got)
	}
}

// sysSetns is the number of setns(2), which the syscall package does not name.
var sysSetns = map[string]uintptr{"amd64": 308, "arm64": 268}[runtime.GOARCH]
