package app

import (
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"strings"

	"github.com/shipyard-dev/shipyard/internal/bay/config"
	"github.com/shipyard-dev/shipyard/internal/bay/egress"
	"github.com/shipyard-dev/shipyard/internal/bay/netguard"
)

// egressGateway returns bay's resolver and egress gateway for the network modes none and
// allowlist (internal/bay/egress), or nil when the sandbox firewall is off or unavailable
// (sandboxes in those modes are then refused; open ones keep working as before).
func egressGateway(cfg *config.Config, guarded bool, obs egress.Observer, log *slog.Logger) *egress.Service {
	if !guarded {
		return nil
	}
	ec, err := egressSettings(cfg)
	if err != nil { // validated with the configuration
		log.Error("egress gateway unavailable", "err", err)
		return nil
	}
	ec.ProxyPort, ec.Observer, ec.Log = cfg.Security.EgressProxyPort, obs, log.With("component", "egress")
	return egress.New(ec)
}

// egressSettings are the resolver's and gateway's settings of security.*: the ranges refused
// and allowed, and the upstream DNS servers (default the host's resolv.conf).
func egressSettings(cfg *config.Config) (egress.Config, error) {
	blocked, err := netguard.ParseHosts(cfg.Security.BlockedHosts)
	if err != nil {
		return egress.Config{}, fmt.Errorf("security.blocked_hosts: %w", err)
	}
	allowed, err := netguard.ParseHosts(cfg.Security.AllowedHosts)
	if err != nil {
		return egress.Config{}, fmt.Errorf("security.allowed_hosts: %w", err)
	}
	var upstream []string
	for _, u := range cfg.Security.EgressDNSUpstream {
		if s, err := config.EgressUpstream(u); err == nil {
			upstream = append(upstream, s)
		}
	}
	if len(upstream) == 0 {
		upstream = hostResolvers("/etc/resolv.conf")
	}
	return egress.Config{Upstream: upstream, Blocked: blocked, Allowed: allowed}, nil
}

// hostResolvers are the nameservers of a resolv.conf, loopback ones included (bay, unlike a
// sandbox, asks them from the host), as addr:53.
func hostResolvers(path string) []string {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var out []string
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != "nameserver" {
			continue
		}
		if a, err := netip.ParseAddr(f[1]); err == nil && a.Zone() == "" {
			out = append(out, netip.AddrPortFrom(a.Unmap(), 53).String())
		}
	}
	return out
}
