package docker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"

	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/egress"
)

// Network policies on the engine. Open (and the legacy isolated mode) is the sandbox network
// with the host firewall. The other two put the instance on an internal bridge of bay's own,
// with inter-container communication off, that bay still reaches the runtimes on:
//
//   - none: NoneNetwork, sealed (Egress.Seal): nothing is forwarded out of it and nothing of
//     the host answers it, so a connection to anywhere but loopback fails at once. (The
//     container keeps an interface, because bay talks to its runtime over it; the code in it
//     reaches nothing through it.)
//   - allowlist: EgressNetwork, where bay's resolver and egress gateway listen on the
//     bridge's gateway address (internal/bay/egress); the containers use it as their DNS
//     server and HTTP(S) proxy, and each is registered with the gateway under its address.
//
// A multi-container instance shares the network namespace of its owner, the only one of its
// containers on the policy's network (shared.go); under runsc its own network is internal and
// sealed too, so that its containers reach each other and nothing else through it.

// Network names of the closed policies.
const (
	NoneNetwork   = "shipyard-sandboxes-none"
	EgressNetwork = "shipyard-sandboxes-egress"
)

// Egress is bay's resolver and egress gateway (internal/bay/egress) as the driver uses it.
type Egress interface {
	// Attach starts the gateway on the gateway address of bridge and confines the bridge to
	// it; it returns the proxy URL the containers get as HTTP(S)_PROXY.
	Attach(ctx context.Context, bridge string, gateway netip.Addr) (proxyURL string, err error)
	// Seal confines bridge to itself: nothing forwarded out, nothing of the host answering
	// but, when gateway is valid, a resolver there that refuses every name.
	Seal(ctx context.Context, bridge string, gateway netip.Addr) error
	Register(addr, gateway netip.Addr, instance, sandboxID string, p bay.NetworkPolicy) error
	// Restore registers an instance found running that the gateway does not know; it refuses
	// one unregistered lately and an address another instance holds (reporting false).
	Restore(addr, gateway netip.Addr, instance, sandboxID string, p bay.NetworkPolicy) (bool, error)
	// Known reports whether the instance is registered.
	Known(instance string) bool
	Update(instance string, p bay.NetworkPolicy) error
	Unregister(instance string)
	Events(sandboxID string) ([]bay.NetworkEvent, int64)
}

// SetEgress sets the resolver and gateway that modes none and allowlist need. Without it an
// instance in those modes is refused. Call it before the driver is used.
func (d *Driver) SetEgress(e Egress) { d.egress = e }

// policyNet is where an instance of a closed policy runs.
type policyNet struct {
	name    string       // NoneNetwork or EgressNetwork; "" = open
	gateway netip.Addr   // the bridge's gateway address (allowlist: the resolver and gateway)
	dns     []netip.Addr // the containers' DNS servers
	env     map[string]string
}

// preparePolicy makes sure the network of spec's policy exists and is confined.
func (d *Driver) preparePolicy(ctx context.Context, spec bay.InstanceSpec) (policyNet, error) {
	mode := spec.Network.EffectiveMode()
	if mode == bay.NetworkOpen {
		return policyNet{}, nil
	}
	if d.egress == nil {
		return policyNet{}, bay.Errorf(bay.CodeUnavailable, "network mode %s needs bay's egress firewall, which is not running (security.sandbox_firewall)", mode)
	}
	if d.publishes() && d.cfg.ConnectMode == ConnectHostPort {
		return policyNet{}, fmt.Errorf("network mode %s: runtimes on an internal network cannot be reached through published ports (connect_mode host_port)", mode)
	}
	name := NoneNetwork
	if mode == bay.NetworkAllowlist {
		name = EgressNetwork
	}
	n, err := d.ensureInternalNetwork(ctx, name, map[string]string{"dev.shipyard.network": string(mode)}, false)
	if err != nil {
		return policyNet{}, err
	}
	pn := policyNet{name: name, gateway: networkGateway(n)}
	bridge := bridgeName(n)
	if mode == bay.NetworkNone {
		// The engine's embedded DNS asks bay's resolver on the gateway address, which refuses
		// every name at once (and counts it): a name fails promptly, not after timeouts.
		if pn.gateway.IsValid() {
			pn.dns = []netip.Addr{pn.gateway}
		}
		return pn, d.egress.Seal(ctx, bridge, pn.gateway)
	}
	if !pn.gateway.IsValid() {
		return policyNet{}, fmt.Errorf("network %s has no IPv4 gateway address for the egress gateway", name)
	}
	proxy, err := d.egress.Attach(ctx, bridge, pn.gateway)
	if err != nil {
		return policyNet{}, fmt.Errorf("network %s: %w", name, err)
	}
	pn.dns = []netip.Addr{pn.gateway}
	pn.env = map[string]string{
		"HTTP_PROXY": proxy, "HTTPS_PROXY": proxy, "http_proxy": proxy, "https_proxy": proxy,
		"NO_PROXY": "localhost,127.0.0.1,::1", "no_proxy": "localhost,127.0.0.1,::1",
	}
	return pn, nil
}

// ensureInternalNetwork returns the oldest network named name, creating it internal (no route
// out) when missing; icc says whether its containers reach each other. A network of that
// name that is not internal is refused.
func (d *Driver) ensureInternalNetwork(ctx context.Context, name string, labels map[string]string, icc bool) (network.Summary, error) {
	d.netMu.Lock()
	defer d.netMu.Unlock()
	nets, err := d.networksNamed(ctx, name)
	if err != nil {
		return network.Summary{}, fmt.Errorf("network %s: %w", name, err)
	}
	if len(nets) == 0 {
		opts := map[string]string{}
		if !icc {
			opts[iccOption] = "false"
		}
		// IPv6 off whatever the daemon's default ("ipv6": true): the engine then disables it in
		// the containers' namespaces (which they cannot turn back on, without capabilities and
		// with /proc/sys read-only), and the resolver and gateway speak IPv4 only.
		noV6 := false
		if _, err := d.cli.NetworkCreate(ctx, name, client.NetworkCreateOptions{Driver: "bridge", Internal: true, EnableIPv6: &noV6, Labels: labels, Options: opts}); err != nil {
			return network.Summary{}, fmt.Errorf("create network %s: %w", name, classify(err))
		}
		if nets, err = d.networksNamed(ctx, name); err != nil || len(nets) == 0 {
			return network.Summary{}, fmt.Errorf("network %s: gone right after its creation: %w", name, errors.Join(err, bay.ErrNotFound))
		}
	}
	slices.SortFunc(nets, oldestFirst)
	n := nets[0]
	if !n.Internal || (!icc && n.Options[iccOption] != "false") || n.EnableIPv6 {
		return network.Summary{}, fmt.Errorf("network %s exists but is not internal with IPv6 and inter-container communication off; remove it (bay recreates it)", name)
	}
	return n, nil
}

func networkGateway(n network.Summary) netip.Addr {
	for _, c := range n.IPAM.Config {
		if c.Gateway.Is4() {
			return c.Gateway
		}
	}
	return netip.Addr{}
}

// bridgeName is the Linux bridge of a bridge network.
func bridgeName(n network.Summary) string {
	if b := n.Options["com.docker.network.bridge.name"]; b != "" {
		return b
	}
	return "br-" + n.ID[:min(12, len(n.ID))]
}

// createClosedInstanceNetwork creates a multi-container instance's own network for a closed
// policy: internal, sealed, its containers reaching each other.
func (d *Driver) createClosedInstanceNetwork(ctx context.Context, name string, labels map[string]string) error {
	n, err := d.ensureInternalNetwork(ctx, name, labels, true)
	if err != nil {
		return err
	}
	return d.egress.Seal(ctx, bridgeName(n), netip.Addr{})
}

// registerEgress tells the resolver and gateway the address of every container of an instance
// of a closed policy.
func (d *Driver) registerEgress(ctx context.Context, spec bay.InstanceSpec, pn policyNet, containers []bay.InstanceContainer) error {
	if pn.name == "" {
		return nil
	}
	for _, c := range containers {
		res, err := d.cli.ContainerInspect(ctx, c.ID, client.ContainerInspectOptions{})
		if err != nil {
			return fmt.Errorf("container %s: %w", c.Name, classify(err))
		}
		var addr netip.Addr
		if res.Container.NetworkSettings != nil {
			if ep := res.Container.NetworkSettings.Networks[pn.name]; ep != nil {
				addr = ep.IPAddress
			}
		}
		if !addr.IsValid() {
			return fmt.Errorf("container %s has no address on %s", c.Name, pn.name)
		}
		if err := d.egress.Register(addr, pn.gateway, spec.Name, spec.Labels[bay.LabelSandboxID], spec.Network); err != nil {
			return err
		}
		if pn.name == EgressNetwork && res.Container.State != nil && hasRanges(spec.Network) && !underRunsc(res.Container.HostConfig) {
			if err := routeRanges(ctx, res.Container.State.Pid, pn.gateway, spec.Network); err != nil {
				return fmt.Errorf("container %s: %w", c.Name, err)
			}
		}
	}
	return nil
}

// underRunsc reports whether a container runs under gVisor. Its network stack is its own, with
// the namespace's addresses and routes taken at boot: a route added to the namespace later
// fails ("Nexthop has invalid gateway"). None is needed there: gVisor routes every address off
// its subnet to the network's gateway address, where the host's table and the gateway take
// the allowed ranges and refuse the rest, as for the routes added under runc.
func underRunsc(hc *container.HostConfig) bool {
	return hc != nil && hc.Runtime == bay.ContainerRuntimeRunsc
}

// hasRanges reports whether p's allow list has IPv4 ranges to route.
func hasRanges(p bay.NetworkPolicy) bool {
	parsed, err := bay.ParseNetworkPolicy("network", p)
	return err == nil && len(egress.RangesToRoute(parsed)) > 0
}

// routeRanges gives the network namespace of process pid (a container's) a route via gw to
// each IPv4 range of p's allow list, and none other of bay's: on an internal network a
// container has no route but its subnet's, so the ranges it may reach directly are exactly
// these (the gateway takes those connections: internal/bay/egress/direct.go). Routes of
// earlier lists are replaced.
func routeRanges(ctx context.Context, pid int, gw netip.Addr, p bay.NetworkPolicy) error {
	parsed, err := bay.ParseNetworkPolicy("network", p)
	if err != nil {
		return err
	}
	ranges := egress.RangesToRoute(parsed)
	if parsed.Mode != bay.NetworkAllowlist {
		ranges = nil
	}
	if pid <= 0 {
		return fmt.Errorf("route allowed ranges: the container has no process")
	}
	var b strings.Builder
	// proto static marks bay's routes: the engine's own are proto kernel.
	b.WriteString("route flush proto static\n")
	for _, r := range ranges {
		fmt.Fprintf(&b, "route replace %s via %s proto static\n", r, gw)
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(cctx, "nsenter", "--net=/proc/"+strconv.Itoa(pid)+"/ns/net", "ip", "-batch", "-")
	cmd.Stdin = strings.NewReader(b.String())
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("route allowed ranges: %w: %s", err, bytes.TrimSpace(out))
	}
	return nil
}

var (
	_ bay.NetworkEnforcer = (*Driver)(nil)
	_ bay.NetworkRestorer = (*Driver)(nil)
)

// RestoreNetworks registers with the resolver and gateway the running instances of closed
// policies they do not know: after bay restarted, everything those instances tried was
// refused (the gateway knows no one), and with several bays on one engine host only the one
// whose gateway holds the ports serves them. The gateway is started on the policy networks
// that exist; when it cannot be (another process holds its ports) their instances are left
// alone. An instance is registered only with the policy policy returns for it, and only on
// the network of that policy's mode: anything else stays refused (a change of mode under way
// destroys it anyway).
func (d *Driver) RestoreNetworks(ctx context.Context, policy bay.PolicyLookup) (int, error) {
	if d.egress == nil {
		return 0, nil
	}
	res, err := d.cli.ContainerList(ctx, client.ContainerListOptions{Filters: client.Filters{}.Add("label", bay.LabelManaged+"=true")})
	if err != nil {
		return 0, fmt.Errorf("restore network policies: list containers: %w", classify(err))
	}
	type found struct {
		net       string
		sandboxID string
		addrs     []netip.Addr
	}
	byInstance := map[string]*found{}
	var order []string
	for _, c := range res.Items {
		inst := c.Labels[bay.LabelInstance]
		if inst == "" || c.NetworkSettings == nil || d.egress.Known(inst) {
			continue
		}
		for _, name := range []string{EgressNetwork, NoneNetwork} {
			ep := c.NetworkSettings.Networks[name]
			if ep == nil || !ep.IPAddress.IsValid() {
				continue
			}
			f := byInstance[inst]
			if f == nil {
				f = &found{net: name, sandboxID: c.Labels[bay.LabelSandboxID]}
				byInstance[inst] = f
				order = append(order, inst)
			}
			if f.net == name {
				f.addrs = append(f.addrs, ep.IPAddress)
			}
		}
	}
	// Only instances of this bay's own sandboxes, under the policy of the network they are on,
	// are restored. Another deployment's sandboxes on the same engine host are none of its
	// business: their gateway stays with the bay that runs them, and this one does not take
	// the gateway's ports for them.
	var errs []error
	policies := map[string]bay.NetworkPolicy{}
	mine := order[:0]
	for _, inst := range order {
		f := byInstance[inst]
		p, ok, err := policy(ctx, inst)
		if err != nil {
			errs = append(errs, fmt.Errorf("instance %s: %w", inst, err))
			continue
		}
		if !ok {
			d.log.DebugContext(ctx, "running instance left refused: no sandbox of this bay runs it", "instance", inst, "network", f.net)
			continue
		}
		want := NoneNetwork
		if p.EffectiveMode() == bay.NetworkAllowlist {
			want = EgressNetwork
		}
		if p.EffectiveMode() == bay.NetworkOpen || want != f.net {
			d.log.InfoContext(ctx, "running instance left refused: its sandbox's policy is not the one of its network", "instance", inst, "network", f.net, "mode", p.EffectiveMode())
			continue
		}
		policies[inst] = p
		mine = append(mine, inst)
	}
	// The gateway on each policy network the instances are on (idempotent when it runs).
	gateways := map[string]netip.Addr{}
	for _, inst := range mine {
		name := byInstance[inst].net
		if _, done := gateways[name]; done {
			continue
		}
		nets, err := d.networksNamed(ctx, name)
		if err != nil {
			return 0, fmt.Errorf("restore network policies: %w", err)
		}
		slices.SortFunc(nets, oldestFirst)
		if len(nets) == 0 || !nets[0].Internal {
			continue
		}
		gw := networkGateway(nets[0])
		if name == EgressNetwork {
			_, err = d.egress.Attach(ctx, bridgeName(nets[0]), gw)
		} else {
			err = d.egress.Seal(ctx, bridgeName(nets[0]), gw)
		}
		if err != nil {
			d.log.DebugContext(ctx, "restore network policies: gateway not started here", "network", name, "err", err)
			continue
		}
		gateways[name] = gw
	}
	n := 0
	for _, inst := range mine {
		f := byInstance[inst]
		gw, ok := gateways[f.net]
		if !ok {
			continue
		}
		p := policies[inst]
		restored := false
		for _, a := range f.addrs {
			r, err := d.egress.Restore(a, gw, inst, f.sandboxID, p)
			if err != nil {
				errs = append(errs, err)
				break
			}
			restored = restored || r
		}
		if restored {
			n++
			d.log.InfoContext(ctx, "network policy restored", "instance", inst, "sandbox_id", f.sandboxID, "mode", p.EffectiveMode(), "addresses", len(f.addrs))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return n, fmt.Errorf("restore network policies: %w", err)
	}
	return n, nil
}

// UpdateNetwork changes a running allowlisted instance's allow list in place; any other change
// needs a new instance (bay.ErrRestartRequired).
func (d *Driver) UpdateNetwork(ctx context.Context, instance string, p bay.NetworkPolicy) error {
	if d.egress == nil || p.EffectiveMode() != bay.NetworkAllowlist {
		return fmt.Errorf("update network of %s: %w", instance, bay.ErrRestartRequired)
	}
	if err := d.egress.Update(instance, p); err != nil {
		return err
	}
	// The routes to the allowed ranges follow the list (the gateway already refuses a range
	// no longer in it).
	nets, err := d.networksNamed(ctx, EgressNetwork)
	if err != nil || len(nets) == 0 {
		return fmt.Errorf("update network of %s: %w", instance, errors.Join(err, bay.ErrRestartRequired))
	}
	slices.SortFunc(nets, oldestFirst)
	gw := networkGateway(nets[0])
	list, err := d.cli.ContainerList(ctx, client.ContainerListOptions{Filters: client.Filters{}.Add("label", bay.LabelInstance+"="+instance)})
	if err != nil {
		return fmt.Errorf("update network of %s: %w", instance, classify(err))
	}
	for _, c := range list.Items {
		if netOwnerOf(c.HostConfig.NetworkMode) != "" {
			continue // its namespace is the owner's, routed with it
		}
		res, err := d.cli.ContainerInspect(ctx, c.ID, client.ContainerInspectOptions{})
		if err != nil {
			return fmt.Errorf("update network of %s: %w", instance, classify(err))
		}
		if res.Container.State == nil || res.Container.State.Pid <= 0 || underRunsc(res.Container.HostConfig) {
			continue
		}
		if err := routeRanges(ctx, res.Container.State.Pid, gw, p); err != nil {
			return fmt.Errorf("update network of %s: %w: %w", instance, err, bay.ErrRestartRequired)
		}
	}
	return nil
}

// NetworkEvents returns the gateway's refusals for the sandbox.
func (d *Driver) NetworkEvents(_ context.Context, sandboxID string) ([]bay.NetworkEvent, int64, error) {
	if d.egress == nil {
		return nil, 0, nil
	}
	events, denied := d.egress.Events(sandboxID)
	return events, denied, nil
}

// peersBypassProxy is the policy's environment for the containers of spec: under the allowlist
// the containers of a multi-container instance reach each other directly, on the loopback of
// the namespace they share (shared.go) or under runsc on the instance's own network, so their
// names (the short one and the engine's) join NO_PROXY. Otherwise a client that honours
// HTTP_PROXY, Chromium in gull among them, would send a call to a peer (http://ship:8000/) to
// the egress gateway, which refuses names that are not on the list (and would not reach a
// peer's loopback anyway).
func peersBypassProxy(env map[string]string, spec bay.InstanceSpec, multi bool) map[string]string {
	if !multi || env["NO_PROXY"] == "" {
		return env
	}
	names := []string{env["NO_PROXY"]}
	for _, c := range spec.Containers {
		names = append(names, c.Name, containerName(spec.Name, multi, c.Name))
	}
	out := maps.Clone(env)
	out["NO_PROXY"] = strings.Join(names, ",")
	out["no_proxy"] = out["NO_PROXY"]
	return out
}

// withEnv is env with extra's variables added (extra wins); env itself is not changed.
func withEnv(env, extra map[string]string) map[string]string {
	if len(extra) == 0 {
		return env
	}
	out := make(map[string]string, len(env)+len(extra))
	maps.Copy(out, env)
	maps.Copy(out, extra)
	return out
}
