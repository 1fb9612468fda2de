// Package k8s is the bay.Driver on Kubernetes (through its own small API client, package kube). It passes
// internal/bay/drivertest against a real single-node cluster (scripts/k8s).
//
// An instance is one Pod holding every container of the spec (they share the Pod's network, so
// they reach each other on localhost, and by container name through host aliases), a Secret
// holding the containers' environment (the runtime token among it never appears in the Pod's
// spec) and, unless switched off, a NetworkPolicy of its own. A cargo volume is a
// PersistentVolumeClaim (ReadWriteOnce). Skill folders and the skills index reach the Pods as
// immutable ConfigMaps shared by content (files.go). A one-shot (an audited execution) is a Pod of its one
// container, whose output WaitInstance reads back from the kubelet's log (wait.go). Every
// object carries the spec's labels, encoded for Kubernetes' label syntax (labels.go), so that
// the orphan GC and ListInstances find them by label as on Docker.
//
// What it guarantees, like the Docker driver: every container runs with all capabilities
// dropped but the ones an image's runtime needs (RuntimeCaps, the rule the Docker driver reads
// from the image's label), allowPrivilegeEscalation false (no-new-privileges), seccomp
// RuntimeDefault (or, opted in, the node's user-namespace profile), never privileged, as the
// spec's non-root user (default 1000:1000, runAsNonRoot) unless the runtime separates
// privileges itself; the Pod never restarts a container (a died runtime is a dead instance, as
// on Docker); images are never pulled unless the pull policy says so. What Kubernetes cannot express per Pod is said where it applies: the pids limit is
// the kubelet's podPidsLimit, the same for every Pod of a node.
package k8s

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/k8s/kube"
)

// Defaults.
const (
	DefaultNamespace         = "bay"
	DefaultStorageSize       = "1Gi"
	DefaultPodStartupTimeout = 60 * time.Second
	DefaultLabelPrefix       = "bay"
	DefaultUser              = "1000:1000"
	// DefaultSeccompUserNamespacesProfile is where scripts/k8s installs the user-namespace
	// profile under the kubelet's seccomp root.
	DefaultSeccompUserNamespacesProfile = "shipyard/userns.json"
	// DefaultRunscRuntimeClass is Config.RunscRuntimeClass's default.
	DefaultRunscRuntimeClass = "gvisor"
	// RemoveTimeout bounds a removal when its ctx has no deadline of its own.
	RemoveTimeout = 60 * time.Second
	// stopGrace is the Pod's termination grace period: gull closes Chromium on SIGTERM so that
	// the browser profile reaches the cargo, well under a second; a runtime that does not exit
	// by then is killed (as on Docker).
	stopGrace = 3
)

// Config mirrors config.yaml's driver.k8s block.
type Config struct {
	// Namespace holds every object of the driver; it must exist.
	Namespace string
	// Kubeconfig is a kubeconfig file; "" = the in-cluster configuration (bay runs in a Pod),
	// else $KUBECONFIG or ~/.kube/config.
	Kubeconfig string
	// StorageClass of the cargo claims; "" = the cluster's default class.
	StorageClass string
	// DefaultStorageSize is a cargo claim's size when its labels carry no size (a quantity:
	// "1Gi").
	DefaultStorageSize string
	// StorageEnforcesSize says that StorageClass bounds a volume by its claim's size (block
	// CSI drivers do; hostPath-like provisioners do not): volumes then report the claim's
	// capacity as their bound, else none (the port's rule for a bound that is not enforced).
	StorageEnforcesSize bool
	// ImagePullSecrets are the names of Secrets in Namespace the Pods pull with.
	ImagePullSecrets []string
	// ImagePullPolicy: Always, IfNotPresent (default) or Never.
	ImagePullPolicy kube.PullPolicy
	// PodStartupTimeout bounds CreateInstance's wait for every container to run.
	PodStartupTimeout time.Duration
	// LabelPrefix replaces the "bay" of bay's label keys on the cluster's objects: "bay" (the
	// default) keeps "bay.sandbox_id"; "shipyard.dev/" makes it "shipyard.dev/sandbox_id";
	// "acme" makes it "acme.sandbox_id".
	LabelPrefix string
	// RuntimeClassName is the Pods' runtime class (gVisor, Kata) where the cluster has one; "" =
	// the cluster's default runtime.
	RuntimeClassName string
	// RuntimeCaps maps an image repository (the reference without its tag or digest, e.g.
	// "ship" or "registry.example/ship") to the capabilities its runtime keeps to run user code
	// as another uid: such a container starts as root with exactly those (and ALL others
	// dropped, no privilege escalation), and separates privileges itself. Kubernetes cannot read
	// an image's labels, where the Docker driver finds this (dev.shipyard.image.runtime-caps),
	// so the operator states it here. Only bay.AddableCaps are accepted.
	RuntimeCaps map[string][]string
	// NetworkPolicy creates a NetworkPolicy per instance (default on; it takes effect where
	// the cluster's network plugin enforces policies).
	NetworkPolicy bool
	// BayCIDRs are the addresses bay reaches runtimes from when it runs outside the cluster;
	// BayPodLabels (in BayNamespace, default Namespace) select bay's Pods when it runs inside.
	// The NetworkPolicy admits ingress from these only. Neither set: bay's Pods labelled
	// app.kubernetes.io/name=shipyard-bay in Namespace.
	BayCIDRs     []string
	BayPodLabels map[string]string
	BayNamespace string
	// AllowDNS lets sandboxes reach the cluster's DNS (kube-system, k8s-app=kube-dns) on port
	// 53; every other private, cluster and host address is closed to their egress.
	AllowDNS bool
	// ConnectMode: pod_ip (default) or proxy (through the API server; bay outside the cluster).
	ConnectMode ConnectMode
	// RequestRatio is the share of a container's CPU and memory limits it requests (what the
	// scheduler reserves); 0 < r <= 1, default 0.25.
	RequestRatio float64
	// BlockedRanges are closed to every sandbox's egress (security.blocked_hosts), as
	// exceptions of the NetworkPolicy's address blocks; nil = the private, shared, loopback and
	// link-local ranges.
	BlockedRanges []netip.Prefix
	// AllowedRanges are exceptions to BlockedRanges (security.allowed_hosts): sandboxes in
	// mode open reach them (their NetworkPolicy admits them as peers of their own).
	AllowedRanges []netip.Prefix
	// SeccompUserNamespacesProfile is the Localhost seccomp profile, relative to the kubelet's
	// seccomp root (<kubelet root>/seccomp), of a container that opts into
	// bay.SeccompUserNamespaces: the runtime's default filter plus clone, clone3, unshare,
	// setns and chroot (UserNamespacesSeccompProfile writes it). Every node that may run such a
	// Pod must have the file; scripts/k8s installs it on the test node.
	SeccompUserNamespacesProfile string
	// NoNetworkRuntimeClass is the RuntimeClass of one-shots in network mode none, whose
	// handler gives a Pod loopback only (the test node's: a containerd runtime whose CNI
	// configuration attaches no interface). "" = such a one-shot gets the Pod network, closed
	// to and from everything by its NetworkPolicy where the network plugin enforces policies.
	NoNetworkRuntimeClass string
	// RunscRuntimeClass is the RuntimeClass of the Pods of instances asking for the runtime
	// runsc (gVisor; a profile's runtime: runsc); default "gvisor", the name gVisor's own
	// documentation gives the class whose handler is containerd's runsc shim. Instances asking
	// for runc get the cluster's default handler (no class); instances asking for neither
	// get RuntimeClassName.
	RunscRuntimeClass string
	// HostMounts says how snapshot mounts (bay.Mount.Snapshot: skill folders and the skills
	// index, which live on bay's filesystem) reach the Pods: configmap (default) copies them
	// into immutable ConfigMaps (files.go), which works on any cluster; hostpath mounts the
	// path on the node, which works only where the node has bay's directory at that path.
	HostMounts HostMounts
	// EgressGateway is the gateway that enforces allowlists naming hosts (egress.go).
	EgressGateway EgressGateway
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{
		Namespace:          DefaultNamespace,
		DefaultStorageSize: DefaultStorageSize,
		ImagePullPolicy:    kube.PullIfNotPresent,
		PodStartupTimeout:  DefaultPodStartupTimeout,
		LabelPrefix:        DefaultLabelPrefix,
		NetworkPolicy:      true,
		AllowDNS:           true,
		RequestRatio:       0.25,
		ConnectMode:        ConnectPodIP,

		SeccompUserNamespacesProfile: DefaultSeccompUserNamespacesProfile,
		RunscRuntimeClass:            DefaultRunscRuntimeClass,
		HostMounts:                   HostMountsConfigMap,
		EgressGateway:                EgressGateway{ApplyTimeout: DefaultApplyTimeout},
	}
}

// PullPolicy maps config.yaml's driver.image_pull_policy (always, if_not_present, never) onto
// Kubernetes' ("" for anything else, which Validate refuses).
func PullPolicy(v string) kube.PullPolicy {
	return map[string]kube.PullPolicy{"always": kube.PullAlways, "if_not_present": kube.PullIfNotPresent, "never": kube.PullNever}[v]
}

// Validate reports every invalid field at once.
func (c Config) Validate() error {
	var errs []error
	if msgs := kube.IsDNS1123Label(c.Namespace); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("namespace %q: %s", c.Namespace, strings.Join(msgs, "; ")))
	}
	if q, err := kube.ParseQuantity(c.DefaultStorageSize); err != nil || q.Sign() <= 0 {
		errs = append(errs, fmt.Errorf("default_storage_size %q must be a positive quantity such as 1Gi", c.DefaultStorageSize))
	}
	if c.StorageClass != "" {
		if msgs := kube.IsDNS1123Subdomain(c.StorageClass); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("storage_class %q: %s", c.StorageClass, strings.Join(msgs, "; ")))
		}
	}
	for _, s := range c.ImagePullSecrets {
		if msgs := kube.IsDNS1123Subdomain(s); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("image_pull_secrets %q: %s", s, strings.Join(msgs, "; ")))
		}
	}
	switch c.ImagePullPolicy {
	case kube.PullAlways, kube.PullIfNotPresent, kube.PullNever:
	default:
		errs = append(errs, fmt.Errorf("image pull policy must be Always, IfNotPresent or Never, got %q", c.ImagePullPolicy))
	}
	if c.PodStartupTimeout <= 0 || c.PodStartupTimeout > time.Hour {
		errs = append(errs, fmt.Errorf("pod_startup_timeout must be 1 s..1 h, got %v", c.PodStartupTimeout))
	}
	if _, err := newLabelCodec(c.LabelPrefix); err != nil {
		errs = append(errs, err)
	}
	if c.RuntimeClassName != "" {
		if msgs := kube.IsDNS1123Subdomain(c.RuntimeClassName); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("runtime_class_name %q: %s", c.RuntimeClassName, strings.Join(msgs, "; ")))
		}
	}
	for img, caps := range c.RuntimeCaps {
		if img == "" || strings.ContainsAny(img, " \t") || repository(img) != img {
			errs = append(errs, fmt.Errorf("runtime_caps: %q is not an image repository (no tag or digest)", img))
		}
		for _, cp := range caps {
			if !slices.Contains(bay.AddableCaps, normCap(cp)) {
				errs = append(errs, fmt.Errorf("runtime_caps %s: capability %s may not be added (allowed: %v)", img, cp, bay.AddableCaps))
			}
		}
	}
	for _, cidr := range c.BayCIDRs {
		if _, _, err := net.ParseCIDR(cidr); err != nil {
			errs = append(errs, fmt.Errorf("bay_cidrs: %q is not a CIDR", cidr))
		}
	}
	for k, v := range c.BayPodLabels {
		if len(kube.IsQualifiedName(k)) > 0 || len(kube.IsValidLabelValue(v)) > 0 {
			errs = append(errs, fmt.Errorf("bay_pod_labels: %s=%s is not a valid label", k, v))
		}
	}
	if c.BayNamespace != "" && len(kube.IsDNS1123Label(c.BayNamespace)) > 0 {
		errs = append(errs, fmt.Errorf("bay_namespace %q is not a namespace name", c.BayNamespace))
	}
	if c.ConnectMode != ConnectPodIP && c.ConnectMode != ConnectProxy {
		errs = append(errs, fmt.Errorf("connect_mode must be pod_ip or proxy, got %q", c.ConnectMode))
	}
	if p := c.SeccompUserNamespacesProfile; p == "" || path.IsAbs(p) || path.Clean(p) != p || strings.HasPrefix(p, "..") {
		errs = append(errs, fmt.Errorf("seccomp_userns_profile %q must be a clean path relative to the kubelet's seccomp root", p))
	}
	if c.RunscRuntimeClass == "" || len(kube.IsDNS1123Subdomain(c.RunscRuntimeClass)) > 0 {
		errs = append(errs, fmt.Errorf("runsc_runtime_class %q is not a RuntimeClass name", c.RunscRuntimeClass))
	}
	if c.NoNetworkRuntimeClass != "" && len(kube.IsDNS1123Subdomain(c.NoNetworkRuntimeClass)) > 0 {
		errs = append(errs, fmt.Errorf("no_network_runtime_class %q is not a RuntimeClass name", c.NoNetworkRuntimeClass))
	}
	for _, r := range slices.Concat(c.BlockedRanges, c.AllowedRanges) {
		if !r.IsValid() {
			errs = append(errs, errors.New("blocked ranges: an invalid range"))
		}
	}
	if c.HostMounts != HostMountsConfigMap && c.HostMounts != HostMountsHostPath {
		errs = append(errs, fmt.Errorf("host_mounts must be configmap or hostpath, got %q", c.HostMounts))
	}
	if g := c.EgressGateway; g.Service != "" {
		if len(kube.IsDNS1123Label(g.Service)) > 0 {
			errs = append(errs, fmt.Errorf("egress_gateway.service %q is not a Service name", g.Service))
		}
		if g.Namespace != "" && len(kube.IsDNS1123Label(g.Namespace)) > 0 {
			errs = append(errs, fmt.Errorf("egress_gateway.namespace %q is not a namespace name", g.Namespace))
		}
		if len(g.Token) < 16 {
			errs = append(errs, errors.New("egress_gateway: the admin token must be at least 16 characters"))
		}
		if g.ApplyTimeout <= 0 {
			errs = append(errs, fmt.Errorf("egress_gateway.apply_timeout must be positive, got %v", g.ApplyTimeout))
		}
	}
	if c.RequestRatio <= 0 || c.RequestRatio > 1 {
		errs = append(errs, fmt.Errorf("request_ratio must be in (0, 1], got %v", c.RequestRatio))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	return nil
}

// repository is an image reference without its digest and tag ("reg:5000/ship:1" -> "reg:5000/ship").
func repository(image string) string {
	image, _, _ = strings.Cut(image, "@")
	slash := strings.LastIndex(image, "/")
	if colon := strings.LastIndex(image, ":"); colon > slash {
		image = image[:colon]
	}
	return image
}

func normCap(c string) string {
	return strings.TrimPrefix(strings.ToUpper(strings.TrimSpace(c)), "CAP_")
}

// Driver is the Kubernetes bay.Driver. It is safe for concurrent use.
type Driver struct {
	cfg    Config
	cs     *kube.Client
	rest   *kube.Config
	labels labelCodec
	log    *slog.Logger
	proxy  apiProxy // ConnectProxy's forwarder
}

var (
	_ bay.Driver            = (*Driver)(nil)
	_ bay.SnapshotCollector = (*Driver)(nil)
)

// New returns a driver for the cluster cfg.Kubeconfig names. It does not contact the cluster;
// call Ping.
func New(cfg Config, log *slog.Logger) (*Driver, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	rc, err := restConfig(cfg.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubernetes credentials: %w", err)
	}
	rc.UserAgent = "shipyard-bay"
	cs, err := kube.New(rc)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	codec, _ := newLabelCodec(cfg.LabelPrefix)
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Driver{cfg: cfg, cs: cs, rest: rc, labels: codec, log: log.With("component", "k8s", "namespace", cfg.Namespace)}, nil
}

// APIClient is a client of the API server kubeconfig names, found as the driver finds its own
// (restConfig), for bay's other programs on the cluster (the egress gateway).
func APIClient(kubeconfig, userAgent string) (*kube.Client, error) {
	rc, err := restConfig(kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubernetes credentials: %w", err)
	}
	rc.UserAgent = userAgent
	return kube.New(rc)
}

// restConfig loads a kubeconfig file, or the in-cluster configuration when path is "" and bay
// runs in a Pod, else the default kubeconfig files ($KUBECONFIG, ~/.kube/config).
func restConfig(path string) (*kube.Config, error) {
	if path != "" {
		return kube.LoadKubeconfig(path)
	}
	c, err := kube.InCluster()
	if err == nil {
		return c, nil
	}
	if !errors.Is(err, kube.ErrNotInCluster) {
		return nil, err
	}
	paths := kube.DefaultKubeconfigPaths()
	if len(paths) == 0 {
		return nil, errors.New("no kubeconfig given, not in a cluster, and no home directory for ~/.kube/config")
	}
	c, err = kube.LoadKubeconfig(paths...)
	if err != nil {
		return nil, fmt.Errorf("no kubeconfig given, not in a cluster, and the default kubeconfig fails: %w", err)
	}
	return c, nil
}

// Config returns the driver's configuration.
func (d *Driver) Config() Config { return d.cfg }

// Ping checks that the API server answers and that the driver may list Pods in its namespace.
func (d *Driver) Ping(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("ping kubernetes: %w", err)
	}
	if _, err := d.cs.Version(ctx); err != nil {
		return fmt.Errorf("ping kubernetes API server %s: %w", d.rest.Host, classify(err))
	}
	if _, err := d.cs.Pods(d.cfg.Namespace).List(ctx, kube.ListOptions{Limit: 1}); err != nil {
		return fmt.Errorf("ping kubernetes: list pods in namespace %s: %w", d.cfg.Namespace, classify(err))
	}
	return nil
}

// ---------------------------------------------------------------------------------------------
// error classification
// ---------------------------------------------------------------------------------------------

var errUnavailable = &bay.Error{Code: bay.CodeUnavailable, Message: "kubernetes API server unreachable"}

// classify maps an API error onto bay.ErrNotFound / bay.ErrConflict / unavailable.
func classify(err error) error {
	var netErr net.Error
	switch {
	case err == nil:
		return nil
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	case kube.IsNotFound(err):
		return bay.Classified(bay.ErrNotFound, err)
	case kube.IsAlreadyExists(err), kube.HasReason(err, kube.ReasonConflict):
		return bay.Classified(bay.ErrConflict, err)
	case kube.HasReason(err, kube.ReasonServiceUnavailable), errors.As(err, &netErr):
		return bay.Classified(errUnavailable, err)
	}
	return err
}

// detached returns a context for a rollback or cleanup that must run although ctx ended.
func detached(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), RemoveTimeout)
}

// withDeadline bounds ctx by RemoveTimeout when it has no deadline of its own.
func withDeadline(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, RemoveTimeout)
}
