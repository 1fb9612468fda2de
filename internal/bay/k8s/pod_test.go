package k8s

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/k8s/egressgw"
	"github.com/shipyard-dev/shipyard/internal/bay/k8s/kube"
	"github.com/shipyard-dev/shipyard/internal/runtimekit"
)

// These tests check what the driver renders, without a cluster; k8s_test.go (build tag k8s)
// has the API server accept the same objects and runs them on the node.

func testDriver(t *testing.T, tune func(*Config)) *Driver {
	t.Helper()
	cfg := DefaultConfig()
	cfg.BayCIDRs = []string{"192.0.2.2/32"}
	if tune != nil {
		tune(&cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	codec, err := newLabelCodec(cfg.LabelPrefix)
	if err != nil {
		t.Fatal(err)
	}
	return &Driver{cfg: cfg, labels: codec}
}

func runtimeSpec(p bay.NetworkPolicy) bay.InstanceSpec {
	return bay.InstanceSpec{Name: "i1", MountPath: "/workspace", Network: p, Containers: []bay.ContainerSpec{{
		Name: "ship", RuntimeType: bay.RuntimeShip, Image: "ship:1", Port: 8123,
	}}}
}

func TestNetworkPolicyModes(t *testing.T) {
	d := testDriver(t, func(c *Config) {
		c.BlockedRanges = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("203.0.113.128/25"), netip.MustParsePrefix("fc00::/7"),
			netip.MustParsePrefix("::ffff:0.0.0.0/96")} // in the default blocked hosts; no NetworkPolicy may name it
	})
	render := func(p bay.NetworkPolicy) (*kube.NetworkPolicy, error) {
		np, err := d.networkPolicy(runtimeSpec(p), kube.ObjectMeta{Name: "i1"}, map[string]string{"bay.instance": "i1"}, nil)
		if err == nil {
			if len(np.Spec.Ingress) != 1 || np.Spec.Ingress[0].From[0].IPBlock.CIDR != "192.0.2.2/32" || np.Spec.Ingress[0].Ports[0].Port.IntValue() != 8123 {
				t.Errorf("%s: ingress = %+v, want from bay only, on the runtime port", p.Mode, np.Spec.Ingress)
			}
			if !slices.Equal(np.Spec.PolicyTypes, []kube.PolicyType{kube.PolicyTypeIngress, kube.PolicyTypeEgress}) {
				t.Errorf("%s: policy types %v", p.Mode, np.Spec.PolicyTypes)
			}
		}
		return np, err
	}
	dnsRule := func(r kube.NetworkPolicyEgressRule) bool {
		return len(r.Ports) == 2 && r.Ports[0].Port.IntValue() == 53 && len(r.To) == 1 && r.To[0].PodSelector != nil
	}

	np, err := render(bay.NetworkPolicy{Mode: bay.NetworkNone})
	if err != nil || len(np.Spec.Egress) != 0 {
		t.Errorf("none: %+v, %v; want no egress rule at all (nothing admitted, not even DNS)", np, err)
	}
	for _, mode := range []bay.NetworkMode{bay.NetworkOpen, bay.NetworkIsolated, ""} {
		np, err := render(bay.NetworkPolicy{Mode: mode})
		if err != nil {
			t.Fatalf("%q: %v", mode, err)
		}
		if len(np.Spec.Egress) != 2 || !dnsRule(np.Spec.Egress[1]) || len(np.Spec.Egress[0].To) != 2 {
			t.Fatalf("%q: egress = %+v, want every address but the blocked ones, and DNS", mode, np.Spec.Egress)
		}
		v4, v6 := np.Spec.Egress[0].To[0].IPBlock, np.Spec.Egress[0].To[1].IPBlock
		if v4.CIDR != "0.0.0.0/0" || !slices.Equal(v4.Except, []string{"10.0.0.0/8", "203.0.113.128/25"}) ||
			v6.CIDR != "::/0" || !slices.Equal(v6.Except, []string{"fc00::/7"}) || len(np.Spec.Egress[0].Ports) != 0 {
			t.Errorf("%q: %+v %+v, want the blocked ranges as exceptions, every port", mode, v4, v6)
		}
	}

	np, err = render(bay.NetworkPolicy{Mode: bay.NetworkAllowlist,
		Allow: []string{"203.0.113.0/24:443", "198.51.100.7", "10.1.0.0/16", "[2001:db8::/32]"},
		Deny:  []string{"203.0.113.64/26"}})
	if err != nil {
		t.Fatal(err)
	}
	// 10.1.0.0/16 lies inside a blocked range: no rule for it.
	if len(np.Spec.Egress) != 4 || !dnsRule(np.Spec.Egress[3]) {
		t.Fatalf("allowlist: egress = %+v, want three address rules and DNS", np.Spec.Egress)
	}
	r0, r1, r2 := np.Spec.Egress[0], np.Spec.Egress[1], np.Spec.Egress[2]
	if b := r0.To[0].IPBlock; b.CIDR != "203.0.113.0/24" || !slices.Equal(b.Except, []string{"203.0.113.128/25", "203.0.113.64/26"}) ||
		len(r0.Ports) != 1 || r0.Ports[0].Port.IntValue() != 443 || *r0.Ports[0].Protocol != kube.ProtocolTCP {
		t.Errorf("allowlist range with a port: %+v", r0)
	}
	if b := r1.To[0].IPBlock; b.CIDR != "198.51.100.7/32" || len(b.Except) != 0 || len(r1.Ports) != 0 {
		t.Errorf("allowlist address: %+v", r1)
	}
	if b := r2.To[0].IPBlock; b.CIDR != "2001:db8::/32" || len(b.Except) != 0 {
		t.Errorf("allowlist IPv6 range: %+v", r2)
	}
	// A deny entry covering an allowed range whole leaves no rule (never an empty peer list,
	// which would admit everything).
	np, err = render(bay.NetworkPolicy{Mode: bay.NetworkAllowlist, Allow: []string{"198.51.100.7"}, Deny: []string{"198.51.100.0/24"}})
	if err != nil || len(np.Spec.Egress) != 1 || !dnsRule(np.Spec.Egress[0]) {
		t.Errorf("allowlist wholly denied: %+v, %v; want DNS only", np, err)
	}

	for _, p := range []bay.NetworkPolicy{
		{Mode: bay.NetworkAllowlist, Allow: []string{"pypi.org"}},
		{Mode: bay.NetworkAllowlist, Allow: []string{"198.51.100.7"}, Deny: []string{"*.example.com"}},
	} {
		_, err := render(p)
		var be *bay.Error
		if !errors.As(err, &be) || be.Code != bay.CodeCapabilityNotSupported || !strings.Contains(be.Message, egressGatewayKey) {
			t.Errorf("allowlist %+v: %v, want capability_not_supported naming %s (a NetworkPolicy cannot name hosts)", p, err, egressGatewayKey)
		}
	}

	// Every range blocked: no egress rule rather than one without peers.
	d = testDriver(t, func(c *Config) {
		c.BlockedRanges = []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0")}
	})
	if np, err := render(bay.NetworkPolicy{Mode: bay.NetworkOpen}); err != nil || len(np.Spec.Egress) != 1 || !dnsRule(np.Spec.Egress[0]) {
		t.Errorf("open with everything blocked: %+v, %v; want DNS only", np, err)
	}
}

func oneShot() bay.InstanceSpec {
	return bay.InstanceSpec{Name: "o1", Network: bay.NetworkPolicy{Mode: bay.NetworkNone},
		Containers: []bay.ContainerSpec{{Name: "exec", RuntimeType: "exec", Image: "registry.example:5000/ship:v2", User: "1000:1000",
			Command: []string{"python3", "-c", "print(1)"}, WorkDir: "/work", Seccomp: bay.SeccompUserNamespaces,
			Mounts: []bay.Mount{{Source: "/srv/ws/in", Target: "/in", ReadOnly: true}, {Source: "/srv/ws/work", Target: "/work"}}}}}
}

func TestOneShotPod(t *testing.T) {
	d := testDriver(t, func(c *Config) {
		c.NoNetworkRuntimeClass = "loopback-only"
		c.RuntimeCaps = map[string][]string{"registry.example:5000/ship": {"SETUID", "SETGID", "KILL"}}
	})
	sp := oneShot()
	if err := validateInstance(sp); err != nil {
		t.Fatal(err)
	}
	pod, err := d.instancePod(sp, kube.ObjectMeta{Name: "o1", Annotations: map[string]string{}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := pod.Spec.Containers[0]
	if !slices.Equal(c.Command, sp.Containers[0].Command) || len(c.Args) != 0 || c.WorkingDir != "/work" || len(c.Ports) != 0 {
		t.Errorf("one-shot container: command %v args %v dir %q ports %v", c.Command, c.Args, c.WorkingDir, c.Ports)
	}
	if pod.Spec.RestartPolicy != kube.RestartPolicyNever || pod.Spec.RuntimeClassName == nil || *pod.Spec.RuntimeClassName != "loopback-only" {
		t.Errorf("restart %s, runtime class %v; want Never and the loopback-only class", pod.Spec.RestartPolicy, pod.Spec.RuntimeClassName)
	}
	sc := c.SecurityContext
	// A one-shot never gets its image's runtime capabilities.
	if *sc.RunAsUser != 1000 || !*sc.RunAsNonRoot || len(sc.Capabilities.Add) != 0 || *sc.AllowPrivilegeEscalation || *sc.Privileged {
		t.Errorf("one-shot security context: %+v", sc)
	}
	if sc.SeccompProfile.Type != kube.SeccompProfileTypeLocalhost || *sc.SeccompProfile.LocalhostProfile != DefaultSeccompUserNamespacesProfile {
		t.Errorf("seccomp = %+v, want Localhost %s", sc.SeccompProfile, DefaultSeccompUserNamespacesProfile)
	}
	mounts := map[string]bool{}
	for _, m := range c.VolumeMounts {
		mounts[m.MountPath] = m.ReadOnly
	}
	if ro, ok := mounts["/in"]; !ok || !ro {
		t.Errorf("mounts = %v, want /in read-only", mounts)
	}
	if ro, ok := mounts["/work"]; !ok || ro {
		t.Errorf("mounts = %v, want /work writable", mounts)
	}
	if list := containerList(pod); len(list) != 1 || !list[0].OneShot || list[0].Port != 0 {
		t.Errorf("containers annotation = %+v", list)
	}
	np, err := d.networkPolicy(sp, kube.ObjectMeta{Name: "o1"}, map[string]string{"bay.instance": "o1"}, nil)
	if err != nil || len(np.Spec.Ingress) != 0 || len(np.Spec.Egress) != 0 {
		t.Errorf("one-shot policy: %+v, %v; want nothing admitted either way", np, err)
	}

	// Without the loopback-only class, or in another mode, the Pod network; a runtime
	// opting into user namespaces keeps its runtime capabilities and gets the profile.
	plain := testDriver(t, nil)
	if pod, _ := plain.instancePod(sp, kube.ObjectMeta{Annotations: map[string]string{}}, nil); pod.Spec.RuntimeClassName != nil {
		t.Errorf("without no_network_runtime_class: runtime class %v", *pod.Spec.RuntimeClassName)
	}
	open := oneShot()
	open.Network.Mode = bay.NetworkOpen
	if pod, _ := d.instancePod(open, kube.ObjectMeta{Annotations: map[string]string{}}, nil); pod.Spec.RuntimeClassName != nil {
		t.Errorf("a one-shot in mode open: runtime class %v", *pod.Spec.RuntimeClassName)
	}
	rt := runtimeSpec(bay.NetworkPolicy{Mode: bay.NetworkNone})
	rt.Containers[0].Image, rt.Containers[0].Seccomp = "registry.example:5000/ship:v2", bay.SeccompUserNamespaces
	pod, _ = d.instancePod(rt, kube.ObjectMeta{Annotations: map[string]string{}}, nil)
	if sc := pod.Spec.Containers[0].SecurityContext; pod.Spec.RuntimeClassName != nil || len(sc.Capabilities.Add) != 3 ||
		sc.SeccompProfile.Type != kube.SeccompProfileTypeLocalhost || pod.Spec.Containers[0].Ports[0].ContainerPort != 8123 {
		t.Errorf("runtime with the opt-in: class %v, %+v", pod.Spec.RuntimeClassName, sc)
	}
	if sc := plain.securityContext(runtimeSpec(bay.NetworkPolicy{}).Containers[0]); sc.SeccompProfile.Type != kube.SeccompProfileTypeRuntimeDefault {
		t.Errorf("default seccomp = %+v", sc.SeccompProfile)
	}
}

func TestOneShotBadSpecs(t *testing.T) {
	for name, mutate := range map[string]func(*bay.InstanceSpec){
		"port":         func(s *bay.InstanceSpec) { s.Containers[0].Port = 8123 },
		"capability":   func(s *bay.InstanceSpec) { s.Containers[0].CapAdd = []string{"KILL"} },
		"relative dir": func(s *bay.InstanceSpec) { s.Containers[0].WorkDir = "work" },
		"two": func(s *bay.InstanceSpec) {
			c := s.Containers[0]
			c.Name = "two"
			s.Containers = append(s.Containers, c)
		},
		"with a runtime": func(s *bay.InstanceSpec) {
			s.Containers = append(s.Containers, runtimeSpec(bay.NetworkPolicy{}).Containers[0])
		},
		"unconfined":   func(s *bay.InstanceSpec) { s.Containers[0].Seccomp = "unconfined" },
		"unknown mode": func(s *bay.InstanceSpec) { s.Network.Mode = "bridge" },
	} {
		sp := oneShot()
		mutate(&sp)
		if err := validateInstance(sp); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestConfigValidateNewKeys(t *testing.T) {
	for _, tune := range []func(*Config){
		func(c *Config) { c.SeccompUserNamespacesProfile = "/etc/passwd" },
		func(c *Config) { c.SeccompUserNamespacesProfile = "../x.json" },
		func(c *Config) { c.SeccompUserNamespacesProfile = "" },
		func(c *Config) { c.NoNetworkRuntimeClass = "No Class" },
		func(c *Config) { c.BlockedRanges = []netip.Prefix{{}} },
	} {
		c := DefaultConfig()
		tune(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%+v: valid", c)
		}
	}
}

// testGateway is a gateway Service as egressgw.ReadService reads it.
func testGateway() *gatewayInfo {
	return &gatewayInfo{ns: "gw", ServicePorts: egressgw.ServicePorts{
		ClusterIP: netip.MustParseAddr("10.96.0.53"),
		Target:    map[string]int{"dns": 5353, "dns-tcp": 5353, "http": 8080, "tls": 8443, "proxy": 3128, "admin": 9090, "barrier": 9091},
		Service:   map[string]int{"dns": 53, "dns-tcp": 53, "http": 80, "tls": 443, "proxy": 3128, "admin": 9090, "barrier": 9091},
		Selector:  map[string]string{"app.kubernetes.io/name": "shipyard-egress"},
	}}
}

// With a gateway, an allowlist naming hosts admits its address entries and the gateway's Pods on
// the gateway's own ports, and not the cluster's DNS (which would answer any name); the Pod
// resolves through the gateway, has the proxy variables (the spec's own replaced) and the
// annotation the gateway reads.
func TestGatewayServedPod(t *testing.T) {
	d := testDriver(t, func(c *Config) { c.BlockedRanges = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")} })
	g := testGateway()
	p := bay.NetworkPolicy{Mode: bay.NetworkAllowlist, Allow: []string{"example.com", "198.51.100.0/24"}, Deny: []string{"secret.example.com"}}
	if !namesHosts(p) || namesHosts(bay.NetworkPolicy{Mode: bay.NetworkAllowlist, Allow: []string{"198.51.100.7"}}) {
		t.Fatal("namesHosts")
	}
	spec := runtimeSpec(p)
	spec.Labels = map[string]string{bay.LabelSandboxID: "sandbox-1"}
	spec.Containers[0].Env = map[string]string{"HTTP_PROXY": "http://elsewhere:1", "TOKEN": "t"}
	np, err := d.networkPolicy(spec, kube.ObjectMeta{Name: "i1"}, map[string]string{"bay.instance": "i1"}, g)
	if err != nil {
		t.Fatal(err)
	}
	if len(np.Spec.Egress) != 2 {
		t.Fatalf("egress %+v, want the range and the gateway", np.Spec.Egress)
	}
	if b := np.Spec.Egress[0].To[0].IPBlock; b == nil || b.CIDR != "198.51.100.0/24" {
		t.Errorf("address entry: %+v", np.Spec.Egress[0])
	}
	gr := np.Spec.Egress[1]
	var ports []string
	for _, pp := range gr.Ports {
		ports = append(ports, fmt.Sprintf("%s/%d", *pp.Protocol, pp.Port.IntValue()))
	}
	if len(gr.To) != 1 || gr.To[0].PodSelector.MatchLabels["app.kubernetes.io/name"] != "shipyard-egress" ||
		gr.To[0].NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] != "gw" ||
		!slices.Equal(ports, []string{"UDP/5353", "TCP/5353", "TCP/8080", "TCP/8443", "TCP/3128"}) {
		t.Errorf("gateway rule: %+v ports %v", gr, ports)
	}

	meta, err := d.objectMeta("i1", spec.Labels)
	if err != nil {
		t.Fatal(err)
	}
	pod, err := d.instancePod(spec, meta, nil)
	if err != nil {
		t.Fatal(err)
	}
	ann, err := g.routeThroughGateway(pod, spec)
	if err != nil {
		t.Fatal(err)
	}
	pp, err := egressgw.Decode(pod.Annotations[egressgw.AnnotationPolicy])
	if err != nil || ann != pod.Annotations[egressgw.AnnotationPolicy] || pp.SandboxID != "sandbox-1" || !slices.Equal(pp.Policy.Allow, p.Allow) {
		t.Errorf("annotation %q: %+v %v", ann, pp, err)
	}
	if pod.Spec.DNSPolicy != kube.DNSNone || pod.Spec.DNSConfig == nil || !slices.Equal(pod.Spec.DNSConfig.Nameservers, []string{"10.96.0.53"}) {
		t.Errorf("dns: %v %+v", pod.Spec.DNSPolicy, pod.Spec.DNSConfig)
	}
	env := map[string]string{}
	n := 0
	for _, e := range pod.Spec.Containers[0].Env {
		if strings.EqualFold(e.Name, "http_proxy") || strings.EqualFold(e.Name, "https_proxy") || strings.EqualFold(e.Name, "no_proxy") {
			n++
			env[e.Name] = e.Value
		}
	}
	if n != 6 || env["HTTP_PROXY"] != "http://10.96.0.53:3128" || env["https_proxy"] != "http://10.96.0.53:3128" || env["NO_PROXY"] != "localhost,127.0.0.1,::1" {
		t.Errorf("proxy variables (want each once, the spec's replaced): %v (%d)", env, n)
	}
	for _, e := range pod.Spec.Containers[0].Env {
		if e.Name == runtimekit.EnvNetworkBarrier {
			t.Errorf("%s set by routing through the gateway: it is the create's (networkBarrier)", e.Name)
		}
	}
}

// The runtimes of every Pod wait behind the gateway's barrier port, whatever its mode, unless
// its policy admits a gateway Pod's address on that port (then the wait would never end), or
// nothing enforces policies, or it is a one-shot, or there is no gateway to wait with.
func TestNetworkBarrier(t *testing.T) {
	var failList atomic.Bool
	d := apiDriver(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if failList.Load() || r.URL.Path != "/api/v1/namespaces/gw/pods" || r.URL.Query().Get("labelSelector") != "app.kubernetes.io/name=shipyard-egress" {
			http.Error(w, `{"kind":"Status","code":500}`, http.StatusInternalServerError)
			return
		}
		_ = json.NewEncoder(w).Encode(kube.PodList{Items: []kube.Pod{
			{Status: kube.PodStatus{PodIP: "10.244.0.7"}},
			{Status: kube.PodStatus{}}, // not scheduled yet: no address
		}})
	}))
	d.log = slog.New(slog.DiscardHandler)
	d.cfg.EgressGateway.Service = "shipyard-egress"
	d.cfg.BlockedRanges = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	barrier := func(spec bay.InstanceSpec) string {
		t.Helper()
		g := testGateway()
		if !namesHosts(spec.Network) {
			g = nil
		}
		np, err := d.networkPolicy(spec, kube.ObjectMeta{Name: "i1"}, map[string]string{"bay.instance": "i1"}, g)
		if err != nil {
			t.Fatal(err)
		}
		if g == nil {
			g = testGateway() // as the create would read it
		}
		return d.networkBarrier(context.Background(), spec, np, g)
	}
	const want = "10.96.0.53:9091"
	for _, p := range []bay.NetworkPolicy{
		{Mode: bay.NetworkNone},
		{Mode: bay.NetworkOpen},
		{Mode: bay.NetworkAllowlist, Allow: []string{"198.51.100.0/24"}},
		{Mode: bay.NetworkAllowlist, Allow: []string{"10.244.0.0/16"}}, // inside a blocked range: refused whole
		{Mode: bay.NetworkAllowlist, Allow: []string{"example.com"}},
	} {
		if got := barrier(runtimeSpec(p)); got != want {
			t.Errorf("%+v: barrier %q, want %q", p, got, want)
		}
	}

	oneShot := runtimeSpec(bay.NetworkPolicy{Mode: bay.NetworkNone})
	oneShot.Containers[0].Command = []string{"true"}
	if got := barrier(oneShot); got != "" {
		t.Errorf("one-shot: barrier %q", got)
	}
	// An allowed range holding the gateway's Pod: a connection there would never fail.
	d.cfg.AllowedRanges = []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}
	if got := barrier(runtimeSpec(bay.NetworkPolicy{Mode: bay.NetworkOpen})); got != "" {
		t.Errorf("open with the Pod network allowed: barrier %q", got)
	}
	d.cfg.AllowedRanges = nil
	d.cfg.BlockedRanges = []netip.Prefix{netip.MustParsePrefix("192.168.0.0/16")}
	if got := barrier(runtimeSpec(bay.NetworkPolicy{Mode: bay.NetworkAllowlist, Allow: []string{"10.244.0.0/24:9091"}})); got != "" {
		t.Errorf("allowlist holding the gateway Pod on the barrier port: barrier %q", got)
	}
	if got := barrier(runtimeSpec(bay.NetworkPolicy{Mode: bay.NetworkAllowlist, Allow: []string{"10.244.0.0/24:443"}})); got != want {
		t.Errorf("allowlist holding the gateway Pod on another port: barrier %q, want %q", got, want)
	}
	failList.Store(true)
	if got := barrier(runtimeSpec(bay.NetworkPolicy{Mode: bay.NetworkNone})); got != "" {
		t.Errorf("gateway Pods unreadable: barrier %q", got)
	}
	failList.Store(false)
	d.cfg.NetworkPolicy = false
	if got := barrier(runtimeSpec(bay.NetworkPolicy{Mode: bay.NetworkNone})); got != "" {
		t.Errorf("no NetworkPolicies: barrier %q", got)
	}
	d.cfg.NetworkPolicy = true
	d.cfg.EgressGateway.Service = ""
	if got := barrier(runtimeSpec(bay.NetworkPolicy{Mode: bay.NetworkNone})); got != "" {
		t.Errorf("no gateway: barrier %q", got)
	}
}

// security.allowed_hosts: a sandbox in mode open reaches an allowed range inside a blocked one.
func TestOpenAdmitsAllowedRanges(t *testing.T) {
	d := testDriver(t, func(c *Config) {
		c.BlockedRanges = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
		c.AllowedRanges = []netip.Prefix{netip.MustParsePrefix("10.1.2.3/32")}
	})
	np, err := d.networkPolicy(runtimeSpec(bay.NetworkPolicy{Mode: bay.NetworkOpen}), kube.ObjectMeta{Name: "i1"}, map[string]string{"bay.instance": "i1"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var cidrs []string
	for _, p := range np.Spec.Egress[0].To {
		cidrs = append(cidrs, p.IPBlock.CIDR)
	}
	if !slices.Equal(cidrs, []string{"0.0.0.0/0", "::/0", "10.1.2.3/32"}) || !slices.Equal(np.Spec.Egress[0].To[0].IPBlock.Except, []string{"10.0.0.0/8"}) {
		t.Errorf("open egress peers %v (%+v)", cidrs, np.Spec.Egress[0].To)
	}
}

// A kubelet whose Secret cache has not synced yet retries the container: the start waits (the
// start timeout bounds it); any other container config error ends it.
func TestStartStateWaitsForTheKubeletsCache(t *testing.T) {
	pod := func(msg string) *kube.Pod {
		return &kube.Pod{Spec: kube.PodSpec{NodeName: "n", Containers: []kube.Container{{Name: "ship", Image: "ship:latest"}}},
			Status: kube.PodStatus{Phase: "Pending", ContainerStatuses: []kube.ContainerStatus{{Name: "ship",
				State: kube.ContainerState{Waiting: &kube.ContainerStateWaiting{Reason: "CreateContainerConfigError", Message: msg}}}}}}
	}
	done, why, err := startState(pod("failed to sync secret cache: timed out waiting for the condition"), false)
	if done || err != nil || !strings.Contains(why, "failed to sync secret cache") {
		t.Errorf("cache not synced: %v %q %v; want waiting", done, why, err)
	}
	if _, _, err := startState(pod(`secret "x" not found`), false); err == nil {
		t.Error("a missing Secret: want the start to fail")
	}
}
