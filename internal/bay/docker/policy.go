package docker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"

	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"

	"github.com/shipyard-dev/shipyard/internal/bay"
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
// A multi-container instance's own network is internal and sealed too, so that its containers
// reach each other and nothing else through it.

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
		if _, err := d.cli.NetworkCreate(ctx, name, client.NetworkCreateOptions{Driver: "bridge", Internal: true, Labels: labels, Options: opts}); err != nil {
			return network.Summary{}, fmt.Errorf("create network %s: %w", name, classify(err))
		}
		if nets, err = d.networksNamed(ctx, name); err != nil || len(nets) == 0 {
			return network.Summary{}, fmt.Errorf("network %s: gone right after its creation: %w", name, errors.Join(err, bay.ErrNotFound))
		}
	}
	slices.SortFunc(nets, oldestFirst)
	n := nets[0]
	if !n.Internal || (!icc && n.Options[iccOption] != "false") {
		return network.Summary{}, fmt.Errorf("network %s exists but is not internal with inter-container communication off; remove it (bay recreates it)", name)
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
func (d *Driver) registerEgress(ctx context.Context, spec bay.InstanceSpec, pn policyNet, inst bay.Instance) error {
	if pn.name == "" {
		return nil
	}
	for _, c := range inst.Containers {
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
	}
	return nil
}

var _ bay.NetworkEnforcer = (*Driver)(nil)

// UpdateNetwork changes a running allowlisted instance's allow list in place; any other change
// needs a new instance (bay.ErrRestartRequired).
func (d *Driver) UpdateNetwork(ctx context.Context, instance string, p bay.NetworkPolicy) error {
	if d.egress == nil || p.EffectiveMode() != bay.NetworkAllowlist {
		return fmt.Errorf("update network of %s: %w", instance, bay.ErrRestartRequired)
	}
	return d.egress.Update(instance, p)
}

// NetworkEvents returns the gateway's refusals for the sandbox.
func (d *Driver) NetworkEvents(sandboxID string) ([]bay.NetworkEvent, int64) {
	if d.egress == nil {
		return nil, 0
	}
	return d.egress.Events(sandboxID)
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
