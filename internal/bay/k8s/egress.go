package k8s

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/egress"
	"github.com/shipyard-dev/shipyard/internal/bay/k8s/egressgw"
	"github.com/shipyard-dev/shipyard/internal/bay/k8s/kube"
)

// An allowlist that names hosts is enforced by the egress gateway (`bay egress-gateway`, package
// egressgw), a Deployment behind a Service of the operator's: the sandbox Pod gets the
// Service's address as its only nameserver (dnsPolicy None), HTTP(S)_PROXY pointing at the
// Service's proxy port, a NetworkPolicy whose egress admits the gateway's Pods on the
// gateway's ports (and the list's address entries, as without a gateway) and nothing else, not
// even the cluster's DNS, and the annotation the gateway learns its policy from. The create
// returns once every ready gateway Pod applied it; a PATCH patches the annotation and the
// NetworkPolicy and waits alike.

// EgressGateway points the driver at its egress gateway.
type EgressGateway struct {
	// Service names the gateway's Service ("" = no gateway: allowlists naming hosts are
	// refused); Namespace is its namespace ("" = the driver's).
	Service, Namespace string
	// Token authenticates bay on the gateway Pods' admin port.
	Token string
	// ApplyTimeout bounds the wait for every ready gateway Pod to apply a policy.
	ApplyTimeout time.Duration
}

// DefaultApplyTimeout is EgressGateway.ApplyTimeout's default.
const DefaultApplyTimeout = 15 * time.Second

// egressGatewayKey names the configuration key an operator sets to enforce name allowlists.
const egressGatewayKey = "driver.k8s.egress_gateway.service"

// gatewayInfo is the gateway Service as a create or update reads it.
type gatewayInfo struct {
	ns string
	egressgw.ServicePorts
}

// namesHosts reports whether an allowlist names a host (allow or deny): only the gateway can
// enforce it.
func namesHosts(p bay.NetworkPolicy) bool {
	if p.EffectiveMode() != bay.NetworkAllowlist {
		return false
	}
	parsed, err := bay.ParseNetworkPolicy("network", p)
	if err != nil {
		return false // refused where it is parsed for the NetworkPolicy
	}
	for _, e := range slices.Concat(parsed.Allow, parsed.Deny) {
		if !e.Prefix.IsValid() {
			return true
		}
	}
	return false
}

// gateway reads the gateway's Service for a policy that needs it; nil for one that does not.
func (d *Driver) gateway(ctx context.Context, p bay.NetworkPolicy) (*gatewayInfo, error) {
	if !namesHosts(p) {
		return nil, nil
	}
	g := d.cfg.EgressGateway
	if g.Service == "" {
		return nil, bay.Errorf(bay.CodeCapabilityNotSupported,
			"This Kubernetes driver has no egress gateway, so it enforces network allowlists by address only (a NetworkPolicy cannot name hosts); an operator enables names with %s", egressGatewayKey)
	}
	return d.readGateway(ctx)
}

// readGateway reads the configured gateway's Service.
func (d *Driver) readGateway(ctx context.Context) (*gatewayInfo, error) {
	ns := cmp.Or(d.cfg.EgressGateway.Namespace, d.cfg.Namespace)
	sp, err := egressgw.ReadService(ctx, d.cs, ns, d.cfg.EgressGateway.Service)
	if err != nil {
		return nil, bay.Classified(errGatewayUnavailable, classify(err))
	}
	return &gatewayInfo{ns: ns, ServicePorts: sp}, nil
}

var errGatewayUnavailable = &bay.Error{Code: bay.CodeUnavailable, Message: "the egress gateway is unavailable"}

// gatewayRule admits the gateway's Pods on the gateway's ports: DNS over UDP and TCP, the
// transparent HTTP and TLS ports and the proxy.
func (g *gatewayInfo) rule() kube.NetworkPolicyEgressRule {
	tcp, udp := kube.ProtocolTCP, kube.ProtocolUDP
	port := func(name string, proto *kube.Protocol) kube.NetworkPolicyPort {
		p := kube.FromInt32(int32(g.Target[name]))
		return kube.NetworkPolicyPort{Protocol: proto, Port: &p}
	}
	return kube.NetworkPolicyEgressRule{
		To: []kube.NetworkPolicyPeer{{
			NamespaceSelector: &kube.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": g.ns}},
			PodSelector:       &kube.LabelSelector{MatchLabels: g.Selector},
		}},
		Ports: []kube.NetworkPolicyPort{port(egressgw.PortDNS, &udp), port(egressgw.PortDNSTCP, &tcp),
			port(egressgw.PortHTTP, &tcp), port(egressgw.PortTLS, &tcp), port(egressgw.PortProxy, &tcp)},
	}
}

// proxyEnv is what the containers of a gateway-served Pod get: the proxy for the clients that
// honour it, the Pod's own names past it (its containers reach each other on loopback).
func (g *gatewayInfo) proxyEnv(spec bay.InstanceSpec) []kube.EnvVar {
	proxy := "http://" + net.JoinHostPort(g.ClusterIP.String(), strconv.Itoa(g.Service[egressgw.PortProxy]))
	noProxy := []string{"localhost", "127.0.0.1", "::1"}
	if len(spec.Containers) > 1 {
		for _, c := range spec.Containers {
			noProxy = append(noProxy, c.Name)
		}
	}
	np := strings.Join(noProxy, ",")
	env := []kube.EnvVar{
		{Name: "HTTP_PROXY", Value: proxy}, {Name: "HTTPS_PROXY", Value: proxy},
		{Name: "http_proxy", Value: proxy}, {Name: "https_proxy", Value: proxy},
		{Name: "NO_PROXY", Value: np}, {Name: "no_proxy", Value: np},
	}
	return env
}

// sandboxOf is the sandbox an instance's refusals are recorded for (its instance name when it
// has none, as a one-shot may not).
func sandboxOf(spec bay.InstanceSpec) string {
	return cmp.Or(spec.Labels[bay.LabelSandboxID], spec.Name)
}

// routeThroughGateway makes pod a client of the gateway: its resolver, its proxy variables
// (replacing any of the spec's) and the policy annotation; it returns the annotation's value.
func (g *gatewayInfo) routeThroughGateway(pod *kube.Pod, spec bay.InstanceSpec) (string, error) {
	ann, err := egressgw.Encode(sandboxOf(spec), spec.Network)
	if err != nil {
		return "", err
	}
	pod.Annotations[egressgw.AnnotationPolicy] = ann
	pod.Spec.DNSPolicy = kube.DNSNone
	pod.Spec.DNSConfig = &kube.PodDNSConfig{Nameservers: []string{g.ClusterIP.String()}}
	setEnv(pod, g.proxyEnv(spec)...)
	return ann, nil
}

// setEnv sets env in every container of pod, replacing the variables of the same names.
func setEnv(pod *kube.Pod, env ...kube.EnvVar) {
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		c.Env = slices.DeleteFunc(c.Env, func(e kube.EnvVar) bool {
			return slices.ContainsFunc(env, func(p kube.EnvVar) bool { return p.Name == e.Name })
		})
		c.Env = append(c.Env, env...)
	}
}

// gatewayPods lists the gateway's Pods.
func (d *Driver) gatewayPods(ctx context.Context, g *gatewayInfo) ([]kube.Pod, error) {
	var sel []string
	for k, v := range g.Selector {
		sel = append(sel, k+"="+v)
	}
	slices.Sort(sel)
	list, err := d.cs.Pods(g.ns).List(ctx, kube.ListOptions{LabelSelector: strings.Join(sel, ",")})
	if err != nil {
		return nil, bay.Classified(errGatewayUnavailable, fmt.Errorf("list egress gateway Pods: %w", classify(err)))
	}
	return list.Items, nil
}

// readyGateways are the addresses (host:admin port) of the gateway's ready Pods.
func (d *Driver) readyGateways(ctx context.Context, g *gatewayInfo) ([]string, error) {
	pods, err := d.gatewayPods(ctx, g)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, p := range pods {
		ready := false
		for _, c := range p.Status.Conditions {
			ready = ready || (c.Type == kube.PodReady && c.Status == kube.ConditionTrue)
		}
		if ready && p.DeletionTimestamp == nil && p.Status.PodIP != "" {
			out = append(out, net.JoinHostPort(p.Status.PodIP, strconv.Itoa(g.Target[egressgw.PortAdmin])))
		}
	}
	if len(out) == 0 {
		return nil, bay.Classified(errGatewayUnavailable, fmt.Errorf("no ready Pod of the egress gateway Service %s/%s", g.ns, d.cfg.EgressGateway.Service))
	}
	return out, nil
}

// waitApplied waits until every ready gateway Pod applied the annotation ann for Pod name (a
// Pod the gateway does not know yet is refused everything, so until then the sandbox would
// reach nothing), at most ApplyTimeout.
func (d *Driver) waitApplied(ctx context.Context, g *gatewayInfo, name, ann string) error {
	ctx, cancel := context.WithTimeout(ctx, d.cfg.EgressGateway.ApplyTimeout)
	defer cancel()
	want := egressgw.Version(ann)
	cl := egressgw.NewClient(d.cfg.EgressGateway.Token)
	var last error
	for {
		addrs, err := d.readyGateways(ctx, g)
		pending := 0
		if err == nil {
			for _, a := range addrs {
				v, verr := cl.PodVersion(ctx, a, name)
				if verr != nil {
					err = verr
				}
				if v != want {
					pending++
				}
			}
		}
		if err == nil && pending == 0 {
			return nil
		}
		if err != nil {
			last = err
		} else {
			last = fmt.Errorf("%d of %d gateway Pods have not applied it", pending, len(addrs))
		}
		select {
		case <-ctx.Done():
			return bay.Classified(errGatewayUnavailable, fmt.Errorf("the egress gateway did not apply the policy of %s within %v: %w", name, d.cfg.EgressGateway.ApplyTimeout, last))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// egressRules are the NetworkPolicy's egress rules for policy p (see networkPolicy).
func (d *Driver) egressRules(p bay.NetworkPolicy, g *gatewayInfo) ([]kube.NetworkPolicyEgressRule, error) {
	var egress []kube.NetworkPolicyEgressRule
	mode := p.EffectiveMode()
	switch mode {
	case bay.NetworkNone:
	case bay.NetworkAllowlist:
		rules, err := d.allowlistEgress(p, g != nil)
		if err != nil {
			return nil, err
		}
		egress = rules
		if g != nil {
			egress = append(egress, g.rule())
		}
	default:
		egress = d.openEgress()
	}
	// A gateway-served Pod resolves through the gateway only: the cluster's DNS would answer
	// any name (and carry a tunnel through a refused zone out).
	if d.cfg.AllowDNS && mode != bay.NetworkNone && g == nil {
		egress = append(egress, kubeDNSRule())
	}
	return egress, nil
}

// UpdateNetwork changes a running instance's allowlist in place: its NetworkPolicy's egress
// and, for a gateway-served Pod, the annotation the gateway follows (which closes the open
// connections the new list refuses); it returns once every ready gateway Pod applied it. A
// change of mode, or names in the list of a Pod the gateway does not serve (its resolver is the
// cluster's), needs a new instance: bay.ErrRestartRequired. An unknown instance wraps
// bay.ErrNotFound.
func (d *Driver) UpdateNetwork(ctx context.Context, instance string, p bay.NetworkPolicy) error {
	if p.EffectiveMode() != bay.NetworkAllowlist {
		return fmt.Errorf("update network of %s: %w", instance, bay.ErrRestartRequired)
	}
	pods := d.cs.Pods(d.cfg.Namespace)
	pod, err := pods.Get(ctx, instance)
	if err != nil {
		return fmt.Errorf("update network of %s: %w", instance, classify(err))
	}
	old, served := pod.Annotations[egressgw.AnnotationPolicy]
	var g *gatewayInfo
	switch {
	case served:
		// Read whatever the new list names: the Pod's resolver is the gateway either way.
		if d.cfg.EgressGateway.Service == "" {
			return fmt.Errorf("update network of %s: no egress gateway configured: %w", instance, bay.ErrRestartRequired)
		}
		if g, err = d.readGateway(ctx); err != nil {
			return fmt.Errorf("update network of %s: %w", instance, err)
		}
	case namesHosts(p):
		return fmt.Errorf("update network of %s: names need the egress gateway: %w", instance, bay.ErrRestartRequired)
	}
	rules, err := d.egressRules(p, g)
	if err != nil {
		return fmt.Errorf("update network of %s: %w", instance, err)
	}
	if d.cfg.NetworkPolicy {
		patch, err := json.Marshal(map[string]any{"spec": map[string]any{"egress": rules}})
		if err != nil {
			return err
		}
		if _, err := d.cs.NetworkPolicies(d.cfg.Namespace).Patch(ctx, instance, kube.MergePatchType, patch); err != nil {
			return fmt.Errorf("update network of %s: network policy: %w", instance, classify(err))
		}
	}
	if !served {
		return nil
	}
	prev, err := egressgw.Decode(old)
	if err != nil {
		return fmt.Errorf("update network of %s: %w: %w", instance, err, bay.ErrRestartRequired)
	}
	ann, err := egressgw.Encode(prev.SandboxID, p)
	if err != nil {
		return err
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{egressgw.AnnotationPolicy: ann}}})
	if err != nil {
		return err
	}
	if _, err := pods.Patch(ctx, instance, kube.MergePatchType, patch); err != nil {
		return fmt.Errorf("update network of %s: annotate pod: %w", instance, classify(err))
	}
	if err := d.waitApplied(ctx, g, instance, ann); err != nil {
		return fmt.Errorf("update network of %s: %w", instance, err)
	}
	return nil
}

// NetworkEvents asks every ready gateway Pod for the sandbox's refusals and merges them (the
// newest egress.RingSize, oldest first; denied is their sum). Without a gateway there are none.
// A Pod that does not answer is left out (and logged) while another answers; none answering is
// an error.
func (d *Driver) NetworkEvents(ctx context.Context, sandboxID string) ([]bay.NetworkEvent, int64, error) {
	if d.cfg.EgressGateway.Service == "" {
		return nil, 0, nil
	}
	ns := cmp.Or(d.cfg.EgressGateway.Namespace, d.cfg.Namespace)
	sp, err := egressgw.ReadService(ctx, d.cs, ns, d.cfg.EgressGateway.Service)
	if err != nil {
		return nil, 0, bay.Classified(errGatewayUnavailable, classify(err))
	}
	addrs, err := d.readyGateways(ctx, &gatewayInfo{ns: ns, ServicePorts: sp})
	if err != nil {
		return nil, 0, err
	}
	cl := egressgw.NewClient(d.cfg.EgressGateway.Token)
	var all []bay.NetworkEvent
	var denied int64
	var errs []error
	for _, a := range addrs {
		evs, n, err := cl.Events(ctx, a, sandboxID)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		all, denied = append(all, evs...), denied+n
	}
	if len(errs) == len(addrs) {
		return nil, 0, bay.Classified(errGatewayUnavailable, errors.Join(errs...))
	}
	if len(errs) > 0 {
		d.log.WarnContext(ctx, "network events: a gateway Pod did not answer", "sandbox_id", sandboxID, "err", errors.Join(errs...))
	}
	slices.SortStableFunc(all, func(a, b bay.NetworkEvent) int { return a.Time.Compare(b.Time) })
	if len(all) > egress.RingSize {
		all = all[len(all)-egress.RingSize:]
	}
	return all, denied, nil
}

var _ bay.NetworkEnforcer = (*Driver)(nil)

// networkBarrier is the address (host:port) the runtimes of a Pod whose NetworkPolicy is np
// wait behind: they serve only once a connection there fails, i.e. once the node's enforcer
// has programmed np (it does so a moment after the Pod has its address; until then nothing
// is filtered). It is the gateway Service's barrier port, which the gateway's own policy
// admits from every sandbox; "" when there is nothing to wait for or nothing to wait with:
// no policies, a one-shot (its command is not a runtime), no gateway, a gateway without the
// port, or a policy that admits a gateway Pod's address on that port (an address range of
// security.allowed_hosts or of an allowlist covering the Pod network), where the connection
// would never fail. g is the gateway as the create read it (nil: read here; unreadable: no
// barrier, logged, since the policy itself holds either way).
func (d *Driver) networkBarrier(ctx context.Context, spec bay.InstanceSpec, np *kube.NetworkPolicy, g *gatewayInfo) string {
	gc := d.cfg.EgressGateway
	if !d.cfg.NetworkPolicy || isOneShot(spec) || gc.Service == "" {
		return ""
	}
	if g == nil {
		var err error
		if g, err = d.readGateway(ctx); err != nil {
			d.log.WarnContext(ctx, "no network barrier: the egress gateway's Service is unreadable", "instance", spec.Name, "err", err)
			return ""
		}
	}
	port, ok := g.Service[egressgw.PortBarrier]
	if !ok {
		return ""
	}
	pods, err := d.gatewayPods(ctx, g)
	if err != nil {
		d.log.WarnContext(ctx, "no network barrier: the egress gateway's Pods are unreadable", "instance", spec.Name, "err", err)
		return ""
	}
	target := g.Target[egressgw.PortBarrier]
	for _, p := range pods {
		ip, err := netip.ParseAddr(p.Status.PodIP)
		if err == nil && admitsTCP(np.Spec.Egress, ip, target) {
			d.log.InfoContext(ctx, "no network barrier: the policy admits the egress gateway's Pods", "instance", spec.Name, "gateway_pod_ip", ip)
			return ""
		}
	}
	return net.JoinHostPort(g.ClusterIP.String(), strconv.Itoa(port))
}

// admitsTCP reports whether egress rules admit TCP to ip:port by address: a rule with no peer
// (every destination) or an ipBlock holding ip outside its exceptions, on every port or on
// port. Pod-selecting peers are not matched: the driver's select the cluster's DNS and the
// gateway on its serving ports, never its barrier port.
func admitsTCP(rules []kube.NetworkPolicyEgressRule, ip netip.Addr, port int) bool {
	for _, r := range rules {
		onPort := len(r.Ports) == 0
		for _, p := range r.Ports {
			tcp := p.Protocol == nil || *p.Protocol == kube.ProtocolTCP
			onPort = onPort || (tcp && (p.Port == nil || p.Port.IntValue() == port))
		}
		if !onPort {
			continue
		}
		if len(r.To) == 0 {
			return true
		}
		for _, peer := range r.To {
			if peer.IPBlock != nil && inBlock(*peer.IPBlock, ip) {
				return true
			}
		}
	}
	return false
}

// inBlock reports whether ip lies in b's range and outside its exceptions.
func inBlock(b kube.IPBlock, ip netip.Addr) bool {
	r, err := netip.ParsePrefix(b.CIDR)
	if err != nil || !r.Contains(ip) {
		return false
	}
	for _, x := range b.Except {
		if e, err := netip.ParsePrefix(x); err == nil && e.Contains(ip) {
			return false
		}
	}
	return true
}
