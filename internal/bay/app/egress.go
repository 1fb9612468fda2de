package app

import (
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
	blocked, err := netguard.ParseHosts(cfg.Security.BlockedHosts)
	var allowed []netip.Prefix
	if err == nil {
		allowed, err = netguard.ParseHosts(cfg.Security.AllowedHosts)
	}
	if err != nil { // validated with the configuration
		log.Error("egress gateway unavailable", "err", err)
		return nil
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
	return egress.New(egress.Config{
		Upstream: upstream, Blocked: blocked, Allowed: allowed, ProxyPort: cfg.Security.EgressProxyPort,
		Observer: obs,
		Log:      log.With("component", "egress"),
	})
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
