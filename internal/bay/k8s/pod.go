package k8s

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"path"
	"regexp"
	"slices"
	"strconv"

	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/k8s/kube"
)

// The objects of one instance: a Secret with the containers' environment, a NetworkPolicy and
// the Pod, all named like the instance and labelled alike.

// podContainer is one entry of the annContainers annotation.
type podContainer struct {
	Name        string `json:"name"`
	RuntimeType string `json:"runtime_type"`
	Port        int    `json:"port"`
	OneShot     bool   `json:"one_shot,omitempty"`
}

var (
	containerNameRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?$`)
	envNameRE       = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.-]*$`)
	userRE          = regexp.MustCompile(`^([0-9]{1,9})(:([0-9]{1,9}))?$`)
)

// validateInstance checks what every driver refuses, plus what a Pod needs: distinct ports
// (the containers share one network namespace) and names Kubernetes accepts.
func validateInstance(spec bay.InstanceSpec) error {
	if spec.Name == "" {
		return errors.New("instance without a name")
	}
	if err := validName("instance", spec.Name); err != nil {
		return err
	}
	if len(spec.Containers) == 0 {
		return errors.New("instance without containers")
	}
	switch spec.Network.Mode {
	case "", bay.NetworkIsolated, bay.NetworkOpen, bay.NetworkNone, bay.NetworkAllowlist:
	default:
		return fmt.Errorf("network mode %q is not supported", spec.Network.Mode)
	}
	if !bay.ValidContainerRuntime(spec.Runtime) {
		return fmt.Errorf("container runtime %q is not supported", spec.Runtime)
	}
	if spec.VolumeRef != "" && !path.IsAbs(spec.MountPath) {
		return fmt.Errorf("volume %s needs an absolute mount path, got %q", spec.VolumeRef, spec.MountPath)
	}
	// A one-shot is its Pod's only container: WaitInstance waits for the Pod's primary, and a
	// runtime next to it would outlive it.
	if len(spec.Containers) > 1 && slices.ContainsFunc(spec.Containers, func(c bay.ContainerSpec) bool { return len(c.Command) > 0 }) {
		return errors.New("a one-shot container runs alone in its instance")
	}
	names, ports := map[string]bool{}, map[int]string{}
	for _, c := range spec.Containers {
		if !containerNameRE.MatchString(c.Name) {
			return fmt.Errorf("container name %q: want lowercase letters, digits and '-', at most 32", c.Name)
		}
		if names[c.Name] {
			return fmt.Errorf("container name %q used twice", c.Name)
		}
		names[c.Name] = true
		if c.Image == "" {
			return fmt.Errorf("container %s: no image", c.Name)
		}
		if c.Seccomp != bay.SeccompDefault && c.Seccomp != bay.SeccompUserNamespaces {
			return fmt.Errorf("container %s: unknown seccomp filter %q", c.Name, c.Seccomp)
		}
		if len(c.Command) > 0 {
			if c.Port != 0 || len(c.CapAdd) > 0 {
				return fmt.Errorf("container %s: a one-shot container has no runtime port and adds no capability", c.Name)
			}
			if c.WorkDir != "" && !path.IsAbs(c.WorkDir) {
				return fmt.Errorf("container %s: work dir %q is not absolute", c.Name, c.WorkDir)
			}
		} else {
			if c.Port <= 0 || c.Port > 65535 {
				return fmt.Errorf("container %s: invalid runtime port %d", c.Name, c.Port)
			}
			if other, ok := ports[c.Port]; ok {
				return fmt.Errorf("containers %s and %s both listen on port %d; the containers of a Pod share one network", other, c.Name, c.Port)
			}
			ports[c.Port] = c.Name
		}
		for _, cp := range c.CapAdd {
			if !slices.Contains(bay.AddableCaps, normCap(cp)) {
				return fmt.Errorf("container %s: capability %s may not be added", c.Name, cp)
			}
		}
		if c.Limits.NanoCPUs < 0 || c.Limits.MemoryBytes < 0 || c.Limits.PidsLimit < 0 || c.Limits.ShmBytes < 0 {
			return fmt.Errorf("container %s: negative resource limit", c.Name)
		}
		if c.User != "" && !userRE.MatchString(c.User) {
			return fmt.Errorf("container %s: user %q must be numeric uid[:gid]", c.Name, c.User)
		}
		for k := range c.Env {
			if !envNameRE.MatchString(k) {
				return fmt.Errorf("container %s: environment variable name %q", c.Name, k)
			}
		}
		for _, m := range c.Mounts {
			if !path.IsAbs(m.Source) || !path.IsAbs(m.Target) {
				return fmt.Errorf("mount %s:%s: source and target must be absolute paths", m.Source, m.Target)
			}
		}
	}
	return nil
}

// isOneShot reports whether spec is a one-shot instance (its primary runs a Command).
func isOneShot(spec bay.InstanceSpec) bool {
	return len(spec.Containers) > 0 && len(spec.Containers[0].Command) > 0
}

// secretKey is the Secret key of one container's variable.
func secretKey(container, env string) string { return container + "." + env }

// objectMeta is the metadata every object of the instance carries.
func (d *Driver) objectMeta(name string, labels map[string]string) (kube.ObjectMeta, error) {
	kl, err := d.labels.encode(labels)
	if err != nil {
		return kube.ObjectMeta{}, err
	}
	ann, err := annotate(nil, labels)
	if err != nil {
		return kube.ObjectMeta{}, err
	}
	return kube.ObjectMeta{Name: name, Namespace: d.cfg.Namespace, Labels: kl, Annotations: ann}, nil
}

// instanceSecret holds every container's environment.
func (d *Driver) instanceSecret(spec bay.InstanceSpec, meta kube.ObjectMeta) *kube.Secret {
	data := map[string][]byte{}
	for _, c := range spec.Containers {
		for k, v := range c.Env {
			data[secretKey(c.Name, k)] = []byte(v)
		}
	}
	return &kube.Secret{ObjectMeta: meta, Type: kube.SecretTypeOpaque, Data: data}
}

// parseUser splits "uid[:gid]" (validated) into numbers; gid defaults to uid.
func parseUser(u string) (int64, int64) {
	m := userRE.FindStringSubmatch(u)
	uid, _ := strconv.ParseInt(m[1], 10, 64)
	gid := uid
	if m[3] != "" {
		gid, _ = strconv.ParseInt(m[3], 10, 64)
	}
	return uid, gid
}

// securityContext hardens one container: ALL capabilities dropped but the allowed additions,
// no privilege escalation, seccomp RuntimeDefault (or, opted in, the node's user-namespace
// profile), the spec's non-root user. An image whose runtime separates privileges
// (RuntimeCaps) starts as root with exactly its capabilities, as on Docker; a one-shot never
// does.
func (d *Driver) securityContext(c bay.ContainerSpec) *kube.SecurityContext {
	user := c.User
	if user == "" {
		user = DefaultUser
	}
	uid, gid := parseUser(user)
	var add []kube.Capability
	addCap := func(cp string) {
		if cp := kube.Capability(normCap(cp)); !slices.Contains(add, cp) {
			add = append(add, cp)
		}
	}
	for _, cp := range c.CapAdd {
		addCap(cp)
	}
	if caps := d.cfg.RuntimeCaps[repository(c.Image)]; len(caps) > 0 && len(c.Command) == 0 {
		uid, gid = 0, 0
		for _, cp := range caps {
			addCap(cp)
		}
	}
	f, t := false, true
	nonRoot := uid != 0
	seccomp := &kube.SeccompProfile{Type: kube.SeccompProfileTypeRuntimeDefault}
	if c.Seccomp == bay.SeccompUserNamespaces {
		profile := d.cfg.SeccompUserNamespacesProfile
		seccomp = &kube.SeccompProfile{Type: kube.SeccompProfileTypeLocalhost, LocalhostProfile: &profile}
	}
	return &kube.SecurityContext{
		RunAsUser:                &uid,
		RunAsGroup:               &gid,
		RunAsNonRoot:             &nonRoot,
		Privileged:               &f,
		AllowPrivilegeEscalation: &f,
		ReadOnlyRootFilesystem:   &t, // as on Docker: writes go to the cargo and the bounded /tmp
		Capabilities:             &kube.Capabilities{Drop: []kube.Capability{"ALL"}, Add: add},
		SeccompProfile:           seccomp,
	}
}

// resources: the limits of the spec, and a share of them (RequestRatio) as requests.
func (d *Driver) resources(l bay.Limits) kube.ResourceRequirements {
	r := kube.ResourceRequirements{Limits: kube.ResourceList{}, Requests: kube.ResourceList{}}
	if l.NanoCPUs > 0 {
		milli := max(l.NanoCPUs/1_000_000, 1)
		r.Limits[kube.ResourceCPU] = kube.NewMilliQuantity(milli)
		r.Requests[kube.ResourceCPU] = kube.NewMilliQuantity(max(int64(float64(milli)*d.cfg.RequestRatio), 1))
	}
	if l.MemoryBytes > 0 {
		r.Limits[kube.ResourceMemory] = kube.NewQuantity(l.MemoryBytes)
		r.Requests[kube.ResourceMemory] = kube.NewQuantity(max(int64(float64(l.MemoryBytes)*d.cfg.RequestRatio), 1<<20))
	}
	return r
}

// instancePod is the Pod of an instance; files are its snapshot mounts packed by source
// (packSnapshots), which it mounts from their ConfigMaps.
func (d *Driver) instancePod(spec bay.InstanceSpec, meta kube.ObjectMeta, files map[string]*filesPack) (*kube.Pod, error) {
	fileVolumes := map[string]string{} // source -> volume name
	f := false
	grace := int64(stopGrace)
	var list []podContainer
	var aliases []string
	for _, c := range spec.Containers {
		list = append(list, podContainer{Name: c.Name, RuntimeType: c.RuntimeType, Port: c.Port, OneShot: len(c.Command) > 0})
		aliases = append(aliases, c.Name)
	}
	b, err := json.Marshal(list)
	if err != nil {
		return nil, err
	}
	meta.Annotations = maps.Clone(meta.Annotations)
	meta.Annotations[annContainers] = string(b)
	seccomp := &kube.SeccompProfile{Type: kube.SeccompProfileTypeRuntimeDefault}
	fsGroup := int64(1000)
	changeOnMismatch := kube.FSGroupChangeOnRootMismatch
	pod := &kube.Pod{
		ObjectMeta: meta,
		Spec: kube.PodSpec{
			RestartPolicy:                 kube.RestartPolicyNever,
			AutomountServiceAccountToken:  &f,
			EnableServiceLinks:            &f,
			TerminationGracePeriodSeconds: &grace,
			Hostname:                      "sandbox",
			// The containers share the Pod's network: each reaches the others by name.
			HostAliases: []kube.HostAlias{{IP: "127.0.0.1", Hostnames: aliases}},
			SecurityContext: &kube.PodSecurityContext{
				SeccompProfile:      seccomp,
				FSGroup:             &fsGroup,
				FSGroupChangePolicy: &changeOnMismatch,
			},
		},
	}
	if class := d.runtimeClass(spec); class != "" {
		pod.Spec.RuntimeClassName = &class
	}
	for _, s := range d.cfg.ImagePullSecrets {
		pod.Spec.ImagePullSecrets = append(pod.Spec.ImagePullSecrets, kube.LocalObjectReference{Name: s})
	}
	if spec.VolumeRef != "" {
		pod.Spec.Volumes = append(pod.Spec.Volumes, kube.Volume{Name: "cargo", VolumeSource: kube.VolumeSource{
			PersistentVolumeClaim: &kube.PersistentVolumeClaimVolumeSource{ClaimName: spec.VolumeRef},
		}})
	}
	for i, c := range spec.Containers {
		ctr := kube.Container{
			Name:                     c.Name,
			Image:                    c.Image,
			ImagePullPolicy:          d.cfg.ImagePullPolicy,
			Resources:                d.resources(c.Limits),
			SecurityContext:          d.securityContext(c),
			TerminationMessagePolicy: kube.TerminationMessageFallbackToLogsOnError,
		}
		if len(c.Command) > 0 {
			// The argv replaces the image's entrypoint and command; its output is the
			// container's log, read back by WaitInstance.
			ctr.Command, ctr.WorkingDir = slices.Clone(c.Command), c.WorkDir
			ctr.TerminationMessagePolicy = kube.TerminationMessageReadFile
		} else {
			ctr.Ports = []kube.ContainerPort{{ContainerPort: int32(c.Port), Protocol: kube.ProtocolTCP}}
		}
		for _, k := range slices.Sorted(maps.Keys(c.Env)) {
			ctr.Env = append(ctr.Env, kube.EnvVar{Name: k, ValueFrom: &kube.EnvVarSource{
				SecretKeyRef: &kube.SecretKeySelector{LocalObjectReference: kube.LocalObjectReference{Name: spec.Name}, Key: secretKey(c.Name, k)},
			}})
		}
		if spec.VolumeRef != "" {
			ctr.VolumeMounts = append(ctr.VolumeMounts, kube.VolumeMount{Name: "cargo", MountPath: spec.MountPath})
		}
		for j, m := range c.Mounts {
			if p := files[m.Source]; p != nil && m.Snapshot && m.ReadOnly {
				// One projected volume per snapshot, shared by the containers mounting it.
				vname, ok := fileVolumes[m.Source]
				if !ok {
					vname = fmt.Sprintf("files%d", len(fileVolumes))
					fileVolumes[m.Source] = vname
					pod.Spec.Volumes = append(pod.Spec.Volumes, p.volume(vname))
				}
				ctr.VolumeMounts = append(ctr.VolumeMounts, kube.VolumeMount{Name: vname, MountPath: m.Target, ReadOnly: true, SubPath: p.subPath})
				continue
			}
			if m.Snapshot && m.ReadOnly && d.cfg.HostMounts == HostMountsConfigMap {
				return nil, fmt.Errorf("read-only mount %s was not packed", m.Source)
			}
			vname := fmt.Sprintf("c%d-mount%d", i, j)
			pod.Spec.Volumes = append(pod.Spec.Volumes, kube.Volume{Name: vname, VolumeSource: kube.VolumeSource{
				HostPath: &kube.HostPathVolumeSource{Path: m.Source, Type: hostPathType(m.Source)},
			}})
			ctr.VolumeMounts = append(ctr.VolumeMounts, kube.VolumeMount{Name: vname, MountPath: m.Target, ReadOnly: m.ReadOnly})
		}
		// /tmp and /var/tmp are memory-backed and bounded like on Docker (the root filesystem
		// is read-only).
		tmp := c.Limits.TmpBytes
		if tmp <= 0 {
			tmp = DefaultTmpBytes
		}
		for j, dir := range []string{"/tmp", "/var/tmp"} {
			vname := fmt.Sprintf("c%d-tmp%d", i, j)
			pod.Spec.Volumes = append(pod.Spec.Volumes, kube.Volume{Name: vname, VolumeSource: kube.VolumeSource{
				EmptyDir: &kube.EmptyDirVolumeSource{Medium: kube.StorageMediumMemory, SizeLimit: quantity(tmp)},
			}})
			ctr.VolumeMounts = append(ctr.VolumeMounts, kube.VolumeMount{Name: vname, MountPath: dir})
		}
		if c.Limits.ShmBytes > 0 {
			vname := fmt.Sprintf("c%d-shm", i)
			size := quantity(c.Limits.ShmBytes)
			pod.Spec.Volumes = append(pod.Spec.Volumes, kube.Volume{Name: vname, VolumeSource: kube.VolumeSource{
				EmptyDir: &kube.EmptyDirVolumeSource{Medium: kube.StorageMediumMemory, SizeLimit: size},
			}})
			ctr.VolumeMounts = append(ctr.VolumeMounts, kube.VolumeMount{Name: vname, MountPath: "/dev/shm"})
		}
		pod.Spec.Containers = append(pod.Spec.Containers, ctr)
	}
	return pod, nil
}

// privateRanges are closed to a sandbox's egress unless BlockedRanges says otherwise: the
// host's, the cluster's and every other private, shared or link-local network.
var privateRanges = []string{"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "169.254.0.0/16", "127.0.0.0/8", "0.0.0.0/8",
	"fc00::/7", "fe80::/10", "::1/128"}

// blocked is the ranges closed to every sandbox's egress.
func (d *Driver) blocked() []netip.Prefix {
	if d.cfg.BlockedRanges != nil {
		return d.cfg.BlockedRanges
	}
	out := make([]netip.Prefix, 0, len(privateRanges))
	for _, r := range privateRanges {
		out = append(out, netip.MustParsePrefix(r))
	}
	return out
}

// networkPolicy admits ingress from bay only, on the runtime ports (a one-shot has none, so
// nothing), and egress as the instance's network policy says:
//
//   - none: nothing at all;
//   - open (and the legacy isolated): every address but the blocked ranges (security.
//     blocked_hosts), as ipBlock exceptions, plus the cluster's DNS when AllowDNS;
//   - allowlist: the address entries of Allow only, each without the Deny entries and blocked
//     ranges inside it (on every port: an exception has no port), plus the cluster's DNS; with
//     names (g, the egress gateway, set: egress.go) the gateway's Pods on its ports instead of
//     the cluster's DNS. A NetworkPolicy cannot name hosts: without a gateway a policy with a
//     name entry is refused rather than enforced partly.
func (d *Driver) networkPolicy(spec bay.InstanceSpec, meta kube.ObjectMeta, podLabels map[string]string, g *gatewayInfo) (*kube.NetworkPolicy, error) {
	var ingress []kube.NetworkPolicyIngressRule
	var ports []kube.NetworkPolicyPort
	tcp := kube.ProtocolTCP
	for _, c := range spec.Containers {
		if c.Port > 0 {
			p := kube.FromInt32(int32(c.Port))
			ports = append(ports, kube.NetworkPolicyPort{Protocol: &tcp, Port: &p})
		}
	}
	if len(ports) > 0 {
		ingress = []kube.NetworkPolicyIngressRule{{From: d.bayPeers(), Ports: ports}}
	}
	egress, err := d.egressRules(spec.Network, g)
	if err != nil {
		return nil, err
	}
	return &kube.NetworkPolicy{
		ObjectMeta: meta,
		Spec: kube.NetworkPolicySpec{
			PodSelector: kube.LabelSelector{MatchLabels: podLabels},
			PolicyTypes: []kube.PolicyType{kube.PolicyTypeIngress, kube.PolicyTypeEgress},
			Ingress:     ingress,
			Egress:      egress,
		},
	}, nil
}

// openEgress admits every address but the blocked ranges, and the allowed ranges whatever
// they lie in.
func (d *Driver) openEgress() []kube.NetworkPolicyEgressRule {
	var to []kube.NetworkPolicyPeer
	for _, all := range []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0")} {
		if b := d.ipBlock(all, nil); b != nil {
			to = append(to, kube.NetworkPolicyPeer{IPBlock: b})
		}
	}
	for _, a := range d.cfg.AllowedRanges {
		if !a.Addr().Is4In6() { // the API server refuses IPv4-mapped ranges
			to = append(to, kube.NetworkPolicyPeer{IPBlock: &kube.IPBlock{CIDR: a.Masked().String()}})
		}
	}
	if len(to) == 0 { // a rule without peers would admit every destination
		return nil
	}
	return []kube.NetworkPolicyEgressRule{{To: to}}
}

// kubeDNSRule admits the cluster's DNS.
func kubeDNSRule() kube.NetworkPolicyEgressRule {
	tcp, udp := kube.ProtocolTCP, kube.ProtocolUDP
	dns := kube.FromInt32(53)
	return kube.NetworkPolicyEgressRule{
		To: []kube.NetworkPolicyPeer{{
			NamespaceSelector: &kube.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "kube-system"}},
			PodSelector:       &kube.LabelSelector{MatchLabels: map[string]string{"k8s-app": "kube-dns"}},
		}},
		Ports: []kube.NetworkPolicyPort{{Protocol: &udp, Port: &dns}, {Protocol: &tcp, Port: &dns}},
	}
}

// bayPeers are where bay reaches the runtimes from: BayCIDRs and/or bay's Pods.
func (d *Driver) bayPeers() []kube.NetworkPolicyPeer {
	var from []kube.NetworkPolicyPeer
	for _, cidr := range d.cfg.BayCIDRs {
		from = append(from, kube.NetworkPolicyPeer{IPBlock: &kube.IPBlock{CIDR: cidr}})
	}
	if len(d.cfg.BayPodLabels) > 0 || len(d.cfg.BayCIDRs) == 0 {
		sel := d.cfg.BayPodLabels
		if len(sel) == 0 {
			sel = map[string]string{"app.kubernetes.io/name": "shipyard-bay"}
		}
		ns := d.cfg.BayNamespace
		if ns == "" {
			ns = d.cfg.Namespace
		}
		from = append(from, kube.NetworkPolicyPeer{
			PodSelector:       &kube.LabelSelector{MatchLabels: sel},
			NamespaceSelector: &kube.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}},
		})
	}
	return from
}

// ipBlock is the range r without the blocked ranges and the extra ones (deny entries) that
// lie strictly inside it; nil when one of them covers r whole.
func (d *Driver) ipBlock(r netip.Prefix, extra []netip.Prefix) *kube.IPBlock {
	b := &kube.IPBlock{CIDR: r.String()}
	for _, x := range append(slices.Clone(d.blocked()), extra...) {
		x = x.Masked()
		switch {
		case x.Addr().Is4In6():
			// An IPv4-mapped range (the default blocked hosts hold ::ffff:0.0.0.0/96) is refused
			// by the API server; what a pod sends to such an address leaves as IPv4, which the
			// IPv4 exceptions already cover.
		case x.Addr().Is4() != r.Addr().Is4():
		case x.Bits() <= r.Bits() && x.Contains(r.Addr()):
			return nil // r lies inside x: nothing of it is left
		case x.Bits() > r.Bits() && r.Contains(x.Addr()):
			if s := x.String(); !slices.Contains(b.Except, s) {
				b.Except = append(b.Except, s)
			}
		}
	}
	return b
}

// allowlistEgress renders an allowlist's address entries as egress rules (see networkPolicy);
// names are the gateway's (withGateway), else refused.
func (d *Driver) allowlistEgress(p bay.NetworkPolicy, withGateway bool) ([]kube.NetworkPolicyEgressRule, error) {
	parsed, err := bay.ParseNetworkPolicy("network", p)
	if err != nil {
		return nil, err
	}
	refuse := func(kind string, e bay.NetworkEntry) error {
		return bay.Errorf(bay.CodeCapabilityNotSupported,
			"This Kubernetes driver has no egress gateway, so it enforces network allowlists by address only (a NetworkPolicy cannot name hosts): %s entry %s; an operator enables names with %s", kind, e, egressGatewayKey)
	}
	var deny []netip.Prefix
	for _, e := range parsed.Deny {
		if !e.Prefix.IsValid() {
			if !withGateway {
				return nil, refuse("deny", e)
			}
			continue
		}
		deny = append(deny, e.Prefix) // on every port: an ipBlock exception has none
	}
	tcp := kube.ProtocolTCP
	var rules []kube.NetworkPolicyEgressRule
	for _, e := range parsed.Allow {
		if !e.Prefix.IsValid() {
			if !withGateway {
				return nil, refuse("allow", e)
			}
			continue
		}
		b := d.ipBlock(e.Prefix, deny)
		if b == nil {
			continue // wholly blocked or denied
		}
		rule := kube.NetworkPolicyEgressRule{To: []kube.NetworkPolicyPeer{{IPBlock: b}}}
		if e.Port > 0 {
			port := kube.FromInt32(int32(e.Port))
			rule.Ports = []kube.NetworkPolicyPort{{Protocol: &tcp, Port: &port}}
		}
		rules = append(rules, rule)
	}
	return rules, nil
}

// containerList reads the annContainers annotation of a Pod ("" or broken: from the spec).
func containerList(p *kube.Pod) []podContainer {
	var list []podContainer
	if s := p.Annotations[annContainers]; s != "" && json.Unmarshal([]byte(s), &list) == nil && len(list) == len(p.Spec.Containers) {
		return list
	}
	list = list[:0]
	for _, c := range p.Spec.Containers {
		pc := podContainer{Name: c.Name, RuntimeType: bay.RuntimeShip}
		if len(c.Ports) > 0 {
			pc.Port = int(c.Ports[0].ContainerPort)
		}
		list = append(list, pc)
	}
	return list
}

// hostPathType checks a host path mount on the node: a file where bay sees a regular file at
// that path (the skills index), else a directory.
func hostPathType(source string) *kube.HostPathType {
	t := kube.HostPathDirectory
	if fi, err := os.Stat(source); err == nil && fi.Mode().IsRegular() {
		t = kube.HostPathFile
	}
	return &t
}

// quantity is a pointer to v bytes as a quantity.
func quantity(v int64) *kube.Quantity {
	q := kube.NewQuantity(v)
	return &q
}

// DefaultTmpBytes bounds /tmp and /var/tmp when a spec has none (as the Docker driver's).
const DefaultTmpBytes = 256 << 20

// runtimeClass is the RuntimeClass of spec's Pod ("" = the cluster's default handler): the
// one of the runtime spec asks for (RunscRuntimeClass for runsc, none for runc), else
// RuntimeClassName. A one-shot in mode none that asks for no runtime is never called by bay:
// where the cluster has a runtime class whose Pods get loopback only, it runs there (as on
// Docker, without any interface but lo); else on the Pod network, closed by its deny-all
// NetworkPolicy (so does a one-shot under runsc: the runtime it asked for wins).
func (d *Driver) runtimeClass(spec bay.InstanceSpec) string {
	switch spec.Runtime {
	case bay.ContainerRuntimeRunsc:
		return d.cfg.RunscRuntimeClass
	case bay.ContainerRuntimeRunc:
		return ""
	}
	if isOneShot(spec) && spec.Network.Mode == bay.NetworkNone && d.cfg.NoNetworkRuntimeClass != "" {
		return d.cfg.NoNetworkRuntimeClass
	}
	return d.cfg.RuntimeClassName
}
