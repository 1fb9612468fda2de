package egressgw

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/egress"
	"github.com/shipyard-dev/shipyard/internal/bay/k8s/kube"
)

// ManagedSelector selects the Pods of bay's driver (every object it makes carries the label).
const ManagedSelector = "app.kubernetes.io/managed-by=shipyard-bay"

// Config configures a Gateway.
type Config struct {
	// Namespace is the sandboxes' namespace, whose Pods are watched (Selector: default
	// ManagedSelector).
	Namespace, Selector string
	// ServiceNamespace and Service name the gateway's own Service: its ClusterIP is what the
	// resolver answers for allowed names, its ports' targetPorts where the gateway listens.
	ServiceNamespace, Service string
	// PodIP is the address the gateway listens on (its Pod's).
	PodIP netip.Addr
	// Token authenticates bay on the admin port.
	Token string
	// Egress configures the resolver and gateway (upstream DNS, blocked and allowed ranges,
	// upstream ports); its listening ports come from the Service.
	Egress egress.Config
	// Metrics, when set, is served at GET /metrics of the admin port (with the token): the
	// counters of Egress.Observer.
	Metrics http.Handler
	Log     *slog.Logger
}

// Gateway is the egress gateway of one Pod.
type Gateway struct {
	cfg Config
	cs  *kube.Client
	log *slog.Logger
	svc *egress.Service

	ready     atomic.Bool
	clusterIP netip.Addr

	mu    sync.Mutex
	known map[string]known // Pod name -> what is registered for it
}

// known is a registered Pod.
type known struct {
	addr      netip.Addr
	sandboxID string
	version   string
}

// New returns a gateway using the API client cs; nothing runs until Run.
func New(cfg Config, cs *kube.Client) (*Gateway, error) {
	var errs []error
	if cfg.Namespace == "" {
		errs = append(errs, errors.New("no sandbox namespace"))
	}
	if cfg.Service == "" || cfg.ServiceNamespace == "" {
		errs = append(errs, errors.New("no gateway Service (name and namespace)"))
	}
	if !cfg.PodIP.IsValid() {
		errs = append(errs, errors.New("no Pod address to listen on"))
	}
	if len(cfg.Token) < 16 {
		errs = append(errs, errors.New("the admin token must be at least 16 characters"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("egress gateway: %w", err)
	}
	if cfg.Selector == "" {
		cfg.Selector = ManagedSelector
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Gateway{cfg: cfg, cs: cs, log: cfg.Log, known: map[string]known{}}, nil
}

// ServicePorts are the gateway Service's ports by name: its targetPorts (the Pods'), and the
// Service's own.
type ServicePorts struct {
	ClusterIP netip.Addr
	Target    map[string]int
	Service   map[string]int
	// Selector selects the gateway's Pods.
	Selector map[string]string
}

// ReadService reads the gateway Service and checks it has every port the gateway serves, each
// with a numeric targetPort (or none: the port itself).
func ReadService(ctx context.Context, cs *kube.Client, ns, name string) (ServicePorts, error) {
	s, err := cs.Services(ns).Get(ctx, name)
	if err != nil {
		return ServicePorts{}, fmt.Errorf("egress gateway Service %s/%s: %w", ns, name, err)
	}
	ip, err := netip.ParseAddr(s.Spec.ClusterIP)
	if err != nil || !ip.Is4() {
		return ServicePorts{}, fmt.Errorf("egress gateway Service %s/%s: its cluster address %q is not IPv4 (headless Services do not work)", ns, name, s.Spec.ClusterIP)
	}
	if len(s.Spec.Selector) == 0 {
		return ServicePorts{}, fmt.Errorf("egress gateway Service %s/%s has no selector", ns, name)
	}
	sp := ServicePorts{ClusterIP: ip, Target: map[string]int{}, Service: map[string]int{}, Selector: s.Spec.Selector}
	for _, p := range s.Spec.Ports {
		t := int(p.Port)
		if p.TargetPort != nil {
			if p.TargetPort.IsStr {
				if n, err := strconv.Atoi(p.TargetPort.StrVal); err == nil {
					t = n
				} else {
					return ServicePorts{}, fmt.Errorf("egress gateway Service %s/%s: port %s has the named targetPort %q; give its number", ns, name, p.Name, p.TargetPort.StrVal)
				}
			} else if p.TargetPort.IntVal != 0 {
				t = int(p.TargetPort.IntVal)
			}
		}
		sp.Target[p.Name], sp.Service[p.Name] = t, int(p.Port)
	}
	var missing []string
	for _, n := range []string{PortDNS, PortDNSTCP, PortHTTP, PortTLS, PortProxy, PortAdmin} {
		if _, ok := sp.Target[n]; !ok {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		return ServicePorts{}, fmt.Errorf("egress gateway Service %s/%s lacks the ports named %v", ns, name, missing)
	}
	if sp.Target[PortDNS] != sp.Target[PortDNSTCP] {
		return ServicePorts{}, fmt.Errorf("egress gateway Service %s/%s: ports dns and dns-tcp must reach the same targetPort", ns, name)
	}
	return sp, nil
}

// Run serves until ctx ends: it reads the Service, starts the resolver and gateway on the
// Pod's address and the admin port, and keeps the registrations in line with the sandbox
// Pods. It returns the first error that stops it.
func (g *Gateway) Run(ctx context.Context) error {
	var sp ServicePorts
	for {
		var err error
		if sp, err = ReadService(ctx, g.cs, g.cfg.ServiceNamespace, g.cfg.Service); err == nil {
			break
		}
		g.log.Warn("egress gateway: waiting for its Service", "err", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
	g.clusterIP = sp.ClusterIP
	ecfg := g.cfg.Egress
	ecfg.DNSPort, ecfg.HTTPPort, ecfg.TLSPort, ecfg.ProxyPort = sp.Target[PortDNS], sp.Target[PortHTTP], sp.Target[PortTLS], sp.Target[PortProxy]
	// No direct ranges here: an allowlist's addresses are the NetworkPolicy's (the sandbox
	// reaches them itself), so the direct port only has to be somewhere free.
	ecfg.DirectPort = -1
	ecfg.Log = g.log.With("component", "egress")
	g.svc = egress.New(ecfg)
	defer g.svc.Close()
	if _, err := g.svc.Listen(ctx, g.cfg.PodIP); err != nil {
		return err
	}
	admin := &http.Server{
		Addr:              net.JoinHostPort(g.cfg.PodIP.String(), strconv.Itoa(sp.Target[PortAdmin])),
		Handler:           g.adminHandler(),
		ReadHeaderTimeout: 10 * time.Second,
	}
	al, err := net.Listen("tcp", admin.Addr)
	if err != nil {
		return fmt.Errorf("egress gateway: admin port: %w", err)
	}
	errc := make(chan error, 3)
	go func() { errc <- admin.Serve(al) }()
	if p, ok := sp.Target[PortBarrier]; ok {
		bl, err := net.Listen("tcp", net.JoinHostPort(g.cfg.PodIP.String(), strconv.Itoa(p)))
		if err != nil {
			_ = al.Close()
			return fmt.Errorf("egress gateway: barrier port: %w", err)
		}
		defer bl.Close()
		go func() { errc <- acceptAndClose(ctx, bl) }()
	}
	go func() { errc <- g.watch(ctx) }()
	g.log.Info("egress gateway serving", "address", g.cfg.PodIP, "cluster_ip", sp.ClusterIP, "admin", admin.Addr,
		"namespace", g.cfg.Namespace)
	select {
	case <-ctx.Done():
		err = nil
	case err = <-errc:
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = admin.Shutdown(sctx)
	return err
}

// watch lists the sandbox Pods, registers them, and follows their changes; a watch that ends
// (the server's timeout, an expired version) is followed by a new list that also forgets the
// Pods gone meanwhile.
func (g *Gateway) watch(ctx context.Context) error {
	pods := g.cs.Pods(g.cfg.Namespace)
	backoff := time.Second
	for ctx.Err() == nil {
		list, err := pods.List(ctx, kube.ListOptions{LabelSelector: g.cfg.Selector})
		if err != nil {
			g.log.Warn("egress gateway: list sandbox Pods", "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 30*time.Second)
			continue
		}
		backoff = time.Second
		seen := map[string]bool{}
		for i := range list.Items {
			seen[list.Items[i].Name] = true
			g.apply(&list.Items[i], false)
		}
		g.mu.Lock()
		var stale []string
		for name := range g.known {
			if !seen[name] {
				stale = append(stale, name)
			}
		}
		g.mu.Unlock()
		for _, name := range stale {
			g.forget(name)
		}
		if g.ready.CompareAndSwap(false, true) {
			g.log.Info("egress gateway ready", "pods", len(list.Items))
		}
		w, err := pods.Watch(ctx, kube.ListOptions{LabelSelector: g.cfg.Selector, ResourceVersion: list.ResourceVersion, AllowWatchBookmarks: true})
		if err != nil {
			g.log.Warn("egress gateway: watch sandbox Pods", "err", err)
			continue
		}
		for ev := range w.Events() {
			switch ev.Type {
			case kube.Added, kube.Modified:
				g.apply(ev.Object, false)
			case kube.Deleted:
				g.apply(ev.Object, true)
			case kube.Error:
				g.log.Debug("egress gateway: the Pod watch ended", "err", ev.Err)
			}
			if ev.Type == kube.Error {
				break
			}
		}
		w.Stop()
	}
	return nil
}

// apply brings the registration of one Pod in line with what it is now.
func (g *Gateway) apply(p *kube.Pod, deleted bool) {
	ann, has := p.Annotations[AnnotationPolicy]
	addr, addrErr := netip.ParseAddr(p.Status.PodIP)
	gone := deleted || p.DeletionTimestamp != nil || p.Status.Phase == kube.PodSucceeded || p.Status.Phase == kube.PodFailed
	if gone || !has || addrErr != nil {
		g.forget(p.Name)
		return
	}
	pp, err := Decode(ann)
	if err != nil || pp.Policy.EffectiveMode() != bay.NetworkAllowlist {
		if err != nil {
			g.log.Warn("egress gateway: a sandbox Pod's policy cannot be read; it stays refused", "pod", p.Name, "err", err)
		}
		g.forget(p.Name)
		return
	}
	v := Version(ann)
	g.mu.Lock()
	cur, ok := g.known[p.Name]
	g.mu.Unlock()
	switch {
	case ok && cur.addr == addr && cur.version == v:
		return
	case ok && cur.addr == addr:
		if err := g.svc.Update(p.Name, pp.Policy); err != nil {
			g.log.Warn("egress gateway: update", "pod", p.Name, "err", err)
			g.forget(p.Name)
			return
		}
	default:
		if ok {
			g.forget(p.Name)
		}
		if err := g.svc.Register(addr, g.clusterIP, p.Name, pp.SandboxID, pp.Policy); err != nil {
			g.log.Warn("egress gateway: register", "pod", p.Name, "err", err)
			return
		}
	}
	g.mu.Lock()
	g.known[p.Name] = known{addr: addr, sandboxID: pp.SandboxID, version: v}
	g.mu.Unlock()
	g.log.Info("egress policy applied", "pod", p.Name, "sandbox_id", pp.SandboxID, "address", addr, "version", v)
}

// forget unregisters a Pod (its open connections are closed).
func (g *Gateway) forget(name string) {
	g.mu.Lock()
	_, ok := g.known[name]
	delete(g.known, name)
	g.mu.Unlock()
	if ok {
		g.svc.Unregister(name)
		g.log.Info("egress policy forgotten", "pod", name)
	}
}

// status is what the gateway applied for a Pod ("" = nothing).
func (g *Gateway) status(name string) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.known[name].version
}

// acceptAndClose serves the barrier port: every connection is closed at once (only whether it
// could be made matters). It returns nil once ctx ends.
func acceptAndClose(ctx context.Context, l net.Listener) error {
	for {
		c, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("egress gateway: barrier port: %w", err)
		}
		_ = c.Close()
	}
}
