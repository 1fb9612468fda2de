package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"strings"

	"github.com/shipyard-dev/shipyard/internal/bay/config"
	"github.com/shipyard-dev/shipyard/internal/bay/k8s"
	"github.com/shipyard-dev/shipyard/internal/bay/k8s/egressgw"
	"github.com/shipyard-dev/shipyard/internal/bay/metrics"
	"github.com/shipyard-dev/shipyard/internal/version"
)

// EnvPodIP is the gateway Pod's address (the downward API's status.podIP).
const EnvPodIP = "POD_IP"

// RunEgressGateway is `bay egress-gateway`: the egress gateway of the Kubernetes driver
// (internal/bay/k8s/egressgw), configured by bay's own configuration file: the sandboxes'
// namespace (driver.k8s.namespace), the gateway's Service and token (driver.k8s.egress_gateway),
// the ranges it refuses and allows (security.blocked_hosts, allowed_hosts) and its upstream DNS
// (security.egress_dns_upstream, default the Pod's resolv.conf). It listens on $POD_IP and
// serves until ctx ends.
func RunEgressGateway(ctx context.Context, configFile string, log *slog.Logger) error {
	cfg, err := config.Load(config.LoadOptions{File: configFile})
	if err != nil {
		return err
	}
	k := cfg.Driver.K8s
	g := k.EgressGateway
	if g.Service == "" {
		return errors.New("driver.k8s.egress_gateway.service is not set")
	}
	tok, err := os.ReadFile(g.TokenFile)
	if err != nil {
		return fmt.Errorf("driver.k8s.egress_gateway.token_file: %w", err)
	}
	podIP, err := netip.ParseAddr(os.Getenv(EnvPodIP))
	if err != nil {
		return fmt.Errorf("$%s (the Pod's address, from the downward API): %w", EnvPodIP, err)
	}
	ec, err := egressSettings(cfg)
	if err != nil {
		return err
	}
	ec.UpstreamHTTPPort, ec.UpstreamTLSPort = g.UpstreamHTTPPort, g.UpstreamTLSPort
	cs, err := k8s.APIClient(k.Kubeconfig, "shipyard-egress-gateway")
	if err != nil {
		return err
	}
	ns := g.Namespace
	if ns == "" {
		ns = k.Namespace
	}
	// The same counters as bay's own resolver and gateway (bay_egress_*), served on the admin
	// port: on Kubernetes the refusals happen in the gateway's Pods, not in bay.
	m := metrics.New(version.Version, log)
	ec.Observer = m
	gw, err := egressgw.New(egressgw.Config{
		Namespace: k.Namespace, ServiceNamespace: ns, Service: g.Service, PodIP: podIP,
		Token:   strings.TrimSpace(string(tok)),
		Egress:  ec,
		Metrics: m.Handler(),
		Log:     log.With("component", "egress-gateway"),
	}, cs)
	if err != nil {
		return err
	}
	return gw.Run(ctx)
}
